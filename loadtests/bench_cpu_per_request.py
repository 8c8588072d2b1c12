"""CPU-seconds per request, per operation of the mixed scenario, for one or more source trees side
by side (A/B in one run): what the machine's capacity is made of, measured so that other work on a
shared machine does not move it (wall-clock req/s would).

Each tree gets its own embedded stack (`memvault serve --workers 1` on its own PostgreSQL, the
tree's code via PYTHONPATH), seeded the same way through the API (loadtests/seed.py). Then, in
rounds, each operation is sent ``--requests`` times by ``--concurrency`` clients to each tree in
turn (the order alternating by round), and the CPU the API process tree and the PostgreSQL
processes used meanwhile (from /proc: live processes plus the reaped children of the postmaster) is
divided by the requests. Each stack's idle CPU (its background tasks) is measured the same way and
subtracted. Operations: REST search with a new query, the same search again (the query embedding
cached), context, store, a batch of 10, get, list (20), MCP `memory_search` (tools/call in an
open session), and the MCP session's opening (initialize, initialized, tools/list).

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_cpu_per_request.py \\
        --tree main=/work/main --tree new=. --memories 5000 --requests 100 --rounds 3

The upper bound a machine allows for the mixed scenario is then cores / (the mix's CPU per request,
API + PostgreSQL; locust's own share not included).
"""

from __future__ import annotations

import argparse
import contextlib
import itertools
import json
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from collections import defaultdict
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import httpx

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import seed  # noqa: E402
from harness import tree_cpu  # noqa: E402
from scenarios.texts import Queries  # noqa: E402
from stack import Stack, embedded  # noqa: E402

TYPES = ["fact", "preference", "event", "decision", "note"]
# The mixed scenario's weights (scenarios/mixed.py), for the CPU of one average request of the mix.
MIX = {
    "search": 50,
    "context": 15,
    "store": 15,
    "batch10": 5,
    "get": 5,
    "list": 5,
    "mcp_search": 5,
}
OPS = ["search", "search_cached", "context", "store", "batch10", "get", "list", "mcp_search", "mcp_open"]


def _copy(src: Path, dst: Path) -> None:
    """A database folder as it is, owners and modes kept: the embedded PostgreSQL runs as a user of
    its own when started by root."""
    dst.mkdir(parents=True, exist_ok=True)
    subprocess.run(["cp", "-a", f"{src}/.", str(dst)], check=True)


class Target:
    """One tree's stack and the identities its requests act as."""

    def __init__(self, label: str, tree: Path, out: Path) -> None:
        self.label = label
        self.tree = tree
        self.data = Path(tempfile.mkdtemp(prefix=f"memvault-cpu-{label}-"))
        self.stack = Stack(out=out, data_dir=self.data)
        self.stack.env["PYTHONPATH"] = f"{tree / 'services'}:{tree / 'sdk'}"
        self.plan: dict[str, Any] = {}
        self.pg_settings: dict[str, str] = {}

    def start(self, args: argparse.Namespace) -> None:
        """Start on a copy of the seeded template (``--template``), seeding it first if it is empty."""
        template = args.template
        if not (template / "plan.json").exists():
            self._seed(args)
            self.stack.stop()  # PostgreSQL stopped cleanly, so its folder can be copied
            _copy(self.data, template / "data")
            fd = os.open(template / "plan.json", os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w") as f:
                json.dump(self.plan, f)
        _copy(template / "data", self.data)
        if self.pg_settings:
            with (self.data / "pg" / "postgresql.auto.conf").open("a") as conf:
                conf.writelines(f"{name} = '{value}'\n" for name, value in self.pg_settings.items())
        self.plan = json.loads((template / "plan.json").read_text())
        embedded(self.stack, 1)

    def _seed(self, args: argparse.Namespace) -> None:
        embedded(self.stack, 1)
        saved = dict(os.environ)
        os.environ.update({k: v for k, v in self.stack.env.items() if k.startswith("MEMVAULT_") or k == "PYTHONPATH"})
        try:
            self.plan = seed.seed(
                argparse.Namespace(
                    host=self.stack.host,
                    tenants=args.tenants,
                    namespaces=args.namespaces,
                    users=args.seed_users,
                    memories=args.memories,
                    data_dir=self.data,
                )
            )
        finally:
            os.environ.clear()
            os.environ.update(saved)

    def cpu(self) -> tuple[float, float]:
        api = sum(tree_cpu(pid) for pid in self.stack.pids("api"))
        return api, tree_cpu(self.stack.postmaster_pid())

    def stop(self) -> None:
        self.stack.stop()
        shutil.rmtree(self.data, ignore_errors=True)


class Client:
    """One simulated agent against one target: its identity, its ids, an MCP session."""

    def __init__(self, target: Target, n: int) -> None:
        tenant = target.plan["tenants"][n % len(target.plan["tenants"])]
        self.rng = random.Random(n)
        self.ns = tenant["namespaces"][n % len(tenant["namespaces"])]
        self.user = tenant["users"][n % len(tenant["users"])]
        self.session_id = f"cpu-{n}"
        self.headers = {"Authorization": f"Bearer {tenant['key']}"}
        self.http = httpx.Client(base_url=target.stack.host, headers=self.headers, timeout=120)
        self.queries = Queries(self.rng)
        self.cached = self.queries.new()
        self.ids: list[str] = []
        self.rpc_ids = itertools.count(1)
        self.mcp_headers: dict[str, str] = {}

    @property
    def base(self) -> str:
        return f"/v1/namespaces/{self.ns}"

    def _ok(self, r: httpx.Response, *codes: int) -> Any:
        if r.status_code not in codes:
            raise RuntimeError(f"{r.request.method} {r.request.url.path}: {r.status_code} {r.text[:300]}")
        return r.json() if r.content else None

    def memory(self) -> dict[str, Any]:
        turn = self.queries.sentence()
        return {
            "content": f"{turn.speaker}: {turn.text}",
            "type": self.rng.choice(TYPES),
            "user_id": self.user,
            "session_id": self.session_id,
            "metadata": {"source": "loadtest"},
        }

    def search(self) -> None:
        self._ok(self.http.post(f"{self.base}/search", json={"query": self.queries.new(), "limit": 10}), 200)

    def search_cached(self) -> None:
        self._ok(self.http.post(f"{self.base}/search", json={"query": self.cached, "limit": 10}), 200)

    def context(self) -> None:
        body = {"query": self.queries.new(), "user_id": self.user, "token_budget": 1500}
        self._ok(self.http.post(f"{self.base}/context", json=body), 200)

    def store(self) -> None:
        self.ids.append(self._ok(self.http.post(f"{self.base}/memories", json=self.memory()), 201)["id"])

    def batch10(self) -> None:
        body = {"memories": [self.memory() for _ in range(10)]}
        out = self._ok(self.http.post(f"{self.base}/memories/batch", json=body), 201)
        self.ids.extend(m["id"] for m in out["memories"])

    def list(self) -> None:
        out = self._ok(self.http.get(f"{self.base}/memories", params={"limit": 20, "user_id": self.user}), 200)
        self.ids.extend(m["id"] for m in out["data"])

    def get(self) -> None:
        if not self.ids:  # this user has nothing here yet: any memory of the namespace
            out = self._ok(self.http.get(f"{self.base}/memories", params={"limit": 20}), 200)
            self.ids.extend(m["id"] for m in out["data"])
        self._ok(self.http.get(f"{self.base}/memories/{self.rng.choice(self.ids)}"), 200)

    def _rpc(self, method: str, params: dict[str, Any] | None, notify: bool = False) -> Any:
        body: dict[str, Any] = {"jsonrpc": "2.0", "method": method}
        if not notify:
            body["id"] = next(self.rpc_ids)
        if params is not None:
            body["params"] = params
        headers = {"Accept": "application/json, text/event-stream", **self.mcp_headers}
        r = self.http.post("/mcp", content=json.dumps(body), headers={**headers, "Content-Type": "application/json"})
        if notify:
            return self._ok(r, 200, 202)
        text = r.text
        if "text/event-stream" in r.headers.get("content-type", ""):
            text = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")][-1]
        msg = json.loads(text)
        if r.status_code != 200 or "error" in msg or msg["result"].get("isError"):
            raise RuntimeError(f"MCP {method}: {r.status_code} {text[:300]}")
        if method == "initialize" and (sid := r.headers.get("mcp-session-id")):
            self.mcp_headers["Mcp-Session-Id"] = sid
        return msg["result"]

    def mcp_open(self) -> None:
        self.mcp_headers = {}
        params = {
            "protocolVersion": "2025-11-25",
            "capabilities": {},
            "clientInfo": {"name": "memvault-bench", "version": "1.0"},
        }
        version = self._rpc("initialize", params)["protocolVersion"]
        self.mcp_headers["MCP-Protocol-Version"] = version
        self._rpc("notifications/initialized", None, notify=True)
        self._rpc("tools/list", None)

    def mcp_search(self) -> None:
        if "MCP-Protocol-Version" not in self.mcp_headers:
            self.mcp_open()
        args = {"query": self.queries.new(), "limit": 10, "namespace": self.ns}
        self._rpc("tools/call", {"name": "memory_search", "arguments": args})


def run_op(clients: list[Client], op: str, requests: int) -> float:
    """Send ``requests`` calls of ``op`` spread over the clients, each client one at a time; the
    wall seconds it took."""
    counter = itertools.count()
    lock = threading.Lock()

    def agent(c: Client) -> None:
        fn: Callable[[], None] = getattr(c, op)
        while True:
            with lock:
                if next(counter) >= requests:
                    return
            fn()

    started = time.perf_counter()
    with ThreadPoolExecutor(len(clients)) as pool:
        for f in [pool.submit(agent, c) for c in clients]:
            f.result()
    return time.perf_counter() - started


def measure(
    target: Target, clients: list[Client], op: str, requests: int, idle: tuple[float, float], profile: Path | None
) -> dict[str, float]:
    spy = None
    if profile is not None:
        # py-spy (not a dependency: give its path) samples the API process's threads while on CPU.
        pid = target.stack.pids("api")[0]
        dest = profile / f"{target.label}-{op}.txt"
        cmd = [os.environ.get("PY_SPY", "py-spy"), "record", "-p", str(pid), "-r", "250", "-f", "raw", "-o", str(dest)]
        spy = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(1.0)
    api0, pg0 = target.cpu()
    wall = run_op(clients, op, requests)
    api1, pg1 = target.cpu()
    if spy is not None:
        spy.send_signal(signal.SIGINT)
        spy.wait(timeout=60)
    # The stack's background (metering flush, status samples, the scheduler) over the same time.
    api = max(0.0, api1 - api0 - idle[0] * wall)
    pg = max(0.0, pg1 - pg0 - idle[1] * wall)
    return {"api_ms": 1000 * api / requests, "pg_ms": 1000 * pg / requests, "wall_s": wall}


def idle_rate(target: Target, seconds: float) -> tuple[float, float]:
    api0, pg0 = target.cpu()
    time.sleep(seconds)
    api1, pg1 = target.cpu()
    return (api1 - api0) / seconds, (pg1 - pg0) / seconds


def median(values: list[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else (ordered[mid - 1] + ordered[mid]) / 2


def _interrupted(signum: int, frame: Any) -> None:
    raise KeyboardInterrupt  # the finally block stops the stacks


def main(argv: list[str] | None = None) -> int:
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--tree", action="append", required=True, help="LABEL=PATH of a source tree (repeat for A/B)")
    p.add_argument(
        "--env",
        action="append",
        default=[],
        help="LABEL:NAME=VALUE, an environment variable for one tree's server (an A/B of a setting)",
    )
    p.add_argument(
        "--template",
        type=Path,
        help="a folder keeping the seeded database and its plan (it holds keys: outside the repository); "
        "seeded by the first tree when empty, copied for every tree and run (default: a temporary one)",
    )
    p.add_argument(
        "--pg-setting",
        action="append",
        default=[],
        help="LABEL:NAME=VALUE, a PostgreSQL setting for one tree's database (log_min_duration_statement=0)",
    )
    p.add_argument("--memories", type=int, default=5000)
    p.add_argument("--tenants", type=int, default=2)
    p.add_argument("--namespaces", type=int, default=2)
    p.add_argument("--seed-users", type=int, default=4)
    p.add_argument("--requests", type=int, default=100, help="per operation, tree and round")
    p.add_argument("--rounds", type=int, default=3)
    p.add_argument("--concurrency", type=int, default=4)
    p.add_argument("--ops", default=",".join(OPS), help=f"comma-separated, of {', '.join(OPS)}")
    p.add_argument("--idle-s", type=float, default=10.0, help="seconds of idle CPU measured per tree")
    p.add_argument("--profile", type=Path, help="py-spy each operation of the first round into this folder")
    p.add_argument("--hold", action="store_true", help="keep the stacks up after the run until Ctrl-C (profiling)")
    p.add_argument("--out", type=Path, help="logs folder (default a temporary one)")
    args = p.parse_args(argv)
    ops = [o for o in args.ops.split(",") if o]
    if unknown := set(ops) - set(OPS):
        p.error(f"unknown ops: {', '.join(sorted(unknown))}")
    out = args.out or Path(tempfile.mkdtemp(prefix="memvault-cpu-logs-"))
    out.mkdir(parents=True, exist_ok=True)
    own_template = args.template is None
    if own_template:
        args.template = Path(tempfile.mkdtemp(prefix="memvault-cpu-template-"))
    args.template.mkdir(parents=True, exist_ok=True)
    if args.profile is not None:
        args.profile.mkdir(parents=True, exist_ok=True)
    targets = []
    for spec in args.tree:
        label, _, path = spec.partition("=")
        targets.append(Target(label, Path(path).resolve(), out / label))
        (out / label).mkdir(exist_ok=True)
    for spec in args.pg_setting:
        label, _, assignment = spec.partition(":")
        name, _, value = assignment.partition("=")
        next(t for t in targets if t.label == label).pg_settings[name] = value
    for spec in args.env:
        label, _, assignment = spec.partition(":")
        name, _, value = assignment.partition("=")
        next(t for t in targets if t.label == label).stack.env[name] = value
    results: dict[str, dict[str, list[dict[str, float]]]] = {t.label: defaultdict(list) for t in targets}
    try:
        for t in targets:
            started = time.perf_counter()
            t.start(args)
            print(f"{t.label}: {t.tree} at {t.stack.host}, seeded in {time.perf_counter() - started:.0f} s", flush=True)
        clients = {t.label: [Client(t, n) for n in range(args.concurrency)] for t in targets}
        for t in targets:  # warm every path once (first-call imports, plans, pools)
            for op in ops:
                run_op(clients[t.label], op, args.concurrency)
        idle = {t.label: idle_rate(t, args.idle_s) for t in targets}
        for t in targets:
            print(f"{t.label}: idle API {idle[t.label][0]:.3f} cores, PostgreSQL {idle[t.label][1]:.3f}", flush=True)
        for r in range(args.rounds):
            load = os.getloadavg()[0]
            order = targets if r % 2 == 0 else targets[::-1]
            for op in ops:
                for t in order:
                    profile = args.profile if r == 0 else None
                    results[t.label][op].append(measure(t, clients[t.label], op, args.requests, idle[t.label], profile))
            print(f"round {r + 1} done (load average at start {load:.2f})", flush=True)
        report(targets, ops, results, args)
        if args.hold:
            print("holding; Ctrl-C to stop", flush=True)
            with contextlib.suppress(KeyboardInterrupt):
                while True:
                    time.sleep(3600)
    finally:
        for t in targets:
            t.stop()
        if own_template:
            shutil.rmtree(args.template, ignore_errors=True)
    return 0


def report(targets: list[Target], ops: list[str], results: dict[str, Any], args: argparse.Namespace) -> None:
    labels = [t.label for t in targets]
    print(
        f"\nCPU ms per request, median of {args.rounds} rounds of {args.requests} requests, "
        f"{args.concurrency} clients (API process + PostgreSQL; idle subtracted)\n"
    )
    head = "| operation | " + " | ".join(f"{lb} API | {lb} PG | {lb} total" for lb in labels) + " |"
    if len(labels) == 2:
        head += f" {labels[1]}/{labels[0]} |"
    print(head)
    print("|" + "---|" * (head.count("|") - 1))
    mix = {lb: [0.0, 0.0] for lb in labels}
    for op in ops:
        row = [op]
        totals = []
        for lb in labels:
            api = median([m["api_ms"] for m in results[lb][op]])
            pg = median([m["pg_ms"] for m in results[lb][op]])
            row += [f"{api:.1f}", f"{pg:.1f}", f"{api + pg:.1f}"]
            totals.append(api + pg)
            if op in MIX:
                mix[lb][0] += MIX[op] / 100 * api
                mix[lb][1] += MIX[op] / 100 * pg
        if len(labels) == 2 and totals[0]:
            row.append(f"{totals[1] / totals[0]:.2f}")
        print("| " + " | ".join(row) + " |")
    if set(MIX) <= set(ops):
        print("\nThe mixed scenario's average request (weights of scenarios/mixed.py):\n")
        for lb in labels:
            api, pg = mix[lb]
            print(
                f"- {lb}: API {api:.1f} ms + PostgreSQL {pg:.1f} ms = {api + pg:.1f} ms of CPU; "
                f"2 cores allow at most {2000 / (api + pg):.0f} req/s (locust's share not counted)"
            )


if __name__ == "__main__":
    raise SystemExit(main())
