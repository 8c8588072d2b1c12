"""create_app(settings): the FastAPI gateway. The lifespan builds the engine, Redis client,
embedder and the NamespaceAPI facade that every router calls."""

from __future__ import annotations

import asyncio
import contextlib
import gc
import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import FastAPI
from starlette.routing import Route

from memvault import __version__
from memvault.api import NamespaceAPI
from memvault.audit.router import router as audit_router
from memvault.config import Settings
from memvault.contradictions.router import router as contradictions_router
from memvault.dashboard.router import router as dashboard_router
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.embeddings import Embedder, build_embedder
from memvault.entities.router import router as entities_router
from memvault.events.router import router as events_router
from memvault.facts.router import router as facts_router
from memvault.forget.router import router as forget_router
from memvault.gateway import idempotency, openapi, problems
from memvault.gateway.admission import Admission, AdmissionMiddleware
from memvault.gateway.middleware import (
    BodyLimitMiddleware,
    BodyTimeoutMiddleware,
    DoorMiddleware,
    RateLimitHeadersMiddleware,
    RequestIdMiddleware,
)
from memvault.graph.router import router as graph_router
from memvault.jobs.dispatch import start_dispatcher
from memvault.jobs.router import router as jobs_router
from memvault.jobs.schedule import run_in_process, sample_in_process
from memvault.keys.router import router as keys_router
from memvault.maintenance.router import router as maintenance_router
from memvault.mcp import http as mcp_http
from memvault.mcp.runtime import Runtime
from memvault.mcp.server import build_server
from memvault.members.router import router as members_router
from memvault.memories.router import router as memories_router
from memvault.metering.router import router as usage_router
from memvault.namespaces.router import router as namespaces_router
from memvault.oauth.router import router as oauth_router
from memvault.oauth.router import users_router
from memvault.observability import metrics, tracing
from memvault.observability.router import router as metrics_router
from memvault.observability.tracing import TracingMiddleware
from memvault.portability.router import router as portability_router
from memvault.retrieval.rerank import Reranker, build_reranker
from memvault.retrieval.rewrite import QueryRewriter, build_rewriter
from memvault.runtime import database_urls, embedded_supervisor
from memvault.status.router import router as status_router
from memvault.traces.router import router as traces_router
from memvault.web.router import router as web_router
from memvault.webhooks.router import router as webhooks_router

log = logging.getLogger(__name__)


def create_app(
    settings: Settings | None = None,
    *,
    urls: DatabaseUrls | None = None,
    embedder: Embedder | None = None,
    reranker: Reranker | None = None,
    rewriter: QueryRewriter | None = None,
) -> FastAPI:
    """Build the app. ``urls``, ``embedder``, ``reranker`` and ``rewriter`` default to what settings
    name; tests pass shared ones."""
    settings = settings or Settings()

    @asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        # First: a misconfigured second stage (http without a base URL) stops the start before
        # anything is opened.
        rr = reranker or build_reranker(settings)
        rw = rewriter or build_rewriter(settings)
        db = Database(urls or database_urls(settings), pool_size=settings.db_pool_size)
        app.state.database = db  # for /metrics' queue depth
        metrics.track_pool(db.app_engine, "app", settings.db_pool_size)
        db.on_pool_wait = lambda seconds: metrics.observe_pool_wait("app", seconds)
        metrics.IN_FLIGHT_LIMIT.inc(admission.limit)
        emb = embedder or build_embedder(settings)
        load = getattr(emb, "load", None)
        if load is not None:
            await asyncio.to_thread(load)
        redis: Any = None
        if settings.redis_url:
            from redis.asyncio import Redis

            redis = Redis.from_url(settings.redis_url)
        reranker_load = getattr(rr, "load", None)
        if reranker_load is not None:
            try:
                await asyncio.to_thread(reranker_load)
            except Exception:
                # Best effort like the stage itself: searches report rerank "failed" and serve the
                # first-stage order rather than the server refusing to start.
                log.exception("could not load the reranker; searches will report it failed")
        jobs = await start_dispatcher(settings, db, emb)
        app.state.api = NamespaceAPI(db, emb, settings, redis=redis, jobs=jobs, reranker=rr, rewriter=rw)
        app.state.settings = settings
        # With Redis, periodic maintenance is `memvault scheduler`'s (RQ cron); without, this process's.
        ticks: asyncio.Task[None] | None = None
        samples: asyncio.Task[None] | None = None
        if not settings.redis_url and settings.scheduler_interval_s > 0:
            ticks = asyncio.create_task(run_in_process(app.state.api, settings.scheduler_interval_s))
            # The status page's health sample, a minute apart, likewise (jobs/schedule.py).
            samples = asyncio.create_task(sample_in_process(app.state.api))
        # Webhooks: without Redis this process sends the outbox; with Redis, `memvault worker` does.
        deliveries: asyncio.Task[None] | None = None
        if not settings.redis_url and settings.webhook_sweep_interval_s > 0:
            from memvault.webhooks.delivery.runner import DeliveryRunner

            app.state.webhook_runner = DeliveryRunner(db, settings)
            deliveries = asyncio.create_task(app.state.webhook_runner.run())
        # The embedded PostgreSQL (no MEMVAULT_DATABASE_URL) is restarted when it dies (db/embedded.py).
        app.state.supervisor = supervisor = embedded_supervisor(settings)
        watch = asyncio.create_task(supervisor.run()) if supervisor is not None else None
        await app.state.api.warm_search()
        # Everything loaded so far (modules, the models, the app) lives as long as the process:
        # frozen out of the collector's reach, it is no longer scanned by each full collection,
        # which took up to 450 ms of a search at 700,000 objects (docs/benchmarks.md).
        gc.collect()
        gc.freeze()
        try:
            # Each profile's MCP session manager has a task group serving its requests for the app's lifetime.
            async with contextlib.AsyncExitStack() as managers:
                for server in mcp_servers.values():
                    await managers.enter_async_context(server.session_manager.run())
                yield
        finally:
            # What the app leaves behind on shutdown (a test's, an embedded run's) may be collected.
            gc.unfreeze()
            for task in (ticks, samples, deliveries, watch):
                if task is not None:
                    task.cancel()
                    with contextlib.suppress(asyncio.CancelledError):
                        await task
            await app.state.api.aclose()
            await jobs.aclose()
            if redis is not None:
                await redis.aclose()
            if embedder is None:
                await emb.aclose()
            if reranker is None and rr is not None:
                await rr.aclose()
            if rewriter is None and rw is not None:
                await rw.aclose()
            await db.dispose()
            metrics.untrack_pool("app", settings.db_pool_size)
            metrics.IN_FLIGHT_LIMIT.dec(admission.limit)
            metrics.process_exited()
            tracing.flush()

    app = FastAPI(
        title="memvault",
        version=__version__,
        summary="Long-term memory for AI agents: store what they learn, recall it by meaning, words and time.",
        contact={"name": "Security contact (docs/security.md)", "email": settings.security_contact},
        lifespan=lifespan,
    )
    problems.install(app)
    openapi.install(app)
    idempotency.install(app)
    app.add_middleware(DoorMiddleware)
    app.add_middleware(
        BodyLimitMiddleware, max_bytes=settings.max_body_bytes, import_max_bytes=settings.max_import_bytes
    )
    app.add_middleware(BodyTimeoutMiddleware, timeout_s=settings.body_read_timeout_s, min_rate=settings.body_min_rate)
    # Inside the request id: a refusal carries an id and is logged like any answer.
    app.state.admission = admission = Admission(settings.max_in_flight)
    app.add_middleware(AdmissionMiddleware, admission=admission)
    app.add_middleware(RateLimitHeadersMiddleware)
    app.add_middleware(TracingMiddleware)  # passes straight through unless tracing is configured
    app.add_middleware(RequestIdMiddleware)
    for router in (
        status_router,
        namespaces_router,
        memories_router,
        keys_router,
        events_router,
        entities_router,
        graph_router,
        traces_router,
        facts_router,
        contradictions_router,
        forget_router,
        portability_router,
        audit_router,
        jobs_router,
        maintenance_router,
        users_router,
        members_router,
        usage_router,
        webhooks_router,
        oauth_router,
        metrics_router,
        web_router,
        dashboard_router,
    ):
        app.include_router(router)

    # Remote MCP: the same facade, reached by tools instead of routes. Built before the lifespan
    # runs (routes are fixed at construction); the tools find the facade on app.state per call.
    runtime = Runtime(api=lambda: app.state.api)
    mcp_servers = {profile: build_server(runtime, profile) for profile in mcp_http.PROFILES}
    endpoint = mcp_http.mount(mcp_servers, settings)
    for path in mcp_http.PATHS:
        app.router.routes.append(Route(path, endpoint=endpoint, methods=["GET", "POST", "DELETE"]))
    return app
