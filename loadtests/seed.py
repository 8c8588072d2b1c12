"""Seed a deployment for the load test: tenants x namespaces x users x memories, through the
operator CLI and the API (never SQL), so RLS, caches and query plans see a realistic spread.

    python loadtests/seed.py --host http://127.0.0.1:8080 --tenants 2 --namespaces 2 --users 4 \\
        --memories 5000 --plan /tmp/plan.json [--data-dir memvault-data]

Tenants are made by `memvault admin create-tenant` (it reaches the database as the server does:
``--data-dir`` or MEMVAULT_DATABASE_URL); with MEMVAULT_ADMIN_KEY set instead, the key's tenant is
the only one. Namespaces, a read/write key per tenant and the memories (LoCoMo turns, or generated
sentences where the dataset is absent) then go through REST. The plan file, which holds the keys,
is written 0600; give it to locust as MEMVAULT_LOADTEST_PLAN.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parent))

from scenarios.texts import Turn, corpus

BATCH = 250


def memvault_command() -> list[str]:
    """The `memvault` beside this Python (a venv's), else the one on PATH."""
    beside = Path(sys.executable).parent / "memvault"
    found = str(beside) if beside.exists() else shutil.which("memvault")
    return [found] if found else [sys.executable, "-m", "memvault.cli"]


def create_tenant(name: str, namespace: str, data_dir: Path | None) -> dict[str, Any]:
    cmd = [*memvault_command(), "admin", "create-tenant", name, "--namespace", namespace]
    if data_dir is not None:
        cmd += ["--data-dir", str(data_dir)]
    out = subprocess.run(cmd, check=True, capture_output=True, text=True, timeout=300).stdout
    return dict(json.loads(out[out.index("{") :]))


def _post(http: httpx.Client, path: str, key: str, body: Any, ok: tuple[int, ...] = (200, 201)) -> Any:
    r = http.post(path, json=body, headers={"Authorization": f"Bearer {key}"})
    if r.status_code not in ok:
        raise SystemExit(f"POST {path}: {r.status_code} {r.text[:300]}")
    return r.json()


def memories_for(turns: list[Turn], users: list[str]) -> list[dict[str, Any]]:
    speakers: dict[str, str] = {}
    out = []
    for t in turns:
        user = speakers.setdefault(f"{t.conversation}/{t.speaker}", users[len(speakers) % len(users)])
        out.append(
            {
                "content": f"{t.speaker}: {t.text}",
                "type": "event",
                "user_id": user,
                "session_id": f"{t.conversation}-{t.session}",
                "metadata": {"source": "loadtest-seed"},
            }
        )
    return out


def seed(args: argparse.Namespace) -> dict[str, Any]:
    run = uuid.uuid4().hex[:6]
    texts = corpus()
    per_ns = max(1, args.memories // (args.tenants * args.namespaces))
    admin_key = os.environ.get("MEMVAULT_ADMIN_KEY")
    if admin_key and args.tenants != 1:
        raise SystemExit("MEMVAULT_ADMIN_KEY seeds its own tenant only: use --tenants 1")
    plan: dict[str, Any] = {"host": args.host, "source": texts.source, "memories": 0, "tenants": []}
    started = time.perf_counter()
    cursor = 0
    with httpx.Client(base_url=args.host, timeout=600) as http:
        for i in range(args.tenants):
            namespaces = [f"lt-{run}-ns{j}" for j in range(args.namespaces)]
            if admin_key:
                name, key = "from-env", admin_key
                _post(http, "/v1/namespaces", key, {"name": namespaces[0]}, ok=(201, 409))
            else:
                made = create_tenant(f"loadtest-{run}-t{i}", namespaces[0], args.data_dir)
                name, key = made["name"], made["api_key"]
            for ns in namespaces[1:]:
                _post(http, "/v1/namespaces", key, {"name": ns}, ok=(201, 409))
            agent_key = _post(http, "/v1/keys", key, {"name": f"loadtest-{run}", "scopes": ["read", "write"]})["key"]
            users = [f"user-{k}" for k in range(args.users)]
            for ns in namespaces:
                turns = [texts.turns[(cursor + n) % len(texts.turns)] for n in range(per_ns)]
                cursor += per_ns
                rows = memories_for(turns, users)
                for b in range(0, len(rows), BATCH):
                    _post(http, f"/v1/namespaces/{ns}/memories/batch", key, {"memories": rows[b : b + BATCH]})
                plan["memories"] += len(rows)
                print(f"  {name}/{ns}: {len(rows)} memories", file=sys.stderr, flush=True)
            plan["tenants"].append({"name": name, "key": agent_key, "namespaces": namespaces, "users": users})
    plan["seconds"] = round(time.perf_counter() - started, 1)
    return plan


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--host", required=True, help="base URL, e.g. http://127.0.0.1:8080")
    parser.add_argument("--tenants", type=int, default=2)
    parser.add_argument("--namespaces", type=int, default=2, help="per tenant")
    parser.add_argument("--users", type=int, default=4, help="end users per tenant")
    parser.add_argument("--memories", type=int, default=5000, help="in all, spread evenly over the namespaces")
    parser.add_argument("--plan", type=Path, required=True, help="where to write the plan (it holds API keys)")
    parser.add_argument("--data-dir", type=Path, help="the embedded server's folder, for `memvault admin`")
    args = parser.parse_args(argv)
    plan = seed(args)
    args.plan.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(args.plan, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "w") as f:
        json.dump(plan, f, indent=2)
    print(
        f"seeded {plan['memories']} memories in {args.tenants} tenants x {args.namespaces} namespaces "
        f"x {args.users} users from {plan['source']} in {plan['seconds']} s",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
