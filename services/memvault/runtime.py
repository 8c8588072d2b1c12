"""Start-up steps shared by `memvault serve`, the CLI and the tests: find or start the database,
migrate it, and on an empty database create the first tenant."""

from __future__ import annotations

import logging

from memvault.config import Settings
from memvault.db import migrate
from memvault.db.embedded import Supervisor
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls, resolve
from memvault.tenants import service as tenants_service

log = logging.getLogger(__name__)


def database_urls(settings: Settings) -> DatabaseUrls:
    """The configured server, or the embedded one in ``settings.data_dir`` (started if needed)."""
    if settings.database_url:
        return resolve(settings.database_url, settings.app_database_url, settings.app_role, embedded=False)
    from memvault.db.embedded import start_embedded

    uri = start_embedded(settings.data_dir, settings.embedded_shared_buffers)
    return resolve(uri, None, settings.app_role, embedded=True)


def prepare_database(settings: Settings) -> DatabaseUrls:
    urls = database_urls(settings)
    migrate.upgrade(urls.owner, settings.app_role, allow_login=urls.embedded)
    return urls


async def bootstrap(db: Database, settings: Settings) -> tenants_service.NewTenant | None:
    """Create the first tenant, its `default` namespace and an admin key when there is no tenant yet."""
    async with db.owner() as s:
        if await tenants_service.count(s) > 0:
            return None
        return await tenants_service.create(s, settings.bootstrap_tenant, actor="bootstrap")


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
