"""The outbox: every change that causes an event queues one delivery per subscribed endpoint, in
the change's own transaction (a rollback leaves none), never for another tenant, another
namespace or an event type the endpoint did not ask for."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

import httpx
import psycopg

from memvault.api import NamespaceAPI
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.webhooks.conftest import deliveries, subscribe

MIMI = "The user's cat is called Miso"


async def store(client: httpx.AsyncClient, tenant: Tenant, ns: str | None = None, **body: Any) -> dict[str, Any]:
    r = await client.post(
        f"/v1/namespaces/{ns or tenant.namespace}/memories", json={"content": MIMI, **body}, headers=tenant.headers
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def namespace(client: httpx.AsyncClient, tenant: Tenant) -> str:
    name = f"other-{uuid.uuid4().hex[:8]}"
    r = await client.post("/v1/namespaces", json={"name": name}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return name


class TestMemoryEvents:
    async def test_a_store_queues_one_delivery_per_matching_endpoint(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        every = await subscribe(client, tenant_a)
        here = await subscribe(
            client, tenant_a, namespaces=[tenant_a.namespace], events=["memory.created", "job.failed"]
        )
        await subscribe(client, tenant_a, events=["memory.deleted"])  # another type
        await subscribe(client, tenant_a, namespaces=[await namespace(client, tenant_a)])  # another namespace
        off = await subscribe(client, tenant_a)
        await client.patch(f"/v1/webhooks/{off['id']}", json={"enabled": False}, headers=tenant_a.headers)

        m = await store(client, tenant_a)

        rows = await deliveries(owner, tenant_a.id)
        assert sorted(str(d["endpoint_id"]) for d in rows) == sorted([every["id"], here["id"]])
        assert len({d["message_id"] for d in rows}) == 1 and rows[0]["message_id"].startswith("msg_")
        for d in rows:
            assert (d["status"], d["attempts"], d["event_type"], d["namespace"]) == (
                "pending",
                0,
                "memory.created",
                tenant_a.namespace,
            )
            assert set(d["payload"]) == {"type", "timestamp", "data"} and d["payload"]["type"] == "memory.created"
            assert datetime.fromisoformat(d["payload"]["timestamp"]).utcoffset() is not None
            # The memory as REST returned it.
            assert d["payload"]["data"] == m

    async def test_a_batch_queues_one_event_per_memory(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a)
        body = {"memories": [{"content": f"The user likes colour {c}"} for c in ("red", "green", "blue")]}
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories/batch", json=body, headers=tenant_a.headers
        )
        assert r.status_code == 201, r.text
        rows = await deliveries(owner, tenant_a.id)
        assert sorted(d["payload"]["data"]["id"] for d in rows) == sorted(m["id"] for m in r.json()["memories"])
        assert len({d["message_id"] for d in rows}) == 3

    async def test_a_failed_write_queues_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a)
        # Refused by the secrets guard before anything is written.
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories",
            json={"content": "my key is AKIAIOSFODNN7EXAMPLE"},
            headers=tenant_a.headers,
        )
        assert r.status_code == 422, r.text
        # Refused inside the write's transaction, after the memories and their events were queued.
        body = {"memories": [{"content": "The user likes tea"}, {"content": MIMI, "entity_ids": [str(uuid.uuid4())]}]}
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories/batch", json=body, headers=tenant_a.headers
        )
        assert r.status_code == 404, r.text
        assert (await client.get(f"/v1/namespaces/{tenant_a.namespace}/memories", headers=tenant_a.headers)).json()[
            "data"
        ] == []
        assert await deliveries(owner, tenant_a.id) == []

    async def test_another_tenants_endpoint_never_gets_them(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        theirs = await subscribe(
            client, tenant_b, events=["memory.created", "memory.updated", "memory.deleted", "forget.completed"]
        )
        m = await store(client, tenant_a)
        await client.patch(
            f"/v1/namespaces/{tenant_a.namespace}/memories/{m['id']}",
            json={"importance": 0.9},
            headers=tenant_a.headers,
        )
        await client.delete(f"/v1/namespaces/{tenant_a.namespace}/memories/{m['id']}", headers=tenant_a.headers)
        await client.post(f"/v1/namespaces/{tenant_a.namespace}/forget", json={"all": True}, headers=tenant_a.headers)
        assert await deliveries(owner, tenant_b.id) == [] and await deliveries(owner, tenant_a.id) == []
        cur = await owner.execute(
            "SELECT count(*) AS n FROM webhook_deliveries WHERE endpoint_id = %s", (uuid.UUID(theirs["id"]),)
        )
        assert (await cur.fetchone())["n"] == 0

    async def test_update_archive_supersede_delete(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        types = ["memory.updated", "memory.superseded", "memory.archived", "memory.deleted"]
        await subscribe(client, tenant_a, events=types)
        ns = tenant_a.namespace
        first = await store(client, tenant_a, key="cat-name")
        r = await client.patch(
            f"/v1/namespaces/{ns}/memories/{first['id']}", json={"importance": 0.9}, headers=tenant_a.headers
        )
        updated = r.json()
        second = await store(client, tenant_a, key="cat-name", content="The user's cat is called Tofu")
        r = await client.post(f"/v1/namespaces/{ns}/memories/{second['id']}/archive", headers=tenant_a.headers)
        archived = r.json()
        r = await client.delete(f"/v1/namespaces/{ns}/memories/{second['id']}", headers=tenant_a.headers)
        assert r.status_code == 204, r.text

        rows = await deliveries(owner, tenant_a.id)
        assert [d["event_type"] for d in rows] == types
        assert rows[0]["payload"]["data"] == updated and updated["importance"] == 0.9
        superseded = rows[1]["payload"]["data"]
        assert superseded["id"] == first["id"] and superseded["superseded_by"] == second["id"]
        assert rows[2]["payload"]["data"] == archived and archived["state"] == "archived"
        # Deleted: the id and namespace only, never the content.
        assert rows[3]["payload"]["data"] == {"id": second["id"], "namespace": ns}
        assert "Tofu" not in str(rows[3]["payload"])

    async def test_tenant_wide_events_skip_namespace_limited_endpoints(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        every = await subscribe(client, tenant_a)
        await subscribe(client, tenant_a, namespaces=[tenant_a.namespace])
        await store(client, tenant_a, scope="tenant")
        rows = await deliveries(owner, tenant_a.id)
        assert [str(d["endpoint_id"]) for d in rows] == [every["id"]] and rows[0]["namespace"] is None


class TestForget:
    async def test_counts_only(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a, events=["forget.completed"])
        await store(client, tenant_a, scope="user", user_id="ana-42")
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/forget",
            json={"user_id": "ana-42", "hard": True},
            headers=tenant_a.headers,
        )
        assert r.status_code == 200, r.text
        (d,) = await deliveries(owner, tenant_a.id)
        assert d["payload"]["data"] == {"namespace": tenant_a.namespace, **r.json()} and r.json()["memories"] == 1
        assert "ana-42" not in str(d["payload"]) and "Miso" not in str(d["payload"])


class TestJobEvents:
    async def test_extraction_success_and_the_memories_it_made(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a, events=["events.extracted", "job.succeeded", "job.failed", "memory.created"])
        body = {
            "session_id": "s1",
            "user_id": "u1",
            "messages": [{"role": "user", "content": "I prefer window seats on long flights."}],
        }
        r = await client.post(f"/v1/namespaces/{tenant_a.namespace}/events", json=body, headers=tenant_a.headers)
        assert r.status_code == 202, r.text
        job_id = uuid.UUID(r.json()["job_id"])
        outcome = await api.run_job(Principal.system(tenant_a.id, subject=f"job:{job_id}"), job_id)
        assert outcome.status == "succeeded", outcome

        rows = await deliveries(owner, tenant_a.id)
        # The job's two events share its finishing transaction's now(): no order between them.
        by_type = {d["event_type"]: d["payload"]["data"] for d in rows}
        assert sorted(by_type) == ["events.extracted", "job.succeeded", "memory.created"] and len(rows) == 3
        made = by_type["memory.created"]
        job = (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()
        assert by_type["job.succeeded"] == job and job["status"] == "succeeded"
        extracted = by_type["events.extracted"]
        assert extracted == {
            "job_id": str(job_id),
            "namespace": tenant_a.namespace,
            "event_ids": r.json()["event_ids"],
            "memory_ids": [made["id"]],
        }
        # Run again: skipped, nothing more queued.
        await api.run_job(Principal.system(tenant_a.id, subject=f"job:{job_id}"), job_id)
        assert len(await deliveries(owner, tenant_a.id)) == 3

    async def test_a_job_that_fails_for_good(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a, events=["job.failed", "job.succeeded"])
        body = {"session_id": "s1", "messages": [{"role": "user", "content": "I prefer tea."}]}
        r = await client.post(f"/v1/namespaces/{tenant_a.namespace}/events", json=body, headers=tenant_a.headers)
        job_id = uuid.UUID(r.json()["job_id"])
        # A payload no handler can read: refused for good, not retried.
        await owner.execute(
            'UPDATE jobs SET payload = \'{"namespace": "default", "event_ids": ["x"]}\' WHERE id = %s', (job_id,)
        )
        outcome = await api.run_job(Principal.system(tenant_a.id, subject="job"), job_id)
        assert outcome.status == "failed", outcome
        (d,) = await deliveries(owner, tenant_a.id)
        assert d["event_type"] == "job.failed" and d["payload"]["data"]["error"].startswith("validation_error")
        assert d["payload"]["data"]["id"] == str(job_id)


class TestQuotaWarning:
    async def test_crossing_80_and_100_percent_of_the_memories_cap(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"memories": 5})
        every = await subscribe(client, tenant_a, events=["quota.warning"])
        # Namespace-limited: shown nothing tenant-wide, the quota included.
        await subscribe(client, tenant_a, events=["quota.warning"], namespaces=[tenant_a.namespace])
        for i in range(5):
            await store(client, tenant_a, content=f"The user owns plant number {i}")
        rows = await deliveries(owner, tenant_a.id)
        assert [str(d["endpoint_id"]) for d in rows] == [every["id"]] * 2
        assert [d["payload"]["data"] for d in rows] == [
            {"quota": "memories", "limit": 5, "used": 4, "threshold_percent": 80},
            {"quota": "memories", "limit": 5, "used": 5, "threshold_percent": 100},
        ]
        assert all(d["namespace"] is None for d in rows)

    async def test_every_stored_cap_warns_once_when_crossed(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        every = await subscribe(client, tenant_a, events=["quota.warning"])
        used = {q.quota: q.used for q in (await api.account_plan(tenant_a.principal)).quotas}
        caps = ("namespaces", "api_keys", "members", "webhooks")
        # One more of each fills its cap: the 100 % crossing (and 80 % unless already past).
        await api.set_tenant_plan(tenant_a.id, "unlimited", {q: used[q] + 1 for q in caps})
        h = tenant_a.headers
        assert (await client.post("/v1/namespaces", json={"name": "second"}, headers=h)).status_code == 201
        assert (await client.post("/v1/keys", json={"name": "ci"}, headers=h)).status_code == 201
        r = await client.post("/v1/members/invitations", json={"email": "bo@example.com"}, headers=h)
        assert r.status_code == 201, r.text
        await subscribe(client, tenant_a, events=["job.failed"])
        # Refused past the cap: nothing more announced.
        assert (await client.post("/v1/namespaces", json={"name": "third"}, headers=h)).status_code == 403

        rows = [d for d in await deliveries(owner, tenant_a.id) if str(d["endpoint_id"]) == every["id"]]
        got = sorted((d["payload"]["data"]["quota"], d["payload"]["data"]["threshold_percent"]) for d in rows)
        expected = [(q, 100) for q in caps] + [(q, 80) for q in caps if used[q] * 100 < 80 * (used[q] + 1)]
        assert got == sorted(expected)
        for d in rows:
            data = d["payload"]["data"]
            assert data["limit"] == used[data["quota"]] + 1 and data["used"] == data["limit"]

    async def test_a_monthly_counter_warns_when_its_counts_are_written(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await api._usage.flush()
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"events_per_month": 5})
        await subscribe(client, tenant_a, events=["quota.warning"])
        body = {"session_id": "s1", "messages": [{"role": "user", "content": f"Note {i}"} for i in range(4)]}
        r = await client.post(f"/v1/namespaces/{tenant_a.namespace}/events", json=body, headers=tenant_a.headers)
        assert r.status_code == 202, r.text
        assert await deliveries(owner, tenant_a.id) == []  # counted in memory until written
        await api._usage.flush()
        (d,) = await deliveries(owner, tenant_a.id)
        assert d["payload"]["data"] == {"quota": "events_per_month", "limit": 5, "used": 4, "threshold_percent": 80}
        await api._usage.flush()  # nothing more counted: nothing more announced
        assert len(await deliveries(owner, tenant_a.id)) == 1


class TestBackgroundChanges:
    """Changes no client request makes one by one (a job's merge, decay and promotion, a
    contradiction's resolution) reach subscribers as the same events a request's would."""

    async def test_dedup_merge_decay_and_promotion(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        from tests.maintenance.helpers import organize, set_fields

        await subscribe(client, tenant_a, events=["memory.updated", "memory.superseded", "memory.archived"])
        keep = await store(client, tenant_a, content="I prefer window seats", user_id="u1")
        dup = await store(client, tenant_a, content="  i PREFER window   seats ", user_id="u1", state="tentative")
        old = await store(client, tenant_a, content="The user once owned a red bicycle")
        await set_fields(api, uuid.UUID(old["id"]), "created_at = now() - interval '200 days'")
        tentative = await store(client, tenant_a, content="The user is learning Portuguese", state="tentative")
        await set_fields(api, uuid.UUID(tentative["id"]), "access_count = 50, last_accessed_at = now()")

        await organize(api, tenant_a, "dedup", "decay", "promote")

        rows = await deliveries(owner, tenant_a.id)
        got = sorted((d["event_type"], d["payload"]["data"]["id"]) for d in rows)
        assert got == sorted(
            [
                ("memory.superseded", dup["id"]),
                ("memory.updated", keep["id"]),
                ("memory.archived", old["id"]),
                ("memory.updated", tentative["id"]),
            ]
        )
        data = {(d["event_type"], d["payload"]["data"]["id"]): d["payload"]["data"] for d in rows}
        assert data[("memory.superseded", dup["id"])]["superseded_by"] == keep["id"]
        assert dup["id"] in data[("memory.updated", keep["id"])]["metadata"]["merged_from"]
        assert data[("memory.archived", old["id"])]["state"] == "archived"
        assert data[("memory.updated", tentative["id"])]["state"] == "stable"
        # Each as REST shows it (but for the read's own access count).
        recall = {"access_count", "last_accessed_at"}
        for (_, mid), body in data.items():
            r = await client.get(f"/v1/namespaces/{tenant_a.namespace}/memories/{mid}", headers=tenant_a.headers)
            assert {k: v for k, v in r.json().items() if k not in recall} == {
                k: v for k, v in body.items() if k not in recall
            }

    async def test_a_contradiction_resolved_by_keeping_one_archives_the_other(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        await subscribe(client, tenant_a, events=["memory.archived"])
        ns = f"/v1/namespaces/{tenant_a.namespace}"
        tea = await store(client, tenant_a, content="Ana drinks green tea every morning")
        coffee = await store(client, tenant_a, content="Ana drinks black coffee every morning")
        r = await client.post(
            f"{ns}/contradictions", json={"memory_id": tea["id"], "other_id": coffee["id"]}, headers=tenant_a.headers
        )
        r = await client.post(
            f"{ns}/contradictions/{r.json()['id']}/resolve",
            json={"resolution": "keep_one", "keep_id": coffee["id"]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 200, r.text
        (d,) = await deliveries(owner, tenant_a.id)
        assert d["event_type"] == "memory.archived" and d["payload"]["data"]["id"] == tea["id"]
        assert d["payload"]["data"]["state"] == "archived"
