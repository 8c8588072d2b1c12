"""Every account dashboard page, timed server-side with N memories in the namespace (issue 24:
each renders in ≤ 100 ms p95 with 100,000).

    PYTHONPATH=services HF_HUB_OFFLINE=1 .venv/bin/python loadtests/bench_dashboard.py \\
        [--memories 100000] [--rounds 50] [--target-ms 100] [--data-dir DIR] [--json FILE]

The pages are the app's own GET routes under /dashboard, found when the script runs, so a page
added later is measured with nobody listing it; their path parameters are filled from the seeded
tenant (``VALUES``: a route whose parameter matches none stops the run with its name). Routes
reading a search box (the explorer's page, or one declaring a ``q``/``query`` parameter) are measured
twice, browsing and searching; every search asks a new question, so the query embedding is the
model's, never the cache's.

The tenant (loadtests/dashboard_seed.py) is seeded once into ``--data-dir`` (default: one folder
per N in the temp folder) and reused by later runs; its embedded PostgreSQL is stopped, not
deleted. The measuring run starts the app afresh on it, the scheduler and the job sweep off (they
would put maintenance of their own on the same 2 cores), signs in once as the owner, warms up,
then makes ``--rounds`` rounds, each opening every page once in a new random order. The time is
the server's: an outermost ASGI layer's, from the request's arrival to the last byte of the
answer (httpx's ASGI transport, no network). Exits 1 when a page's p95 exceeds ``--target-ms``
or a page does not answer 200.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shutil
import sys
import tempfile
import time
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

import httpx
from dashboard_seed import PhraseBook, Seeded, add_webhooks, seed, settle, vacuum
from harness import embedded_app, pct

# Pages a visitor opens before signing in: measured without the session cookie.
ANONYMOUS = re.compile(r"^/dashboard/(signin|signup|sign-up|verify|invitations?|reset)")
# A path parameter's value, by the first of these words found in "<segment before it> <its name>"
# (/dashboard/members/{user_id} reads "members user_id": a member). Values are Seeded fields.
VALUES: tuple[tuple[str, str], ...] = (
    ("webhook", "endpoint_id"),
    ("memor", "memory_id"),
    ("job", "job_id"),
    ("invit", "invitation_id"),
    ("member", "member_id"),
    ("grant", "grant_id"),
    ("app", "grant_id"),
    ("key", "key_id"),
    ("entit", "entity_id"),
    ("session", "session_id"),
    ("user", "member_id"),
    ("namespace", "namespace"),
    ("ns", "namespace"),
    ("name", "namespace"),
)
SEARCH_PARAMS = {"q", "query", "search"}
# The app's own background work off while seeding and measuring (it would share the 2 cores): the
# scheduler, the job sweep, and the webhook sender (which would try the seeded pending deliveries).
QUIET = {"scheduler_interval_s": 0, "job_sweep_interval_s": 0, "webhook_sweep_interval_s": 0}
# The explorer's own page (its namespace maybe in the path), not the pages it links to.
EXPLORER = re.compile(r"/explorer(/\{[^}]+\})?$")
NAMESPACE_PARAMS = {"ns", "namespace"}


@dataclass
class Page:
    label: str  # the route, with "?q=…" for its searching twin
    path: str  # parameters filled
    anonymous: bool
    searches: bool = False
    params: dict[str, str] = field(default_factory=dict)
    times_ms: list[float] = field(default_factory=list)
    statuses: set[int] = field(default_factory=set)
    size: int = 0


def dashboard_gets(app: Any) -> list[tuple[str, set[str]]]:
    """(path template, declared query parameters) of every GET route under /dashboard."""
    from fastapi.routing import iter_route_contexts

    found: dict[str, set[str]] = {}
    for ctx in iter_route_contexts(app.routes):
        path = ctx.path
        if path is None or not (path == "/dashboard" or path.startswith("/dashboard/")):
            continue
        if "GET" in (ctx.methods or ()):
            dependant = getattr(ctx, "dependant", None)
            found[path] = {q.name for q in getattr(dependant, "query_params", ())} if dependant else set()
    return sorted(found.items())


def fill(path: str, seeded: Seeded) -> str:
    def value(match: re.Match[str]) -> str:
        name = match.group(1).split(":")[0]
        before = path[: match.start()].rstrip("/").rsplit("/", 1)[-1]
        words = f"{before} {name}".lower()
        for word, attribute in VALUES:
            if word in words:
                return str(getattr(seeded, attribute))
        raise SystemExit(f"{path}: no seeded value for the parameter {{{name}}}; add a word for it to VALUES")

    return re.sub(r"\{([^}]+)\}", value, path)


def pages_of(app: Any, seeded: Seeded) -> list[Page]:
    pages = []
    for path, declared in dashboard_gets(app):
        browse: dict[str, str] = {}
        if "explorer" in path or declared & NAMESPACE_PARAMS:
            browse = {name: seeded.namespace for name in NAMESPACE_PARAMS}
        anonymous = bool(ANONYMOUS.match(path))
        pages.append(Page(path, fill(path, seeded), anonymous, params=browse))
        if EXPLORER.search(path) or declared & SEARCH_PARAMS:
            pages.append(Page(f"{path}?q=…", fill(path, seeded), anonymous, searches=True, params=browse))
    return pages


class ServerClock:
    """The outermost ASGI layer: how long the app took, from the request's arrival to the last
    byte of its answer (one request at a time: ``last_ms`` is the one just answered)."""

    def __init__(self, app: Any) -> None:
        self.app = app
        self.last_ms = 0.0

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()

        async def timed(message: Any) -> None:
            await send(message)
            if message["type"] == "http.response.body" and not message.get("more_body", False):
                self.last_ms = (time.perf_counter() - started) * 1000

        await self.app(scope, receive, timed)


async def measure(stack: Any, seeded: Seeded, rounds: int, warmup: int) -> list[Page]:
    from scenarios.texts import corpus

    pages = pages_of(stack.app, seeded)
    token = await stack.api.open_web_session(seeded.email, seeded.password)
    questions = iter(q for _ in range(100) for q in corpus().questions)
    clock = ServerClock(stack.app)
    rng = random.Random(7)
    transport = httpx.ASGITransport(app=clock)
    async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as http:

        async def open_page(page: Page, counted: bool) -> None:
            params = dict(page.params)
            if page.searches:
                question = next(questions)
                params.update({name: question for name in SEARCH_PARAMS})
            cookies = None if page.anonymous else {"mv_session": token}
            r = await http.get(page.path, params=params, headers=_cookie(cookies))
            if counted:
                page.times_ms.append(clock.last_ms)
                page.statuses.add(r.status_code)
                page.size = len(r.content)

        for i in range(warmup + rounds):
            for page in rng.sample(pages, len(pages)):
                await open_page(page, counted=i >= warmup)
    return pages


def _cookie(cookies: dict[str, str] | None) -> dict[str, str]:
    # A header, not the client's jar: the jar would send it to the anonymous pages too.
    return {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}


def report(pages: list[Page], target_ms: float) -> tuple[list[str], list[dict[str, Any]]]:
    """The table's lines and the JSON rows."""
    lines = ["| page | status | p50 ms | p95 ms | max ms | KiB |", "|---|---|---|---|---|---|"]
    rows = []
    for p in pages:
        p50, p95, worst = pct(p.times_ms, 50), pct(p.times_ms, 95), max(p.times_ms)
        status = ",".join(str(s) for s in sorted(p.statuses))
        lines.append(f"| `{p.label}` | {status} | {p50:.1f} | {p95:.1f} | {worst:.1f} | {p.size / 1024:.0f} |")
        rows.append(
            {"page": p.label, "url": p.path, "status": sorted(p.statuses), "p50_ms": round(p50, 2),
             "p95_ms": round(p95, 2), "max_ms": round(worst, 2), "bytes": p.size, "samples": len(p.times_ms),
             "within_target": p95 <= target_ms and p.statuses == {200}}
        )  # fmt: skip
    return lines, rows


def _data_dir(args: argparse.Namespace) -> Path:
    folder: Path = args.data_dir or Path(tempfile.gettempdir()) / f"memvault-bench-dashboard-{args.memories}"
    return folder.expanduser().resolve()


async def prepared(folder: Path, memories: int, distinct: int | None = None) -> Seeded:
    """The seeded tenant in ``folder``: the one a previous run left, else a new one."""
    found = Seeded.load(folder / "seed.json")
    if found is not None and found.memories == memories:
        print(f"reusing the tenant seeded in {folder} ({found.seconds:.0f} s to seed)", file=sys.stderr)
        if not found.endpoint_id:
            found = await _add_webhooks(folder, found)
        return found
    if (folder / "pg").exists():
        # A seed that stopped half-way (no seed.json): start again rather than measure a part.
        print(f"{folder}/pg holds no complete seed of {memories} memories: seeding it anew", file=sys.stderr)
        shutil.rmtree(folder / "pg")
    async with embedded_app(keep=folder, wrap_embedder=PhraseBook, **QUIET) as stack:
        made = await seed(
            stack.api, stack.embedder, memories, distinct=distinct, say=lambda line: print(line, file=sys.stderr)
        )
        started = time.perf_counter()
        await asyncio.to_thread(settle, stack.urls.owner, made.tenant_id)
        print(f"aged and vacuumed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    made.seconds = round(made.seconds + time.perf_counter() - started, 1)
    made.save(folder / "seed.json")
    return made


async def _add_webhooks(folder: Path, found: Seeded) -> Seeded:
    """A seed saved before the webhooks pages, topped up with their endpoints and deliveries."""
    import uuid

    started = time.perf_counter()
    async with embedded_app(keep=folder, **QUIET) as stack:
        found.endpoint_id = await add_webhooks(stack.api, uuid.UUID(found.tenant_id))
        await asyncio.to_thread(vacuum, stack.urls.owner, ("webhook_endpoints", "webhook_deliveries"))
    print(f"added webhooks to the seed in {time.perf_counter() - started:.0f} s", file=sys.stderr)
    found.save(folder / "seed.json")
    return found


async def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--memories", type=int, default=100_000, help="in the measured namespace")
    parser.add_argument("--rounds", type=int, default=50, help="times each page is opened and counted")
    parser.add_argument("--warmup", type=int, default=3, help="rounds before those, not counted")
    parser.add_argument("--target-ms", type=float, default=100.0, help="the p95 every page must stay within")
    parser.add_argument("--data-dir", type=Path, help="where the seeded database is kept (reused when there)")
    parser.add_argument(
        "--sentences", type=int, help="distinct corpus sentences the memories say (default: all; each is embedded once)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures here as JSON")
    args = parser.parse_args()

    folder = _data_dir(args)
    seeded = await prepared(folder, args.memories, args.sentences)
    load_before = os.getloadavg()
    async with embedded_app(keep=folder, **QUIET) as stack:
        pages = await measure(stack, seeded, args.rounds, args.warmup)
    load_after = os.getloadavg()

    lines, rows = report(pages, args.target_ms)
    print(f"{seeded.memories} memories in '{seeded.namespace}' (seeded in {seeded.seconds:.0f} s, data {folder});")
    print(f"{args.rounds} rounds of {len(pages)} pages, server-side ms; {os.cpu_count()} CPUs, load average")
    print(f"{load_before[0]:.1f} before and {load_after[0]:.1f} after (other work on the machine shows here)\n")
    print("\n".join(lines))
    if args.json:
        summary = {"memories": seeded.memories, "rounds": args.rounds, "target_ms": args.target_ms,
                   "cpus": os.cpu_count(), "load_before": load_before, "load_after": load_after,
                   "seed": asdict(seeded) | {"password": "…"}, "pages": rows}  # fmt: skip
        args.json.write_text(json.dumps(summary, indent=2))
    failed = [r for r in rows if not r["within_target"]]
    print()
    for r in failed:
        print(f"FAIL {r['page']}: p95 {r['p95_ms']:.1f} ms (target {args.target_ms:g} ms), status {r['status']}")
        if r["status"] != [200] and "{" in r["page"]:
            print("  (not 200: does VALUES give its path parameters the right kind of id?)")
    if not failed:
        print(f"OK: every one of the {len(rows)} pages within {args.target_ms:g} ms p95")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(asyncio.run(main()))
