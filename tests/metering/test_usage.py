"""Usage metering: every door call counted per tenant, door, namespace, key and operation, exact
under concurrent clients and across a restart, and each tenant sees only its own."""

from __future__ import annotations

import asyncio
import csv
import io
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
from prometheus_client import REGISTRY

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.plans.limits import PlanLimits
from memvault.principal import Principal
from memvault_sdk import AsyncMemVault
from tests.conftest import Tenant, make_tenant, running
from tests.mcp.conftest import mcp_session
from tests.servers import served

UNITS = ("requests", "memories_written", "searches", "events_ingested", "tokens_embedded", "bytes_stored")


async def totals(
    api: NamespaceAPI, tenant_id: uuid.UUID, group_by: str | None = None
) -> dict[str | None, dict[str, int]]:
    """What the table holds for a tenant today and yesterday, per group (None: all)."""
    end = datetime.now(UTC) + timedelta(hours=1)
    series = await api.account_usage(
        Principal.system(tenant_id), start=end - timedelta(days=2), end=end, granularity="day", group_by=group_by
    )
    out: dict[str | None, dict[str, int]] = {}
    for point in series.points:
        held = out.setdefault(point.group, dict.fromkeys(UNITS, 0))
        for u in UNITS:
            held[u] += getattr(point, u)
    return out


async def test_totals_are_exact_under_eight_concurrent_clients_over_rest_and_the_sdk(
    app: Any, api: NamespaceAPI
) -> None:
    t = await make_tenant(api, "meter")
    rounds = 5
    contents = [f"Client {c} remembers fact number {i} about the garden." for c in range(8) for i in range(rounds)]

    async with served(app) as base:

        async def rest_client(c: int) -> None:
            async with httpx.AsyncClient(base_url=base, headers=t.headers, timeout=60) as http:
                for i in range(rounds):
                    r = await http.post(
                        f"/v1/namespaces/{t.namespace}/memories",
                        json={"content": f"Client {c} remembers fact number {i} about the garden."},
                    )
                    assert r.status_code == 201, r.text
                    r = await http.post(f"/v1/namespaces/{t.namespace}/search", json={"query": "garden"})
                    assert r.status_code == 200, r.text

        async def sdk_client(c: int) -> None:
            async with AsyncMemVault(api_key=t.key, base_url=base, namespace=t.namespace) as mv:
                for i in range(rounds):
                    await mv.memories.create(f"Client {c} remembers fact number {i} about the garden.")
                    await mv.search("garden")

        await asyncio.gather(*(rest_client(c) for c in range(4)), *(sdk_client(c) for c in range(4, 8)))
    await api._usage.flush()

    by_door = await totals(api, t.id, "door")
    assert set(by_door) == {"rest", "sdk"}
    for door in ("rest", "sdk"):
        assert by_door[door]["requests"] == 4 * rounds * 2
        assert by_door[door]["searches"] == 4 * rounds
        assert by_door[door]["memories_written"] == 4 * rounds
    assert sum(d["bytes_stored"] for d in by_door.values()) == sum(len(c.encode()) for c in contents)
    # Every stored memory was embedded: at least its words, at most its characters plus markers.
    tokens = sum(d["tokens_embedded"] for d in by_door.values())
    assert sum(len(c.split()) for c in contents) <= tokens <= sum(len(c) + 2 for c in contents)

    by_ns = await totals(api, t.id, "namespace")
    assert set(by_ns) == {t.namespace}
    by_key = await totals(api, t.id, "key")
    assert len(by_key) == 1  # the tenant's one admin key
    by_op = await totals(api, t.id, "operation")
    assert by_op["store"]["requests"] + by_op.get("store_many", {"requests": 0})["requests"] == 8 * rounds
    assert by_op["search"]["searches"] == 8 * rounds


async def test_a_restart_keeps_every_count_and_a_stopped_process_keeps_what_it_flushed(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, api: NamespaceAPI
) -> None:
    t = await make_tenant(api, "meter")

    async def store(application: Any, n: int) -> None:
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test", headers=t.headers) as http:
            for i in range(n):
                r = await http.post(f"/v1/namespaces/{t.namespace}/memories", json={"content": f"Restart note {i}."})
                assert r.status_code == 201, r.text

    # A process that stops cleanly writes what it counted on the way out (aclose).
    first = create_app(settings, urls=pg_urls, embedder=embedder)
    async with running(first):
        await store(first, 6)
    assert (await totals(api, t.id))[None]["requests"] == 6

    # A process that stops without writing (killed) keeps what its writer flushed before.
    second = create_app(settings, urls=pg_urls, embedder=embedder)
    async with running(second):
        meter = second.state.api._usage
        await store(second, 4)
        for _ in range(100):  # the writer's own tick, every WRITE_INTERVAL_S
            if meter.pending == 0:
                break
            await asyncio.sleep(0.1)
        assert meter.pending == 0
        await store(second, 3)
        meter._pending.clear()  # what a kill loses: the counts of the last interval, no more
    after = (await totals(api, t.id))[None]
    assert after["requests"] == 10
    assert after["memories_written"] == 10

    # Counted from where the first two left off, by a third process.
    third = create_app(settings, urls=pg_urls, embedder=embedder)
    async with running(third):
        await store(third, 2)
    assert (await totals(api, t.id))[None]["requests"] == 12


async def test_mcp_calls_count_on_the_mcp_door_and_memory_account_shows_the_plan(app: Any, api: NamespaceAPI) -> None:
    t = await make_tenant(api, "meter")
    async with served(app) as base, mcp_session(base, t.key) as session:
        stored = await session.call_tool("memory_store", {"content": "The user's cat is called Miso."})
        assert not stored.is_error, stored
        found = await session.call_tool("memory_search", {"query": "cat"})
        assert not found.is_error, found
        account = await session.call_tool("memory_account", {})
        assert not account.is_error, account
    await api._usage.flush()
    by_door = await totals(api, t.id, "door")
    assert by_door["mcp"]["requests"] == 3
    assert by_door["mcp"]["searches"] == 1
    assert by_door["mcp"]["memories_written"] == 1
    assert "rest" not in by_door
    data = account.structured_content or {}
    assert data["plan"]["name"] == "unlimited"
    assert {q["quota"] for q in data["quotas"]} >= {"memories", "events_per_month", "embedded_tokens_per_month"}


async def test_usage_series_by_hour_as_json_and_csv(
    client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    for i in range(3):
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories", headers=tenant_a.headers, json={"content": f"Note {i}."}
        )
        assert r.status_code == 201
    await api._usage.flush()
    now = datetime.now(UTC)
    params = {
        "from": (now - timedelta(hours=2)).isoformat(),
        "to": (now + timedelta(hours=1)).isoformat(),
        "granularity": "hour",
        "group_by": "operation",
    }
    r = await client.get("/v1/account/usage", headers=tenant_a.headers, params=params)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["granularity"] == "hour" and body["group_by"] == "operation"
    stores = [p for p in body["points"] if p["group"] == "store"]
    assert sum(p["memories_written"] for p in stores) == 3

    r = await client.get("/v1/account/usage", headers={**tenant_a.headers, "Accept": "text/csv"}, params=params)
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/csv")
    rows = list(csv.DictReader(io.StringIO(r.text)))
    assert list(rows[0]) == ["period", "operation", *UNITS]
    assert sum(int(row["memories_written"]) for row in rows if row["operation"] == "store") == 3


async def test_bad_usage_parameters_are_problems_not_errors(client: httpx.AsyncClient, tenant_a: Tenant) -> None:
    now = datetime.now(UTC)
    bad = [
        {"granularity": "week"},
        {"group_by": "tenant"},
        {"from": "yesterday"},
        {"from": now.isoformat(), "to": (now - timedelta(hours=3)).isoformat()},
        {"from": (now - timedelta(days=40)).isoformat(), "granularity": "hour"},
        {"from": "2026-12-01T00:00:00"},  # no time zone
    ]
    for params in bad:
        r = await client.get("/v1/account/usage", headers=tenant_a.headers, params=params)
        assert r.status_code == 422, (params, r.text)
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.json()["code"] == "validation_error"


async def test_a_tenant_never_sees_another_tenants_usage(
    client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    r = await client.post(
        f"/v1/namespaces/{tenant_b.namespace}/memories", headers=tenant_b.headers, json={"content": "B's secret plan."}
    )
    assert r.status_code == 201
    await api._usage.flush()
    for group_by in ("door", "namespace", "key", "operation"):
        r = await client.get("/v1/account/usage", headers=tenant_a.headers, params={"group_by": group_by})
        assert r.status_code == 200
        # A has only read its usage (those reads are counted, and the meter's own flush may have
        # written them by now): B's write, its bytes and its embedded tokens never show.
        points = r.json()["points"]
        assert all(p["memories_written"] == p["bytes_stored"] == p["tokens_embedded"] == 0 for p in points), points
        await api._usage.flush()
    r = await client.get("/v1/account", headers=tenant_a.headers)
    assert r.status_code == 200
    quotas = {q["quota"]: q for q in r.json()["quotas"]}
    assert quotas["memories"]["used"] == 0
    # B's own view has its write.
    r = await client.get("/v1/account/usage", headers=tenant_b.headers, params={"group_by": "namespace"})
    written = {p["group"]: p["memories_written"] for p in r.json()["points"] if p["memories_written"]}
    assert written == {tenant_b.namespace: 1}


async def test_the_sdk_shows_the_same_account_and_usage(app: Any, api: NamespaceAPI) -> None:
    t = await make_tenant(api, "meter")
    await api.save_plan("meter-test", PlanLimits(memories=1000), "for the metrics label")
    await api.set_tenant_plan(t.id, "meter-test")
    labels = {"plan": "meter-test", "door": "sdk", "unit": "memories_written"}
    before = REGISTRY.get_sample_value("memvault_usage_total", labels) or 0.0
    async with served(app) as base, AsyncMemVault(api_key=t.key, base_url=base, namespace=t.namespace) as mv:
        await mv.memories.create("The SDK wrote this.")
        # Prometheus counts by plan, never by tenant.
        assert REGISTRY.get_sample_value("memvault_usage_total", labels) == before + 1
        await api._usage.flush()
        series = await mv.account.usage(granularity="hour", group_by="door")
        assert [(p.group, p.requests, p.memories_written) for p in series.points] == [("sdk", 1, 1)]
        account = await mv.account.get()
        assert account.plan.name == "meter-test"
        quotas = {q.quota: q for q in account.quotas}
        assert quotas["memories"].used == 1 and quotas["memories"].limit == 1000
        assert quotas["embedded_tokens_per_month"].used > 0
        assert quotas["embedded_tokens_per_month"].resets_at is not None
        assert (await mv.account()).tenant_id == str(t.id)  # the older spelling still works


async def test_a_namespace_limited_key_sees_only_its_namespaces_use(
    client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    r = await client.post("/v1/namespaces", headers=tenant_a.headers, json={"name": "private"})
    assert r.status_code == 201, r.text
    for ns in (tenant_a.namespace, "private"):
        r = await client.post(f"/v1/namespaces/{ns}/memories", headers=tenant_a.headers, json={"content": f"In {ns}."})
        assert r.status_code == 201
    r = await client.post(
        "/v1/keys", headers=tenant_a.headers, json={"name": "limited", "scopes": ["read"], "namespaces": ["private"]}
    )
    limited = {"Authorization": f"Bearer {r.json()['key']}"}
    await api._usage.flush()
    r = await client.get("/v1/account/usage", headers=limited, params={"group_by": "namespace"})
    assert r.status_code == 200
    assert {p["group"] for p in r.json()["points"]} == {"private"}
    r = await client.get("/v1/account/usage", headers=tenant_a.headers, params={"group_by": "namespace"})
    assert {p["group"] for p in r.json()["points"]} >= {tenant_a.namespace, "private"}
