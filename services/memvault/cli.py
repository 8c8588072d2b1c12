"""The `memvault` command: serve, worker, scheduler, migrate, mcp, export, admin, cluster."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import logging
import os
import signal
import sys
import uuid
from pathlib import Path
from typing import TYPE_CHECKING, Any

from memvault import __version__
from memvault.config import Settings
from memvault.members.roles import ROLES

if TYPE_CHECKING:
    from memvault.operator import Bootstrapped


def _settings(args: argparse.Namespace) -> Settings:
    overrides: dict[str, Any] = {}
    for name in ("host", "port", "data_dir"):
        value = getattr(args, name, None)
        if value is not None:
            overrides[name] = value
    return Settings(**overrides)


def _logging(settings: Settings) -> None:
    logging.basicConfig(
        level=settings.log_level.upper(),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
        stream=sys.stderr,
    )


def _exit_on_sigterm(signum: int, frame: Any) -> None:
    raise SystemExit(0)


def cmd_serve(args: argparse.Namespace) -> int:
    from memvault import serving
    from memvault.db.session import Database
    from memvault.observability import logs
    from memvault.operator import bootstrap, prepare_database

    # uvicorn shuts down gracefully on SIGTERM, then raises the signal again. With the default action
    # the process would die right there without running atexit hooks, and the embedded PostgreSQL
    # (stopped by one) would outlive it; exit normally instead, here and during start-up.
    signal.signal(signal.SIGTERM, _exit_on_sigterm)
    settings = _settings(args)
    logs.configure(settings.log_level, settings.log_format)
    workers = serving.worker_count(args.workers, settings)
    urls = prepare_database(settings)

    async def first_start() -> Any:
        db = Database(urls, pool_size=1)
        try:
            return await bootstrap(db, settings)
        finally:
            await db.dispose()

    created = asyncio.run(first_start())
    where = f"embedded PostgreSQL in {settings.data_dir.resolve()}" if urls.embedded else "MEMVAULT_DATABASE_URL"
    print(banner(settings, where, workers, created), flush=True)
    # Ctrl-C: uvicorn has already shut down gracefully when it raises SIGINT again; no traceback.
    with contextlib.suppress(KeyboardInterrupt):
        serving.run(settings, urls, workers)
    return 0


def banner(settings: Settings, where: str, workers: int, created: Bootstrapped | None = None) -> str:
    """What `memvault serve` prints on start: where everything is, and on the first start of an
    empty database (``created``) the admin key and the owner's password,
    which exist nowhere else."""
    base = settings.resolved_public_url()
    lines = [
        f"memvault {__version__} on {where}",
        f"  Dashboard  {base}/dashboard",
        f"  REST API   {base}/v1",
        f"  API docs   {base}/docs",
        f"  Status     {base}/status (page), {base}/v1/status (JSON)",
        f"  MCP        {base}/mcp",
        f"  Workers    {workers} process{'es' if workers > 1 else ''}",
    ]
    if created is not None:
        tenant = created.tenant
        lines += [
            "",
            f"First start: created tenant '{tenant.name}' with namespace '{tenant.namespace}'.",
            "Admin API key (shown once; store it now):",
            f"  {tenant.api_key}",
            "Dashboard owner (password shown once; store it now):",
            f"  Sign in at {base}/dashboard/signin",
            f"  Email      {created.owner_email}",
            f"  Password   {created.owner_password}",
            f"  Lost it?   memvault admin set-password --tenant {tenant.name} --email {created.owner_email}",
        ]
    return "\n".join(lines)


def cmd_migrate(args: argparse.Namespace) -> int:
    from memvault.operator import current_revision, prepare_database

    settings = _settings(args)
    _logging(settings)
    urls = prepare_database(settings)
    print(f"database at revision {current_revision(urls)}")
    return 0


def cmd_worker(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _logging(settings)
    if not settings.redis_url:
        print(
            "memvault worker needs MEMVAULT_REDIS_URL; without Redis, jobs run inside `memvault serve`.",
            file=sys.stderr,
        )
        return 2
    shared = os.environ.get("PROMETHEUS_MULTIPROC_DIR")
    if shared:  # the job metrics go there, opened as the job modules load: it must exist first
        Path(shared).mkdir(parents=True, exist_ok=True)
    from memvault.jobs import QUEUES
    from memvault.jobs.runner import serve_worker

    unknown = set(args.queues or ()) - set(QUEUES)
    if unknown:
        print(f"unknown queue(s): {', '.join(sorted(unknown))}; known: {', '.join(QUEUES)}", file=sys.stderr)
        return 2
    serve_worker(settings, args.queues or QUEUES, metrics_port=args.metrics_port, metrics_host=args.metrics_host)
    return 0


def cmd_scheduler(args: argparse.Namespace) -> int:
    settings = _settings(args)
    _logging(settings)
    if not settings.redis_url:
        print(
            "memvault scheduler needs MEMVAULT_REDIS_URL; without Redis, `memvault serve` runs periodic maintenance.",
            file=sys.stderr,
        )
        return 2
    if settings.scheduler_interval_s <= 0:
        print("periodic maintenance is off (MEMVAULT_SCHEDULER_INTERVAL_S=0); nothing to schedule.", file=sys.stderr)
        return 2
    from memvault.jobs.schedule import serve_scheduler

    serve_scheduler(settings)
    return 0


def cmd_admin(args: argparse.Namespace) -> int:
    from memvault import admin

    settings = _settings(args)
    _logging(settings)
    return admin.command(args, settings)


def cmd_mcp(args: argparse.Namespace) -> int:
    from memvault.mcp.stdio import main as stdio_main

    if args.mcp_cmd == "setup":
        return _mcp_setup(args.dir or Path.cwd(), args.target)

    settings = _settings(args)
    return stdio_main(settings, args.url, args.profile)


def _mcp_setup(directory: Path, target: Any) -> int:
    from memvault.mcp import setup

    directory = directory.resolve()
    try:
        for chosen in setup.chosen(directory, target):
            print(setup.describe(setup.install(directory, chosen), directory))
    except setup.SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def cmd_export(args: argparse.Namespace) -> int:
    from memvault.admin import run_admin, tenant_principal
    from memvault.portability.markdown import Mirror

    settings = _settings(args)
    _logging(settings)

    async def fn(api: Any, db: Any) -> Any:
        p = await tenant_principal(db, args.tenant or settings.bootstrap_tenant)
        names = [args.namespace] if args.namespace else [n.name for n in await api.list_namespaces(p)]
        mirror = Mirror(args.markdown.resolve())
        for name in names:
            async for record in await api.export_current_memories(p, name):
                mirror.put(record)
        return {"dir": str(mirror.root), **mirror.finish(names, every_namespace=not args.namespace)}

    return run_admin(settings, fn)


def cmd_cluster(args: argparse.Namespace) -> int:
    from memvault.cluster import local

    try:
        if args.cluster_cmd == "up":
            cluster = local.up(args.data_dir, workers=args.workers, port=args.port)
            print(f"Citus cluster up: coordinator and {len(cluster.workers)} workers in {cluster.data_dir}")
            print(f"  MEMVAULT_DATABASE_URL={cluster.uri()}")
        elif args.cluster_cmd == "isolate-tenant":
            return _isolate_tenant(args)
        elif args.cluster_cmd == "down":
            local.down(args.data_dir)
            print(f"Citus cluster in {args.data_dir.resolve()} stopped")
        else:
            for n in local.status(args.data_dir):
                active = {True: "active", False: "inactive", None: "-"}[n.active]
                state = "running" if n.running else "stopped"
                print(f"{n.name:12s} 127.0.0.1:{n.port}  {state:8s} {n.role or '-'} {active}")
    except local.ClusterError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def _isolate_tenant(args: argparse.Namespace) -> int:
    import psycopg

    from memvault.cluster import local, placement
    from memvault.db.urls import libpq

    url = local.load(args.data_dir).uri() if args.data_dir else _settings(args).database_url
    if not url:
        print("error: name the cluster: --data-dir, or MEMVAULT_DATABASE_URL (its coordinator)", file=sys.stderr)
        return 2
    to = None
    if args.to:
        host, _, port = args.to.rpartition(":")
        to = (host, int(port))
    try:
        with psycopg.connect(libpq(url), autocommit=True) as conn:
            done = placement.isolate_tenant(conn, args.tenant, to, mode=args.mode)
    except placement.PlacementError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    print(
        f"tenant {done.tenant_id}: shard {done.shard} on {done.host}:{done.port}"
        f"{' (isolated now)' if done.isolated else ''}{' (moved now)' if done.moved else ''}"
    )
    for warning in done.warnings:
        print(f"warning: {warning}; its searches run without statistics until it is analysed", file=sys.stderr)
    return 0


def _positive(value: str) -> int:
    n = int(value)
    if n < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, not {n}")
    return n


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="memvault", description="Long-term memory for AI agents.")
    parser.add_argument("--version", action="version", version=f"memvault {__version__}")
    sub = parser.add_subparsers(dest="cmd", required=True)

    def db_opts(p: argparse.ArgumentParser) -> None:
        p.add_argument("--data-dir", type=Path, help="embedded database folder (default ./memvault-data)")

    serve = sub.add_parser("serve", help="run the API server (embedded database unless MEMVAULT_DATABASE_URL)")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 8080)")
    serve.add_argument(
        "--workers", type=_positive, help="processes sharing the port (default MEMVAULT_WORKERS, else one per CPU core)"
    )
    db_opts(serve)
    serve.set_defaults(func=cmd_serve)

    mig = sub.add_parser("migrate", help="apply database migrations")
    db_opts(mig)
    mig.set_defaults(func=cmd_migrate)

    worker = sub.add_parser("worker", help="run background jobs from Redis (needs MEMVAULT_REDIS_URL)")
    worker.add_argument("--queues", nargs="*", help="queues to listen on (default: all)")
    worker.add_argument("--metrics-port", type=int, help="serve this worker's job metrics on this port (default: none)")
    worker.add_argument("--metrics-host", default="127.0.0.1", help="address for --metrics-port (default 127.0.0.1)")
    worker.set_defaults(func=cmd_worker)

    scheduler = sub.add_parser(
        "scheduler",
        help="queue periodic namespace maintenance with RQ's cron (needs MEMVAULT_REDIS_URL; run one)",
    )
    scheduler.set_defaults(func=cmd_scheduler)

    mcp = sub.add_parser(
        "mcp", help="serve the MCP tools over stdio: locally, or bridged to a remote memvault with --url"
    )
    mcp.add_argument("--url", help="remote MCP endpoint, e.g. https://memvault.example/mcp (key: MEMVAULT_API_KEY)")
    mcp.add_argument(
        "--profile",
        choices=["core", "extended"],
        help="tools to offer (default: MEMVAULT_MCP_PROFILE, core; with --url: the URL's own profile)",
    )
    db_opts(mcp)
    mcp.set_defaults(func=cmd_mcp)
    msub = mcp.add_subparsers(dest="mcp_cmd", metavar="{setup}")
    ms = msub.add_parser("setup", help="write the memory rules into a project's CLAUDE.md, AGENTS.md or .cursor/rules")
    ms.add_argument("--dir", type=Path, help="the project (default: the current directory)")
    ms.add_argument(
        "--target",
        choices=["claude", "agents", "cursor", "all"],
        help="which rule file (default: those the project has, else AGENTS.md)",
    )

    export = sub.add_parser("export", help="mirror a tenant's memories into a folder, one Markdown file each")
    export.add_argument(
        "--markdown", type=Path, required=True, metavar="DIR", help="the folder (e.g. a git repository)"
    )
    export.add_argument("--tenant", help="the tenant (default: the bootstrap tenant)")
    export.add_argument("--namespace", help="only this namespace (default: all)")
    db_opts(export)
    export.set_defaults(func=cmd_export)

    admin = sub.add_parser("admin", help="tenants, plans, API keys and namespaces")
    asub = admin.add_subparsers(dest="admin_cmd", required=True)
    ct = asub.add_parser("create-tenant", help="create a tenant with a namespace and an admin key")
    ct.add_argument("name")
    ct.add_argument("--namespace", default="default")
    ct.add_argument("--plan", default="unlimited", help="the tenant's plan (default unlimited; see list-plans)")
    ck = asub.add_parser("create-key", help="create an API key")
    ck.add_argument("--tenant", required=True)
    ck.add_argument("--name")
    ck.add_argument("--scopes", help="comma-separated: read,write,admin (default read,write)")
    ck.add_argument("--namespaces", help="comma-separated allow-list (default: all)")
    ck.add_argument("--default-namespace")
    ck.add_argument(
        "--operator", action="store_true", help="also grant 'operator': may write system-scope memories for all tenants"
    )
    ck.add_argument(
        "--expires-in-days", type=_positive, help="the key stops working after so many days (default never)"
    )
    lk = asub.add_parser("list-keys", help="list a tenant's API keys")
    lk.add_argument("--tenant", required=True)
    rk = asub.add_parser("revoke-key", help="revoke an API key")
    rk.add_argument("--tenant", required=True)
    rk.add_argument("key_id", type=uuid.UUID)
    rok = asub.add_parser("rotate-key", help="give an API key a new secret; the old one works for a grace period")
    rok.add_argument("--tenant", required=True)
    rok.add_argument("--grace-seconds", type=int, default=3600, help="how long the old secret keeps working (0-86400)")
    rok.add_argument("key_id", type=uuid.UUID)
    cn = asub.add_parser("create-namespace", help="create a namespace")
    cn.add_argument("--tenant", required=True)
    cn.add_argument("name")
    cn.add_argument("--description")
    cu = asub.add_parser(
        "create-user", help="create a member who signs in to the dashboard and MCP clients (--role owner: an owner)"
    )
    cu.add_argument("--tenant", required=True)
    cu.add_argument("--email", required=True)
    cu.add_argument("--name")
    cu.add_argument("--scopes", help="comma-separated: read,write (default both): the most a client may be granted")
    cu.add_argument("--role", choices=list(ROLES), help="the member's role (overrides --scopes)")
    cu.add_argument("--password-env", help="environment variable holding the password (default: read from stdin)")
    spw = asub.add_parser(
        "set-password", help="give a user (the bootstrap owner who lost the printed one) a new password"
    )
    spw.add_argument("--tenant", required=True)
    spw.add_argument("--email", required=True)
    spw.add_argument("--password-env", help="environment variable holding the password (default: read from stdin)")
    du = asub.add_parser("disable-user", help="disable a user and revoke every OAuth grant they gave")
    du.add_argument("--tenant", required=True)
    du.add_argument("--email", required=True)
    dt = asub.add_parser("delete-tenant", help="delete a tenant and everything it holds (not undoable)")
    dt.add_argument("--tenant", required=True)
    dt.add_argument("--confirm", metavar="NAME", help="the tenant's name again: nothing is deleted without it")
    rsk = asub.add_parser("rotate-signing-key", help="start signing OAuth access tokens with a new key")
    cp = asub.add_parser("create-plan", help="create a plan: named limits a tenant may be put on")
    cp.add_argument("name")
    cp.add_argument("--limit", action="append", metavar="NAME=N", help="a limit (repeat; N or 'unlimited')")
    cp.add_argument("--from", dest="base", metavar="PLAN", help="start from this plan's limits")
    cp.add_argument("--description")
    cp.add_argument("--replace", action="store_true", help="replace the limits of an existing plan")
    sp = asub.add_parser("set-plan", help="put a tenant on a plan, with overrides of single limits")
    sp.add_argument("--tenant", required=True)
    sp.add_argument("plan")
    sp.add_argument("--override", action="append", metavar="NAME=N", help="replace one limit for this tenant (repeat)")
    sp.add_argument("--clear-overrides", action="store_true", help="drop the tenant's overrides")
    lp = asub.add_parser("list-plans", help="list the plans and their limits")
    for p in (ct, ck, lk, rk, rok, cn, cu, spw, du, dt, rsk, cp, sp, lp):
        db_opts(p)
    admin.set_defaults(func=cmd_admin)

    cluster = sub.add_parser(
        "cluster", help="a local Citus cluster for development and tests (needs infra/scripts/build_citus.sh)"
    )
    csub = cluster.add_subparsers(dest="cluster_cmd", required=True)
    cup = csub.add_parser("up", help="start a coordinator and workers (made on first use) and join them")
    cup.add_argument("--workers", type=_positive, default=2, help="worker nodes (default 2)")
    cup.add_argument("--port", type=int, default=9700, help="the coordinator's port; workers take the next ones")
    for name, help_ in (("down", "stop every node (the data stays)"), ("status", "each node and its state")):
        csub.add_parser(name, help=help_)
    for p in csub.choices.values():
        p.add_argument("--data-dir", type=Path, required=True, help="the cluster's folder, one subfolder per node")
    iso = csub.add_parser(
        "isolate-tenant", help="put one tenant on shards of its own, optionally on a given node (any Citus cluster)"
    )
    iso.add_argument("--tenant", required=True, help="the tenant's name or id")
    iso.add_argument(
        "--to",
        metavar="HOST:PORT",
        help="the worker to move it to (default: where it is with block_writes, another worker with logical)",
    )
    iso.add_argument(
        "--mode",
        choices=("logical", "block_writes"),
        default="logical",
        help="logical (default): writes go on during the copy, needs wal_level=logical on the workers; "
        "block_writes: the tenant's shard takes no writes until its copy is done",
    )
    iso.add_argument("--data-dir", type=Path, help="a local cluster's folder (default: MEMVAULT_DATABASE_URL's)")
    cluster.set_defaults(func=cmd_cluster)
    return parser


def main(argv: list[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    return int(args.func(args) or 0)


if __name__ == "__main__":
    raise SystemExit(main())
