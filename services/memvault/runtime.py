"""Start-up steps shared by `memvault serve`, the CLI and the tests: find or start the database,
and supervise the embedded one. Migrating and the first tenant are the owner's work
(memvault/operator.py)."""

from __future__ import annotations

import logging

from memvault.config import Settings
from memvault.db.embedded import Supervisor
from memvault.db.urls import DatabaseUrls, resolve

log = logging.getLogger(__name__)


def database_urls(settings: Settings) -> DatabaseUrls:
    """The configured server, or the embedded one in ``settings.data_dir`` (started if needed)."""
    if settings.database_url:
        return resolve(settings.database_url, settings.app_database_url, settings.app_role, embedded=False)
    from memvault.db.embedded import start_embedded

    uri = start_embedded(settings.data_dir, settings.embedded_shared_buffers)
    return resolve(uri, None, settings.app_role, embedded=True)


def embedded_supervisor(settings: Settings) -> Supervisor | None:
    """The supervisor of the embedded PostgreSQL that this process started from ``settings.data_dir``;
    None with MEMVAULT_DATABASE_URL (a server someone else runs and restarts) or when turned off."""
    if settings.database_url or settings.embedded_supervise_interval_s <= 0:
        return None
    return Supervisor(
        settings.data_dir,
        interval_s=settings.embedded_supervise_interval_s,
        give_up_after=settings.embedded_restart_attempts,
    )
