"""The server's Prometheus metrics, one set per process, summed over processes at scrape time.

`memvault serve --workers N` runs N processes; prometheus_client's multiprocess mode (the
directory in PROMETHEUS_MULTIPROC_DIR, which serving.py sets before any worker imports this
module) lets each write its samples to files that the scraped process reads together. Without
it (one process, the tests) the default registry serves.

Labels are bounded by construction: route templates (never raw paths), the door, the status code,
job kinds, limit names, plan names (a short list the operator keeps) and stage names; never a
tenant, key or namespace."""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Coroutine, Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any, ParamSpec, TypeVar
from wsgiref.simple_server import WSGIServer

from prometheus_client import (
    CONTENT_TYPE_LATEST,
    CollectorRegistry,
    Counter,
    Gauge,
    Histogram,
    generate_latest,
    multiprocess,
    start_http_server,
)
from prometheus_client.core import GaugeMetricFamily, Metric
from prometheus_client.registry import REGISTRY, Collector

from memvault.observability import tracing
from memvault.observability.samples import running, writer_pid

P = ParamSpec("P")
R = TypeVar("R")

# Requests are mostly tens of milliseconds; the tail that matters runs to seconds.
LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.075, 0.1, 0.15, 0.25, 0.5, 0.75, 1.0, 2.5, 5.0, 10.0)
STAGE_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5)
JOB_BUCKETS = (0.05, 0.1, 0.5, 1.0, 5.0, 15.0, 60.0, 300.0, 1800.0)
# A free pooled connection comes at once, bar the pre-ping's round trip; the pool's
# checkout timeout (30 s) bounds the tail.
POOL_WAIT_BUCKETS = (0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)
BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512)
# The route label of a request no route matched (a 404): one value, whatever the path was.
UNMATCHED = "<unmatched>"
# Search timings the metrics record (api.py's SearchMetrics.timings_ms); other keys are ignored,
# so a new stage there cannot grow the label set unnoticed.
SEARCH_STAGES = ("embed", "sql", "rerank", "rewrite", "neighbours", "total")

REQUESTS = Counter("memvault_http_requests_total", "HTTP requests answered.", ["door", "method", "route", "status"])
REQUEST_SECONDS = Histogram(
    "memvault_http_request_duration_seconds",
    "Time from a request's arrival to the end of its answer.",
    ["door", "method", "route"],
    buckets=LATENCY_BUCKETS,
)
IN_FLIGHT = Gauge(
    "memvault_http_requests_in_flight", "Requests admitted and not yet answered.", multiprocess_mode="livesum"
)
IN_FLIGHT_LIMIT = Gauge(
    "memvault_http_requests_in_flight_limit",
    "Requests each process admits at once (MEMVAULT_MAX_IN_FLIGHT), summed over live processes.",
    multiprocess_mode="livesum",
)
OVERLOADED = Counter("memvault_overload_refusals_total", "Requests refused at once with 503 overloaded.", ["door"])
for _door in ("rest", "mcp"):  # present at 0 from the start, so a rate() over them is defined
    OVERLOADED.labels(_door)
SEARCH_STAGE_SECONDS = Histogram(
    "memvault_search_stage_seconds",
    "Time of each search stage (as in a search's metrics).",
    ["stage"],
    buckets=STAGE_BUCKETS,
)
SEARCH_FAILURES = Counter(
    "memvault_search_backend_failures_total", "Search stages that failed and fell back.", ["failure"]
)
EMBED_SECONDS = Histogram(
    "memvault_embedding_duration_seconds",
    "Time of one call to the embedding model.",
    ["provider"],
    buckets=STAGE_BUCKETS,
)
EMBED_BATCH = Histogram(
    "memvault_embedding_batch_size", "Texts per call to the embedding model.", ["provider"], buckets=BATCH_BUCKETS
)
POOL_IN_USE = Gauge(
    "memvault_db_pool_connections_in_use",
    "Database connections checked out of the pools.",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_SIZE = Gauge(
    "memvault_db_pool_size",
    "Connections each pool keeps (before overflow), summed over live processes.",
    ["pool"],
    multiprocess_mode="livesum",
)
POOL_WAIT_SECONDS = Histogram(
    "memvault_db_pool_wait_seconds",
    "Time a transaction waited to check a connection out of the pool (its pre-ping included).",
    ["pool"],
    buckets=POOL_WAIT_BUCKETS,
)
JOB_SECONDS = Histogram(
    "memvault_job_duration_seconds",
    "Time of one job attempt, by kind and how it ended.",
    ["kind", "status"],
    buckets=JOB_BUCKETS,
)
JOB_FAILURES = Counter(
    "memvault_job_failures_total", "Job attempts that failed (retried or for good), by kind.", ["kind"]
)
RATE_LIMITED = Counter("memvault_rate_limit_refusals_total", "Requests refused with 429, by limit.", ["limit"])
# Metered use (metering/meter.py) and quota refusals, by plan: never by tenant, key or namespace.
USAGE = Counter("memvault_usage_total", "Units of use metered, by plan, door and unit.", ["plan", "door", "unit"])
QUOTA_REFUSALS = Counter(
    "memvault_quota_refusals_total", "Requests refused with quota_exceeded, by plan and quota.", ["plan", "quota"]
)
USAGE_UNITS = ("requests", "memories_written", "searches", "events_ingested", "tokens_embedded", "bytes_stored")


def observe_request(door: str, method: str, route: str, status: int, seconds: float) -> None:
    REQUESTS.labels(door, method, route, str(status)).inc()
    REQUEST_SECONDS.labels(door, method, route).observe(seconds)


def observe_usage(plan: str, door: str, units: Sequence[int]) -> None:
    """One operation's metered units (in the order of USAGE_UNITS)."""
    for unit, n in zip(USAGE_UNITS, units, strict=True):
        if n:
            USAGE.labels(plan, door, unit).inc(n)


def observe_quota_refusal(plan: str, quota: str) -> None:
    QUOTA_REFUSALS.labels(plan, quota).inc()


def observe_search(timings_ms: Mapping[str, float], failures: Iterable[str]) -> None:
    """One search's own metrics (the ``metrics`` of its response), as histograms."""
    for stage in SEARCH_STAGES:
        if stage in timings_ms:
            SEARCH_STAGE_SECONDS.labels(stage).observe(timings_ms[stage] / 1000)
    for failure in failures:
        SEARCH_FAILURES.labels(failure if failure in _KNOWN_FAILURES else "other").inc()
    tracing.search_span(timings_ms, list(failures))


_KNOWN_FAILURES = frozenset({"embedding", "embedding_model_mismatch", "lexical", "dense", "graph", "rerank", "rewrite"})


def observe_job(kind: str, status: str, started: float) -> None:
    JOB_SECONDS.labels(kind, status).observe(time.perf_counter() - started)
    if status in ("failed", "queued"):  # `queued` after a run: it failed and waits for its retry
        JOB_FAILURES.labels(kind).inc()


def observed_embedding(
    provider: str,
) -> Callable[[Callable[P, Coroutine[Any, Any, R]]], Callable[P, Coroutine[Any, Any, R]]]:
    """For an embedder's ``embed(self, texts, ...)``: its batch size and time."""

    def wrap(fn: Callable[P, Coroutine[Any, Any, R]]) -> Callable[P, Coroutine[Any, Any, R]]:
        @functools.wraps(fn)
        async def embed(*args: P.args, **kwargs: P.kwargs) -> R:
            texts: Sequence[str] = args[1]  # type: ignore[assignment]
            started = time.perf_counter()
            out = await fn(*args, **kwargs)
            if texts:
                EMBED_SECONDS.labels(provider).observe(time.perf_counter() - started)
                EMBED_BATCH.labels(provider).observe(len(texts))
            return out

        return embed

    return wrap


def track_pool(engine: Any, name: str, size: int) -> None:
    """Count ``engine``'s checked-out connections (SQLAlchemy pool events)."""
    from sqlalchemy import event

    pool = engine.sync_engine.pool
    POOL_SIZE.labels(name).inc(size)
    in_use = POOL_IN_USE.labels(name)

    @event.listens_for(pool, "checkout")
    def _checkout(dbapi_conn: Any, record: Any, proxy: Any) -> None:
        in_use.inc()

    @event.listens_for(pool, "checkin")
    def _checkin(dbapi_conn: Any, record: Any) -> None:
        in_use.dec()


def observe_pool_wait(name: str, seconds: float) -> None:
    POOL_WAIT_SECONDS.labels(name).observe(seconds)


def untrack_pool(name: str, size: int) -> None:
    POOL_SIZE.labels(name).dec(size)


class _Scraped(Collector):
    """Values read when scraped rather than counted: the jobs waiting in the queue."""

    def __init__(self, queue_depth: Callable[[], Mapping[str, int]]) -> None:
        self._queue_depth = queue_depth

    def collect(self) -> Iterable[Metric]:
        family = GaugeMetricFamily("memvault_jobs_queued", "Jobs waiting to run, by kind.", labels=["kind"])
        for kind, n in sorted(self._queue_depth().items()):
            family.add_metric([kind], n)
        yield family


def multiprocess_dir() -> str | None:
    return os.environ.get("PROMETHEUS_MULTIPROC_DIR") or None


def _forget_dead(folder: str) -> None:
    """Drop the live gauges (in flight, their limit, pools in use) of processes gone without
    `process_exited`: a worker killed, or crashed, and restarted by uvicorn under a new pid would
    otherwise be summed in for good, its requests in flight and its admission limit with them."""
    for samples in Path(folder).glob("gauge_live*_*.db"):
        pid = writer_pid(samples)
        if pid is not None and not running(pid):
            multiprocess.mark_process_dead(pid, folder)


def render(queue_depth: Mapping[str, int]) -> tuple[bytes, str]:
    """The scrape: every process's samples (multiprocess mode) or this one's, plus scraped values."""
    if folder := multiprocess_dir():
        _forget_dead(folder)
        registry = CollectorRegistry()
        multiprocess.MultiProcessCollector(registry)
    else:
        registry = REGISTRY
    scraped = CollectorRegistry()
    scraped.register(_Scraped(lambda: queue_depth))
    return generate_latest(registry) + generate_latest(scraped), CONTENT_TYPE_LATEST


def serve_own(port: int, host: str = "127.0.0.1") -> WSGIServer:
    """Serve this process's own samples over HTTP on a thread of their own: `memvault worker
    --metrics-port`, for a worker no server on its host can sum in (see ``multiprocess_dir``).
    The default registry reads this process's values in multiprocess mode too, so a worker that
    also writes to a shared folder is not counted twice by its own port."""
    server, _thread = start_http_server(port, addr=host, registry=REGISTRY)
    return server


def process_exited() -> None:
    """A worker's last act: its live gauges (in flight, pool in use) stop counting."""
    if multiprocess_dir():
        multiprocess.mark_process_dead(os.getpid())
