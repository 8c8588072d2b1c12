"""Run a load test from start to end: start a stack (or use a running deployment), seed it, run
locust headless for a fixed time at each user count asked, save locust's CSV and HTML report, and
print one summary table per run with the CPU split. Everything it started is stopped at the end,
on Ctrl-C and on failure. Used through loadtests/run.sh; docs/operations.md, "Load testing".
"""

from __future__ import annotations

import argparse
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import FrameType

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import seed  # noqa: E402 - beside this file, like the scenarios
from report import CpuSampler, cpu_table, failures_table, stages_table, stats_table  # noqa: E402
from stack import Stack, embedded, full  # noqa: E402

SCENARIOS = {
    "mixed": ["MixedAgent"],
    "rest": ["RestAgent"],
    "mcp": ["McpAgent"],
    "sdk": ["SdkAgent"],
    "ingest": ["IngestAgent"],
    "noisy": ["NoisyNeighbour", "QuietTenant"],
    "quiet": ["QuietTenant"],
}
SCENARIOS["all"] = sorted({c for classes in SCENARIOS.values() for c in classes})
MAX_USERS = 1000
MAX_SECONDS = 3600
BOUNDS = [
    ("workers", 1, 64),
    ("job_workers", 0, 64),
    ("tenants", 1, 1000),
    ("namespaces", 1, 100),
    ("seed_users", 1, 1000),
    ("memories", 0, 1_000_000),
]


def parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(prog="loadtests/run.sh", description=__doc__.split("\n\n")[0])
    p.add_argument(
        "--scenario",
        action="append",
        help=f"comma-separated, run together: {', '.join(SCENARIOS)} (default mixed); repeat the option for "
        "runs one after the other on the same seeded stack (--scenario quiet --scenario noisy)",
    )
    p.add_argument(
        "--users",
        action="append",
        help="simulated users, comma-separated for one run each (10,40; default 10); given once per --scenario, "
        "each applies to its own (--scenario quiet --users 5 --scenario noisy --users 10)",
    )
    p.add_argument("--time", type=int, default=60, help="seconds per run (default 60)")
    p.add_argument("--spawn-rate", type=float, help="users started per second (default: all at once)")
    p.add_argument("--think", type=float, default=0.0, help="each user pauses up to this many s (default 0)")
    p.add_argument(
        "--stack",
        choices=["embedded", "full", "none"],
        default="embedded",
        help="embedded: `memvault serve` on its own PostgreSQL (default); full: PostgreSQL + Redis + "
        "API + job workers; none: a running deployment at --host",
    )
    p.add_argument("--host", help="with --stack none: the deployment's base URL")
    p.add_argument("--workers", type=int, default=1, help="API processes (`memvault serve --workers`)")
    p.add_argument("--job-workers", type=int, default=1, help="full stack: `memvault worker` processes")
    p.add_argument("--database-url", help="full stack: this PostgreSQL instead of one started here")
    p.add_argument("--redis-url", help="full stack: this Redis instead of a redis-server started here")
    p.add_argument("--tenants", type=int, default=2)
    p.add_argument("--namespaces", type=int, default=2, help="per tenant")
    p.add_argument("--seed-users", type=int, default=4, help="end users per tenant")
    p.add_argument("--memories", type=int, default=5000, help="seeded in all (0: no seeding; keys from env)")
    p.add_argument("--out", type=Path, help="results folder (default loadtests/results/<time>, git-ignored)")
    p.add_argument("--tour", action="store_true", help="each user first runs every one of its operations once")
    p.add_argument("--keep-data", action="store_true", help="keep the database folder after the run")
    args = p.parse_args(argv)
    args.scenario = [[s.strip() for s in group.split(",") if s.strip()] for group in args.scenario or ["mixed"]]
    if unknown := {s for group in args.scenario for s in group} - set(SCENARIOS):
        p.error(f"unknown scenario(s): {', '.join(sorted(unknown))}")
    try:
        args.users = [[int(u) for u in group.split(",") if u.strip()] for group in args.users or ["10"]]
    except ValueError:
        p.error("--users: whole numbers, comma-separated")
    if not all(group and all(1 <= u <= MAX_USERS for u in group) for group in args.users):
        p.error(f"--users: 1..{MAX_USERS}")
    if len(args.users) not in (1, len(args.scenario)):
        p.error("give --users once, or once per --scenario")
    if len(args.users) == 1:
        args.users *= len(args.scenario)
    if not 1 <= args.time <= MAX_SECONDS:
        p.error(f"--time: 1..{MAX_SECONDS}")
    for name, low, high in BOUNDS:
        if not low <= getattr(args, name) <= high:
            p.error(f"--{name.replace('_', '-')}: {low}..{high}")
    if args.stack == "none" and not args.host:
        p.error("--stack none needs --host")
    if args.stack != "none" and args.host:
        p.error("--host is for --stack none; the other stacks listen on a free loopback port")
    return args


def _interrupted(signum: int, frame: FrameType | None) -> None:
    raise KeyboardInterrupt  # the finally blocks stop what was started


def run_locust(
    args: argparse.Namespace, stack: Stack, scenario: list[str], users: int, env: dict[str, str]
) -> tuple[Path, int]:
    prefix = stack.out / f"{'+'.join(scenario)}-u{users}"
    classes = sorted({c for s in scenario for c in SCENARIOS[s]})
    cmd = [
        sys.executable, "-m", "locust", "-f", str(HERE / "locustfile.py"), "--headless", "--only-summary",
        "--host", stack.host, "-u", str(users), "-r", str(args.spawn_rate or users), "-t", f"{args.time}s",
        "--stop-timeout", "60", "--csv", str(prefix), "--html", f"{prefix}.html", *classes,
    ]  # fmt: skip
    with Path(f"{prefix}-locust.log").open("wb") as log:
        locust = subprocess.Popen(cmd, stdout=log, stderr=subprocess.STDOUT, env=env, start_new_session=True)
        stack.procs.setdefault("locust", []).append(locust)
        sampler = CpuSampler({
            "PostgreSQL": lambda: [pid] if (pid := stack.postmaster_pid()) else [],
            "API processes": lambda: stack.pids("api"),
            "job workers": lambda: stack.pids("worker"),
            "Redis": lambda: stack.pids("redis"),
            "locust": lambda: stack.pids("locust"),
        })  # fmt: skip
        sampler.start()
        try:
            locust.wait(timeout=args.time + 180)  # interrupted or past its time: stack.stop() ends it
        finally:
            cpu = sampler.stop()
        stack.procs["locust"].remove(locust)
    stats = Path(f"{prefix}_stats.csv")
    if not stats.exists():
        raise SystemExit(f"locust wrote no statistics; see {prefix}-locust.log")
    table, failures = stats_table(stats)
    print(f"\n### {', '.join(scenario)}: {users} users, {args.time} s, {args.stack} stack\n", flush=True)
    print(table)
    print()
    print(cpu_table(cpu))
    if stages := stages_table(Path(f"{prefix}_search_stages.json")):
        print(f"\n{stages}")
    if failures:
        print(f"\n{failures} failed requests:\n{failures_table(Path(f'{prefix}_failures.csv'))}")
    print(f"\nCSV and HTML: {prefix}_stats.csv, {prefix}.html", flush=True)
    return stats, failures


def main(argv: list[str] | None = None) -> int:
    args = parse(argv)
    out = args.out or HERE / "results" / datetime.now(UTC).strftime("%Y%m%dT%H%M%SZ")
    out.mkdir(parents=True, exist_ok=True)
    data = Path(tempfile.mkdtemp(prefix="memvault-loadtest-")) if args.stack != "none" else None
    stack = Stack(out=out, data_dir=data)
    # Both explicitly: a shell starting this in the background may have set SIGINT to be ignored.
    signal.signal(signal.SIGTERM, _interrupted)
    signal.signal(signal.SIGINT, _interrupted)
    failures = 0
    try:
        started = time.perf_counter()
        if args.stack == "embedded":
            embedded(stack, args.workers)
        elif args.stack == "full":
            full(stack, args.workers, args.job_workers, args.database_url, args.redis_url)
        else:
            stack.host = args.host.rstrip("/")
        print(f"{args.stack} stack at {stack.host} ({time.perf_counter() - started:.0f} s); results in {out}",
              flush=True)  # fmt: skip
        env = {**stack.env, "MEMVAULT_LOADTEST_THINK_S": str(args.think)}
        if args.tour:
            env["MEMVAULT_LOADTEST_TOUR"] = "1"
        if args.memories > 0:
            plan = out / "plan.json"
            os.environ.update({k: v for k, v in stack.env.items() if k.startswith("MEMVAULT_")})
            seed.main([
                "--host", stack.host, "--tenants", str(args.tenants), "--namespaces", str(args.namespaces),
                "--users", str(args.seed_users), "--memories", str(args.memories), "--plan", str(plan),
                *(["--data-dir", str(data)] if args.stack == "embedded" else []),
            ])  # fmt: skip
            env["MEMVAULT_LOADTEST_PLAN"] = str(plan)
        for scenario, counts in zip(args.scenario, args.users, strict=True):
            for users in counts:
                failures += run_locust(args, stack, scenario, users, env)[1]
    except KeyboardInterrupt:
        print("\ninterrupted: stopping everything this run started", file=sys.stderr)
        return 130
    finally:
        stack.stop()
        if data is not None and not args.keep_data:
            shutil.rmtree(data, ignore_errors=True)
        elif data is not None:
            print(f"database kept in {data}", file=sys.stderr)
    return 1 if failures else 0


if __name__ == "__main__":
    raise SystemExit(main())
