"""`memvault serve`'s processes: the parent prepares the database once (the embedded PostgreSQL,
migrations, the first tenant), then uvicorn runs ``workers`` processes on one listening socket,
each building its own app (pools, Redis client, embedding model) from the environment the parent
leaves them.

Why processes: a search spends most of its time in Python and the embedding model, which hold the
GIL, so one process uses one core however many requests wait (docs/operations.md, "Workers")."""

from __future__ import annotations

import contextlib
import logging
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING

from memvault.config import Settings
from memvault.db.urls import DatabaseUrls, resolve
from memvault.observability.samples import writer_alive

if TYPE_CHECKING:
    from fastapi import FastAPI

log = logging.getLogger(__name__)

# The parent hands the embedded server's owner URL to its workers: they use the server it started
# instead of each attaching to (and perhaps starting) one of their own.
EMBEDDED_URI_ENV = "MEMVAULT_SERVE_EMBEDDED_URI"
MULTIPROC_ENV = "PROMETHEUS_MULTIPROC_DIR"
FACTORY = "memvault.serving:worker_app"


def default_workers() -> int:
    """One process per core this process may run on (a container's CPU set, not the host's)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not Linux
        return os.cpu_count() or 1


def worker_count(flag: int | None, settings: Settings) -> int:
    return flag or settings.workers or default_workers()


def _hand_over(settings: Settings, urls: DatabaseUrls) -> None:
    """What a worker needs that its own Settings() would not find: the command line's overrides
    and the embedded server's URL."""
    os.environ["MEMVAULT_HOST"] = settings.host
    os.environ["MEMVAULT_PORT"] = str(settings.port)
    os.environ["MEMVAULT_DATA_DIR"] = str(settings.data_dir)
    if urls.embedded:
        os.environ[EMBEDDED_URI_ENV] = urls.owner.render_as_string(hide_password=False)


def handed_urls(settings: Settings) -> DatabaseUrls | None:
    uri = os.environ.get(EMBEDDED_URI_ENV)
    if uri and not settings.database_url:
        return resolve(uri, None, settings.app_role, embedded=True)
    return None


@contextlib.contextmanager
def metrics_dir(workers: int) -> Iterator[None]:
    """prometheus_client's multiprocess mode for more than one worker: a folder where each writes
    its samples, emptied at start (the library's rule: files of an earlier run would be summed
    in). One of ours, removed at exit, unless the operator named one in PROMETHEUS_MULTIPROC_DIR;
    there the files of live processes stay: `memvault worker`s on this host writing to the same
    folder, whose job metrics this server's scrape then includes."""
    given = os.environ.get(MULTIPROC_ENV)
    if given:
        folder = Path(given)
        folder.mkdir(parents=True, exist_ok=True)
        for stale in folder.glob("*.db"):
            if not writer_alive(stale):
                stale.unlink()
        yield
        return
    if workers == 1:
        yield
        return
    folder = Path(tempfile.mkdtemp(prefix="memvault-metrics-"))
    os.environ[MULTIPROC_ENV] = str(folder)
    try:
        yield
    finally:
        shutil.rmtree(folder, ignore_errors=True)


def worker_app() -> FastAPI:
    """uvicorn's factory, called in each worker process (and in the parent with one worker)."""
    from memvault.app import create_app
    from memvault.observability import logs, tracing

    settings = Settings()
    logs.configure(settings.log_level, settings.log_format)
    if tracing.enabled_by_env():
        tracing.configure()
    return create_app(settings, urls=handed_urls(settings))


def run(settings: Settings, urls: DatabaseUrls, workers: int) -> None:
    """Serve until SIGTERM or SIGINT: each worker then stops accepting, lets the requests it has
    finish (up to ``shutdown_timeout_s``) and its running jobs end, then exits."""
    import uvicorn

    _hand_over(settings, urls)
    with metrics_dir(workers):
        uvicorn.run(
            FACTORY,
            factory=True,
            workers=workers,
            host=settings.host,
            port=settings.port,
            log_level=settings.log_level.lower(),
            # Logging is ours (observability/logs.py), including the access line with the request id.
            log_config=None,
            access_log=False,
            proxy_headers=True,
            timeout_graceful_shutdown=settings.shutdown_timeout_s,
            # A worker loads the embedding model before it serves; the parent's liveness ping must
            # not take that for a hung worker on a busy machine.
            timeout_worker_healthcheck=30,
        )
