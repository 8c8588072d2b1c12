"""OpenTelemetry, when configured: a server span per request that continues the caller's trace,
named by route template, and a search span beneath it with the stage timings."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import httpx
import pytest
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from memvault.observability import tracing
from tests.conftest import Tenant


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    exporter = InMemorySpanExporter()
    tracing.configure(exporter)
    yield exporter
    tracing.flush()
    tracing._tracer = None  # off again for the other tests


class TestTracing:
    async def test_a_search_is_a_child_of_its_request_span_in_the_callers_trace(
        self, client: httpx.AsyncClient, tenant_a: Tenant, spans: InMemorySpanExporter
    ) -> None:
        trace_id = uuid.uuid4().hex
        parent = f"00-{trace_id}-{'1' * 16}-01"
        resp = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search",
            json={"query": f"window seat {uuid.uuid4().hex}"},
            headers={**tenant_a.headers, "traceparent": parent},
        )
        assert resp.status_code == 200
        tracing.flush()

        finished = spans.get_finished_spans()
        [request] = [s for s in finished if s.name == "POST /v1/namespaces/{ns}/search"]
        [search] = [s for s in finished if s.name == "memvault.search"]
        assert request.context is not None and format(request.context.trace_id, "032x") == trace_id
        attrs, stages = request.attributes or {}, search.attributes or {}
        assert attrs["http.response.status_code"] == 200
        assert attrs["memvault.request_id"] == resp.headers["x-request-id"]
        assert search.parent is not None and search.parent.span_id == request.context.span_id
        for stage in ("embed", "sql", "total"):
            ms = stages[f"memvault.search.{stage}_ms"]
            assert isinstance(ms, float) and ms >= 0
        times = (request.start_time, search.start_time, search.end_time, request.end_time)
        assert None not in times and sorted(times) == list(times)  # type: ignore[type-var]
