"""Fairness between tenants under the plans' concurrency caps (issue 23), and what the rate-limit
path costs a search.

`fairness`: tenant B searches alone, then while tenant A floods — first A keeps exactly its plan's
`concurrent_requests` searches running (its cap), then A sends four times its cap at once, not
waiting (the caller a cap is for), then the same waiting each refusal's Retry-After (as the SDK
does). B's p95 should stay within 1.5x of B alone and B should get no 429. Each is run with the
fair share of the process between tenants (plans/fairshare.py) swapped for another number of
places, or taken out (`--slots 0,-1,3`: none, the default, three), in alternating rounds
(`--repeat`). `overhead`: the same cached search by one tenant on plan `unlimited` (the gate skips
it, no Redis) and by one whose plan limits every rate and its concurrency (two moving windows and
a concurrency lease in Redis), in interleaved rounds.

Both through the whole REST stack in process (httpx's ASGI transport: middleware, auth, the gate,
the facade) on the embedded PostgreSQL, the local MiniLM model and a real Redis:

    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_tenant_fairness.py fairness --redis redis://127.0.0.1:6379/4
    HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_tenant_fairness.py overhead --redis redis://127.0.0.1:6379/4

(Bench fairness of the embedding model between tenants is bench_fairness.py.) Prints markdown;
compare ratios, not absolute times, on a shared machine.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import statistics
import time
from collections import Counter
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from harness import embedded_app, pct

QUERIES = [
    "window seats on long flights",
    "what does Ana eat for breakfast",
    "the warehouse in Lyon",
    "quarterly shipment schedule",
    "who works at Acme",
    "favourite programming language",
]


async def seed(api: Any, name: str, plan: str, memories: int) -> tuple[str, str]:
    """A tenant on ``plan`` with ``memories`` memories in its `default` namespace: (key, path)."""
    from memvault.memories.schemas import MemoryIn
    from memvault.principal import Principal

    t = await api.create_tenant(name, plan=plan)
    p = Principal.system(t.id, subject="bench")
    for start in range(0, memories, 100):
        batch = [
            MemoryIn(content=f"Note {i}: {QUERIES[i % len(QUERIES)]} and more about item {i}")
            for i in range(start, min(memories, start + 100))
        ]
        await api.store_many(p, t.namespace, batch)
    return t.api_key, f"/v1/namespaces/{t.namespace}/search"


async def searches(
    client: Any,
    key: str,
    path: str,
    until: float,
    latencies: list[float] | None,
    codes: Counter[int],
    *,
    polite: bool = False,
) -> None:
    """Search in a closed loop until ``until``: each search sent when the last one is answered
    (``polite``: a refused one after its Retry-After, as the SDK does)."""
    n = 0
    headers = {"Authorization": f"Bearer {key}"}
    while time.perf_counter() < until:
        started = time.perf_counter()
        r = await client.post(path, json={"query": QUERIES[n % len(QUERIES)], "limit": 5}, headers=headers)
        if latencies is not None and r.status_code == 200:
            latencies.append((time.perf_counter() - started) * 1000)
        codes[r.status_code] += 1
        n += 1
        if polite and r.status_code in (429, 503):
            await asyncio.sleep(min(float(r.headers.get("retry-after", 1)), max(0.0, until - time.perf_counter())))


def use_fair_share(api: Any, slots: int, turns: bool = False) -> str:
    """Put a fair share of ``slots`` places (plans/fairshare.py) in the facade's gates, in the
    place of the one there; 0: none at all (every admitted request runs at once, first come).
    ``turns``: the turns at the process's Python (plans/cputurns.py) on, else off."""
    from memvault.plans.fairshare import FairShare

    gates: list[Any] = api._gates
    at = next(i for i, g in enumerate(gates) if isinstance(g, FairShare) or getattr(g, "_bench_slot", False))
    api._cpu_turns.enabled = turns
    also = " + turns" if turns else ""
    if slots:
        settings = api._settings
        # As the facade builds it: a tenant's line holds half of what the process admits.
        gates[at] = FairShare(slots, wait_s=settings.fair_share_wait_s, line=max(slots, settings.max_in_flight // 2))
        return f"fair share, {slots} places{also}"
    gates[at] = _NoGate()
    return f"no fair share{also}"


async def _idle() -> tuple[list[float], dict[int, int]]:
    return [], {}


class _NoGate:
    _bench_slot = True

    @asynccontextmanager
    async def admit(self, p: Any, op: Any) -> AsyncIterator[None]:
        yield


async def fairness(args: argparse.Namespace) -> None:
    import httpx

    from memvault.plans.fairshare import default_slots
    from memvault.plans.limits import PlanLimits

    async with embedded_app("memvault-tenant-fair-", redis_url=args.redis) as stack:
        api = stack.api
        rates = {
            f"{per}_{kind}_per_minute": 1_000_000
            for per in ("key", "tenant")
            for kind in ("reads", "writes", "searches")
        }
        await api.save_plan("bench-capped", PlanLimits(concurrent_requests=args.cap, **rates), "fairness bench")
        key_a, path_a = await seed(api, "fair-a", "bench-capped", args.memories)
        key_b, path_b = await seed(api, "fair-b", "bench-capped", args.memories)
        transport = httpx.ASGITransport(app=stack.app)
        slots = [
            (default_slots() if int(s.rstrip("t")) < 0 else int(s.rstrip("t")), s.endswith("t")) for s in args.slots
        ]
        async with contextlib.AsyncExitStack() as serving:
            client = await serving.enter_async_context(
                httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60)
            )
            phase = None
            if args.client_process:
                # A and B each in a process of their own, over loopback HTTP: the server's loop
                # serves, nothing else runs on it.
                base = await serving.enter_async_context(served_here(stack.app))
                ask_a = await serving.enter_async_context(client_process(base, key_a, path_a))
                ask_b = await serving.enter_async_context(client_process(base, key_b, path_b))

                async def phase(a_workers: int, polite: bool) -> tuple[list[float], Counter[int], Counter[int]]:
                    (b_ms, b_codes), (_, a_codes) = await asyncio.gather(
                        ask_b((args.seconds, args.b_workers, False)),
                        ask_a((args.seconds, a_workers, polite)) if a_workers else _idle(),
                    )
                    return b_ms, Counter(b_codes), Counter(a_codes)

            warm: Counter[int] = Counter()
            await searches(client, key_b, path_b, time.perf_counter() + 2, None, warm)
            await searches(client, key_a, path_a, time.perf_counter() + 2, None, warm)
            rows = []
            # Rounds alternate the gates, so a change of the shared machine's load falls on both.
            for _ in range(args.repeat):
                for n, turns in slots:
                    gate = use_fair_share(api, n, turns)
                    for label, a_workers, polite in (
                        ("B alone", 0, False),
                        ("A at its cap", args.cap, False),
                        ("A at 4x its cap", 4 * args.cap, False),
                        ("A at 4x its cap, waiting Retry-After", 4 * args.cap, True),
                    )[: args.phases]:
                        b_ms: list[float] = []
                        b_codes: Counter[int] = Counter()
                        a_codes: Counter[int] = Counter()
                        if phase is not None:
                            b_ms, b_codes, a_codes = await phase(a_workers, polite)
                            rows.append((gate, label, a_workers, b_ms, b_codes, a_codes))
                            continue
                        until = time.perf_counter() + args.seconds
                        await asyncio.gather(
                            *(searches(client, key_b, path_b, until, b_ms, b_codes) for _ in range(args.b_workers)),
                            *(
                                searches(client, key_a, path_a, until, None, a_codes, polite=polite)
                                for _ in range(a_workers)
                            ),
                        )
                        rows.append((gate, label, a_workers, b_ms, b_codes, a_codes))
        print(
            f"\nTenant fairness: cap {args.cap} concurrent requests, {args.seconds} s per phase, "
            f"B: {args.b_workers} searcher(s), {args.repeat} round(s) per gate\n"
        )
        print(
            "| gate | phase | A searchers | B searches | B p50 ms | B p95 ms | B p95 / alone "
            "| B 429s | B 503s | A 200s | A 429s | A 503s |"
        )
        print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|")
        merged: dict[tuple[str, str], tuple[int, list[float], Counter[int], Counter[int]]] = {}
        for gate, label, a_workers, b_ms, b_codes, a_codes in rows:
            _, ms, bc, ac = merged.setdefault((gate, label), (a_workers, [], Counter(), Counter()))
            ms += b_ms
            bc.update(b_codes)
            ac.update(a_codes)
        for (gate, label), (a_workers, b_ms, b_codes, a_codes) in merged.items():
            alone_p95 = pct(merged[(gate, "B alone")][1], 95)
            print(
                f"| {gate} | {label} | {a_workers} | {len(b_ms)} | {statistics.median(b_ms):.1f} "
                f"| {pct(b_ms, 95):.1f} | {pct(b_ms, 95) / alone_p95:.2f} | {b_codes[429]} | {b_codes[503]} "
                f"| {a_codes[200]} | {a_codes[429]} | {a_codes[503]} |"
            )


@asynccontextmanager
async def served_here(app: Any) -> AsyncIterator[str]:
    """``app`` (its lifespan already running) served by uvicorn on this event loop, on a free port."""
    import socket

    import uvicorn

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, lifespan="off", log_level="warning"))
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
        await asyncio.sleep(0.02)
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        await task


def _search_once(http_conn: Any, path: str, body: str, headers: dict[str, str]) -> tuple[int, str | None]:
    http_conn.request("POST", path, body=body, headers=headers)
    r = http_conn.getresponse()
    r.read()
    return r.status, r.getheader("retry-after")


def _searcher(
    connect: Any,
    path: str,
    bodies: list[str],
    headers: dict[str, str],
    until: float,
    polite: bool,
    latencies: list[float],
    codes: Counter[int],
) -> None:
    """One closed-loop searcher thread of a client process (``polite``: waits each Retry-After)."""
    http_conn, n = connect(), 0
    while time.perf_counter() < until:
        started = time.perf_counter()
        status, retry = _search_once(http_conn, path, bodies[n % len(bodies)], headers)
        if status == 200:
            latencies.append((time.perf_counter() - started) * 1000)
        codes[status] += 1
        n += 1
        if polite and status in (429, 503):
            time.sleep(min(float(retry or 1), max(0.0, until - time.perf_counter())))


def _client_loop(base: str, key: str, path: str, conn: Any) -> None:
    """A client process (http.client: little client CPU beside the server). Commands: ``n`` (an
    int): that many searches one after another on one keep-alive connection, their ms sent back;
    ``(seconds, workers, polite)``: that many closed-loop searchers (threads, a connection each)
    for that long, sending back the ms of the answered ones and the count of each status."""
    import http.client
    import json
    import threading
    from urllib.parse import urlsplit

    url = urlsplit(base)

    def connect() -> http.client.HTTPConnection:
        return http.client.HTTPConnection(url.hostname or "127.0.0.1", url.port, timeout=60)

    headers = {"Authorization": f"Bearer {key}", "Content-Type": "application/json"}
    bodies = [json.dumps({"query": q, "limit": 5}) for q in QUERIES]
    one = connect()
    while (command := conn.recv()) != 0:
        if isinstance(command, int):
            ms = []
            for _ in range(command):
                started = time.perf_counter()
                status, _ = _search_once(one, path, bodies[0], headers)
                assert status == 200, status
                ms.append((time.perf_counter() - started) * 1000)
            conn.send(ms)
            continue
        seconds, workers, polite = command
        until = time.perf_counter() + seconds
        latencies: list[float] = []
        codes: Counter[int] = Counter()

        args = (connect, path, bodies, headers, until, polite, latencies, codes)
        threads = [threading.Thread(target=_searcher, args=args) for _ in range(workers)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        conn.send((latencies, dict(codes)))


@asynccontextmanager
async def client_process(base: str, key: str, path: str) -> AsyncIterator[Any]:
    """Searches sent from another process, as a real client's are: the server's loop runs only the
    server (what it does after an answer costs the client nothing unless it is still busy when the
    next request comes). Yields ``ask(command)``, _client_loop's commands."""
    import multiprocessing

    ours, theirs = multiprocessing.Pipe()
    proc = multiprocessing.get_context("spawn").Process(target=_client_loop, args=(base, key, path, theirs))
    proc.start()
    loop = asyncio.get_running_loop()

    async def ask(command: Any) -> Any:
        ours.send(command)
        return await loop.run_in_executor(None, ours.recv)

    try:
        yield ask
    finally:
        ours.send(0)
        await loop.run_in_executor(None, proc.join, 10)


async def overhead(args: argparse.Namespace) -> None:
    import httpx

    from memvault.operations import Operation
    from memvault.plans.gate import reporting
    from memvault.plans.limits import PlanLimits

    async with embedded_app("memvault-limit-cost-", redis_url=args.redis) as stack:
        api = stack.api
        rates = {
            f"{per}_{kind}_per_minute": 1_000_000
            for per in ("key", "tenant")
            for kind in ("reads", "writes", "searches")
        }
        await api.save_plan("bench-limited", PlanLimits(concurrent_requests=64, **rates), "overhead bench")
        key, path = await seed(api, "cost", "unlimited", args.memories)
        tenant_id = (await api.authenticate(key)).tenant_id
        # "no gates": neither limits nor metering (the facade's gates taken off), the baseline of
        # what both cost; "unlimited": metering only (the limit gate skips the plan, no Redis).
        plans = {
            "no gates (neither limits nor metering)": "unlimited",
            "unlimited (no limit path)": "unlimited",
            "limited (rates + concurrency)": "bench-limited",
        }
        timings: dict[str, list[float]] = {label: [] for label in plans}
        gate_us: dict[str, list[float]] = {label: [] for label in plans}
        # This process's CPU per search (with --client-process: the server's alone), which a busy
        # machine disturbs much less than it does the wall-clock latency.
        cpu_us: dict[str, list[float]] = {label: [] for label in plans}
        async with contextlib.AsyncExitStack() as serving:
            base = ""
            if args.http or args.client_process:
                # Over loopback TCP to uvicorn: the client has its answer when it is sent, as a client
                # in another process would; through httpx's ASGI transport it also waits for what the
                # app does after the answer (the concurrency slot's give-back).
                base = await serving.enter_async_context(served_here(stack.app))
                client = await serving.enter_async_context(httpx.AsyncClient(base_url=base, timeout=60))
            else:
                transport = httpx.ASGITransport(app=stack.app)
                client = await serving.enter_async_context(
                    httpx.AsyncClient(transport=transport, base_url="http://bench", timeout=60)
                )

            async def in_loop(n: int) -> list[float]:
                ms = []
                for _ in range(n):
                    started = time.perf_counter()
                    r = await client.post(
                        path, json={"query": QUERIES[0], "limit": 5}, headers={"Authorization": f"Bearer {key}"}
                    )
                    assert r.status_code == 200, r.text
                    ms.append((time.perf_counter() - started) * 1000)
                return ms

            searches_of = in_loop
            if args.client_process:
                searches_of = await serving.enter_async_context(client_process(base, key, path))  # ask(n): ms
            await searches_of(20)  # warm: connections, the cached query embedding
            p, op = await api.authenticate(key), Operation("search", "search")
            # One tenant, one key, one query: rounds alternate its plan, so nothing else differs.
            for _ in range(args.rounds):
                for label, plan in plans.items():
                    await api.set_tenant_plan(tenant_id, plan)
                    gates, bare = api._gates, label.startswith("no gates")
                    if bare:
                        api._gates = []
                    try:
                        cpu = time.process_time()
                        timings[label] += await searches_of(10)
                        cpu_us[label].append((time.process_time() - cpu) * 1e6 / 10)
                    finally:
                        api._gates = gates
                    for _ in range(10):
                        started = time.perf_counter()
                        with reporting():  # as at the REST door: the windows are read for the headers
                            async with api._limit_gate.admit(p, op):
                                pass
                        gate_us[label].append((time.perf_counter() - started) * 1e6)
        door = (
            "over loopback HTTP (uvicorn), the client in its own process"
            if args.client_process
            else "over loopback HTTP (uvicorn)"
            if args.http
            else "through httpx's ASGI transport"
        )
        print(f"\nRate-limit path on a cached search {door}, Redis {args.redis}, {args.rounds * 10} searches each\n")
        print("| plan of the tenant | search p50 ms | search p95 ms | the gate alone p50 µs | CPU per search µs |")
        print("|---|---:|---:|---:|---:|")
        for label, values in timings.items():
            print(
                f"| {label} | {statistics.median(values):.2f} | {pct(values, 95):.2f} "
                f"| {statistics.median(gate_us[label]):.0f} | {statistics.median(cpu_us[label]):.0f} |"
            )
        none_ms, meter_ms, limit_ms = (statistics.median(v) for v in timings.values())
        print(f"\nadded p50 (search) by the limit path: {limit_ms - meter_ms:+.2f} ms")
        print(
            f"added p50 (search) by limits + metering: {limit_ms - none_ms:+.2f} ms "
            f"(metering alone {meter_ms - none_ms:+.2f} ms)"
        )
        bare_cpu, base_cpu, lim_cpu = (statistics.median(v) for v in cpu_us.values())
        print(
            f"added CPU per search by limits + metering: {lim_cpu - bare_cpu:+.0f} µs "
            f"(metering alone {base_cpu - bare_cpu:+.0f} µs)"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("mode", choices=["fairness", "overhead"])
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/0", help="Redis the limits count in")
    parser.add_argument("--memories", type=int, default=500, help="memories per tenant")
    parser.add_argument("--cap", type=int, default=4, help="fairness: the plan's concurrent_requests")
    parser.add_argument("--seconds", type=float, default=20, help="fairness: length of each phase")
    parser.add_argument("--b-workers", type=int, default=1, help="fairness: B's searchers")
    parser.add_argument(
        "--slots",
        type=lambda v: v.split(","),
        default=["0", "-1"],
        help="fairness: the fair share's places, comma-separated, one run each; 0: no fair share, -1: the "
        "default (the cores and one); a 't' after the number turns the turns at the Python on (plans/cputurns.py)",
    )
    parser.add_argument(
        "--phases", type=int, default=4, help="fairness: the first N phases only (2: B alone and A at its cap)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="fairness: rounds over the --slots values")
    parser.add_argument("--rounds", type=int, default=30, help="overhead: rounds of 10 searches per tenant")
    parser.add_argument("--http", action="store_true", help="overhead: over loopback HTTP to uvicorn, not ASGI")
    parser.add_argument(
        "--client-process",
        action="store_true",
        help="over loopback HTTP from clients in processes of their own (fairness: one for A, one for B)",
    )
    args = parser.parse_args()
    asyncio.run(fairness(args) if args.mode == "fairness" else overhead(args))


if __name__ == "__main__":
    main()
