"""Webhook delivery (issue 31): commit-to-receipt latency and deliveries per second.

    PYTHONPATH=services HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_webhooks.py \\
        [--latency-rounds 200] [--throughput 5000] [--tenants 20] [--json FILE]

A throwaway embedded PostgreSQL (migrated), a receiver (uvicorn on 127.0.0.1, its own thread and
event loop, verifying nothing: the signature is checked by the tests) and the sender
(webhooks/delivery/runner.py) in the two homes it has:

- ``in-process``: a task on this event loop, as `memvault serve` without Redis runs it;
- ``worker``: a thread and event loop of its own, as `memvault worker` runs it beside RQ (Redis is
  not on the delivery path: the outbox is in PostgreSQL, so no Redis is started here).

Commit-to-receipt: one delivery row committed at a time (as the outbox's emit writes it, with the
NOTIFY that wakes the sender in the same transaction, and once without it, when only the sweep
interval finds it), timed from the commit's return to the receiver's first byte of the request.
Throughput: ``--throughput`` rows committed at once across ``--tenants`` tenants, timed until the
receiver has answered all of them.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import random
import sys
import threading
import time
import uuid
from pathlib import Path
from typing import Any

import psycopg
import uvicorn
from harness import embedded_postgres, pct

SECRET = "whsec_" + "MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"


class Receiver:
    """Answers 204 at once and notes when each message arrived."""

    def __init__(self) -> None:
        self.arrived: dict[str, float] = {}

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            return
        now = time.perf_counter()
        headers = dict(scope["headers"])
        while (await receive()).get("more_body"):
            pass
        self.arrived.setdefault(headers[b"webhook-id"].decode(), now)
        await send({"type": "http.response.start", "status": 204, "headers": []})
        await send({"type": "http.response.body", "body": b""})


def serve(receiver: Receiver) -> str:
    import socket

    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    server = uvicorn.Server(uvicorn.Config(receiver, log_level="warning", lifespan="off", access_log=False))
    server.install_signal_handlers = lambda: None  # type: ignore[method-assign]
    threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True).start()
    while not server.started:
        time.sleep(0.02)
    return f"http://127.0.0.1:{sock.getsockname()[1]}/in"


def conninfo(urls: Any) -> str:
    return str(urls.owner.render_as_string(hide_password=False)).replace("+psycopg", "")


INSERT = (
    "INSERT INTO webhook_deliveries (tenant_id, endpoint_id, message_id, event_type, payload) "
    "SELECT %s, %s, 'msg_' || replace(gen_random_uuid()::text, '-', ''), 'memory.created', "
    "jsonb_build_object('type', 'memory.created', 'timestamp', now()::text, 'data', jsonb_build_object('id', i)) "
    "FROM generate_series(1, %s) i RETURNING message_id"
)


async def setup(conn: psycopg.AsyncConnection[Any], url: str, n: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """``n`` tenants, each with one endpoint at ``url``: (tenant, endpoint)."""
    out = []
    for _ in range(n):
        cur = await conn.execute(
            "INSERT INTO tenants (name) VALUES (%s) RETURNING id", (f"wh-{uuid.uuid4().hex[:10]}",)
        )
        [(tenant,)] = await cur.fetchall()
        cur = await conn.execute(
            "INSERT INTO webhook_endpoints (tenant_id, url, events, secret, created_by) "
            "VALUES (%s, %s, '{memory.created}', %s, 'bench') RETURNING id",
            (tenant, url, SECRET),
        )
        [(endpoint,)] = await cur.fetchall()
        out.append((tenant, endpoint))
    return out


async def latency(
    conn: psycopg.AsyncConnection[Any],
    receiver: Receiver,
    target: tuple[uuid.UUID, uuid.UUID],
    rounds: int,
    notify: bool,
) -> dict[str, float]:
    waits = []
    for _ in range(rounds):
        # A pause first, so that the sweep the previous delivery's end triggered is over: without
        # NOTIFY the row then waits for the interval, as a commit at a random moment does.
        await asyncio.sleep(random.uniform(0.05, 0.3) if notify else random.uniform(0.0, 1.2))
        async with conn.transaction():
            cur = await conn.execute(INSERT, (*target, 1))
            [(message_id,)] = await cur.fetchall()
            if notify:
                await conn.execute("SELECT pg_notify('memvault_webhooks', '')")
        committed = time.perf_counter()
        deadline = committed + 30
        while message_id not in receiver.arrived:
            assert time.perf_counter() < deadline, "a delivery did not arrive within 30 s"
            await asyncio.sleep(0.0005)
        waits.append((receiver.arrived[message_id] - committed) * 1000)
    return {"p50_ms": round(pct(waits, 50), 1), "p95_ms": round(pct(waits, 95), 1), "rounds": rounds}


async def throughput(
    conn: psycopg.AsyncConnection[Any], receiver: Receiver, targets: list[tuple[uuid.UUID, uuid.UUID]], total: int
) -> dict[str, float]:
    per = total // len(targets)
    ids: list[str] = []
    async with conn.transaction():
        for target in targets:
            cur = await conn.execute(INSERT, (*target, per))
            ids += [r[0] for r in await cur.fetchall()]
        await conn.execute("SELECT pg_notify('memvault_webhooks', '')")
    began = time.perf_counter()
    while not all(i in receiver.arrived for i in ids):
        assert time.perf_counter() - began < 600, "deliveries did not all arrive within 10 min"
        await asyncio.sleep(0.05)
    seconds = max(receiver.arrived[i] for i in ids) - began
    return {
        "deliveries": len(ids),
        "tenants": len(targets),
        "seconds": round(seconds, 2),
        "per_s": round(len(ids) / seconds),
    }


def start_sender(mode: str, urls: Any, settings: Any) -> Any:
    """The runner as `memvault serve` runs it (a task on this loop) or as `memvault worker` does
    (a thread and event loop of its own, jobs/runner.py: _send_webhooks); returns its stop."""
    from memvault.db.session import Database
    from memvault.webhooks.delivery.runner import DeliveryRunner

    async def sender() -> None:
        db = Database(urls, pool_size=4)
        try:
            await DeliveryRunner(db, settings).run()
        finally:
            await db.dispose()

    if mode == "in-process":
        task = asyncio.get_running_loop().create_task(sender())

        async def stop_task() -> None:
            task.cancel()
            await asyncio.gather(task, return_exceptions=True)

        return stop_task
    loop = asyncio.new_event_loop()
    threading.Thread(target=loop.run_forever, daemon=True).start()
    future = asyncio.run_coroutine_threadsafe(sender(), loop)

    async def stop_thread() -> None:
        loop.call_soon_threadsafe(future.cancel)
        await asyncio.sleep(0.5)
        loop.call_soon_threadsafe(loop.stop)

    return stop_thread


async def run(args: argparse.Namespace) -> dict[str, Any]:
    from memvault.config import Settings

    results: dict[str, Any] = {}
    with embedded_postgres("memvault-bench-webhooks-") as urls:
        settings = Settings(
            _env_file=None,
            database_url=urls.owner.render_as_string(hide_password=False),
            webhook_allow_private=True,
            webhook_sweep_interval_s=1.0,
        )
        receiver = Receiver()
        url = serve(receiver)
        async with await psycopg.AsyncConnection.connect(conninfo(urls), autocommit=True) as conn:
            targets = await setup(conn, url, args.tenants)
            for mode in ("in-process", "worker"):
                if mode == "worker" and args.skip_worker:
                    continue
                stop = start_sender(mode, urls, settings)
                await asyncio.sleep(0.5)
                results[mode] = {
                    "commit_to_receipt_notify": await latency(conn, receiver, targets[0], args.latency_rounds, True),
                    "commit_to_receipt_sweep_only": await latency(conn, receiver, targets[0], 20, False),
                    "throughput": await throughput(conn, receiver, targets, args.throughput),
                    "throughput_one_tenant": await throughput(conn, receiver, targets[:1], args.throughput // 5),
                }
                print(json.dumps({mode: results[mode]}), flush=True)
                await stop()
    return results


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--latency-rounds", type=int, default=200)
    parser.add_argument("--throughput", type=int, default=5000)
    parser.add_argument("--tenants", type=int, default=20)
    parser.add_argument("--skip-worker", action="store_true")
    parser.add_argument("--json", type=Path)
    args = parser.parse_args()
    results = asyncio.run(run(args))
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    return 0


if __name__ == "__main__":
    sys.exit(main())
