"""Optional OpenTelemetry traces: with OTEL_EXPORTER_OTLP_ENDPOINT (or ..._TRACES_ENDPOINT) set,
each request is a server span (continuing the caller's trace from a `traceparent` header) and a
search a child span carrying its stage timings. Off, nothing of OpenTelemetry is imported.

The stages are attributes of the search span rather than spans of their own: they overlap (the
query is embedded while the first SQL round trip runs) and the search measures their durations,
not their start times, so separate spans would have to invent a timeline."""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

_tracer: Any = None
_provider: Any = None


def enabled_by_env() -> bool:
    return bool(os.environ.get("OTEL_EXPORTER_OTLP_ENDPOINT") or os.environ.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT"))


def configure(exporter: Any = None) -> None:
    """Export this process's spans in batches: to ``exporter``, else over OTLP/HTTP to the endpoint
    the standard OTEL_* variables name (service name: OTEL_SERVICE_NAME, default memvault)."""
    global _tracer, _provider
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import BatchSpanProcessor

    if exporter is None:
        from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter

        exporter = OTLPSpanExporter()
    provider = TracerProvider(
        resource=Resource.create({"service.name": os.environ.get("OTEL_SERVICE_NAME", "memvault")})
    )
    provider.add_span_processor(BatchSpanProcessor(exporter))
    _tracer, _provider = provider.get_tracer("memvault"), provider


def flush() -> None:
    """Send the spans still buffered: a worker stopped by SIGTERM exits without atexit hooks."""
    if _tracer is not None:
        _provider.force_flush()


def active() -> bool:
    return _tracer is not None


class TracingMiddleware:
    """A server span per HTTP request, named by method and route template once routing is done."""

    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        tracer = _tracer
        if tracer is None or scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        from opentelemetry import propagate
        from opentelemetry.trace import SpanKind, Status, StatusCode

        from memvault.observability.access import door, route_of

        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        status = 500

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
            await send(message)

        with tracer.start_as_current_span(
            f"{scope['method']} {scope['path']}", context=propagate.extract(carrier), kind=SpanKind.SERVER
        ) as span:
            try:
                await self.app(scope, receive, send_status)
            finally:
                route = route_of(scope)
                span.update_name(f"{scope['method']} {route}")
                span.set_attributes(
                    {
                        "http.request.method": scope["method"],
                        "http.route": route,
                        "http.response.status_code": status,
                        "memvault.door": door(scope["path"]),
                        "memvault.request_id": (scope.get("state") or {}).get("request_id", ""),
                    }
                )
                if status >= 500:
                    span.set_status(Status(StatusCode.ERROR))


def search_span(timings_ms: Mapping[str, float], failures: list[str]) -> None:
    """Record a search that just ended as a child of the current (request) span."""
    tracer = _tracer
    if tracer is None:
        return
    end = time.time_ns()
    start = end - int(timings_ms.get("total", 0.0) * 1_000_000)
    span = tracer.start_span("memvault.search", start_time=start)
    span.set_attributes({f"memvault.search.{k}_ms": float(v) for k, v in timings_ms.items()})
    if failures:
        span.set_attribute("memvault.search.backend_failures", list(failures))
    span.end(end_time=end)
