"""Webhook subscriptions over REST: the secret shown once, rotation with a grace period, URL and
event-type refusals, admin only, other tenants see nothing, the deliveries log and replay."""

from __future__ import annotations

import base64
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from standardwebhooks.webhooks import Webhook

from memvault.api import NamespaceAPI
from memvault.webhooks.schemas import url_refusal
from memvault.webhooks.service import MAX_ENDPOINTS
from tests.conftest import Tenant
from tests.memories.test_router import problem
from tests.webhooks.conftest import HOOK_URL, deliveries, subscribe


async def key(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, str]:
    r = await client.post("/v1/keys", json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


async def store(client: httpx.AsyncClient, tenant: Tenant, content: str = "The user's cat is called Miso") -> None:
    r = await client.post(
        f"/v1/namespaces/{tenant.namespace}/memories", json={"content": content}, headers=tenant.headers
    )
    assert r.status_code == 201, r.text


class TestSubscribe:
    async def test_the_secret_is_shown_once_and_signs(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await subscribe(client, tenant_a, description="cache refresh", events=["memory.deleted", "job.failed"])

        assert made["secret"].startswith("whsec_") and len(base64.b64decode(made["secret"][6:])) >= 24
        assert made["url"] == HOOK_URL and made["events"] == ["memory.deleted", "job.failed"]
        assert made["namespaces"] is None and made["enabled"] and made["description"] == "cache refresh"
        # The library receivers use accepts the secret as it is.
        hook = Webhook(made["secret"])
        now = datetime.now(UTC)
        sig = hook.sign("msg_1", now, '{"type":"memory.deleted"}')
        hook.verify(
            '{"type":"memory.deleted"}',
            {"webhook-id": "msg_1", "webhook-timestamp": str(int(now.timestamp())), "webhook-signature": sig},
        )

        listed = (await client.get("/v1/webhooks", headers=tenant_a.headers)).json()["data"]
        got = (await client.get(f"/v1/webhooks/{made['id']}", headers=tenant_a.headers)).json()
        assert [e["id"] for e in listed] == [made["id"]]
        assert "secret" not in listed[0] and "secret" not in got and made["secret"] not in str(listed)
        assert got["created_by"].startswith("key:")

    @pytest.mark.parametrize(
        "url",
        [
            "http://hooks.example.com/in",
            "https://127.0.0.1/in",
            "https://localhost:8443/in",
            "https://10.1.2.3/in",
            "https://169.254.169.254/latest/meta-data",
            "https://[::1]/in",
            "https://[::ffff:192.168.0.1]/in",
            "https://user:pw@hooks.example.com/in",
            "hooks.example.com/in",
            "ftp://hooks.example.com/in",
            "https://hooks.example.com:99999/in",
        ],
    )
    async def test_a_url_that_is_not_public_https_is_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant, url: str
    ) -> None:
        r = await client.post("/v1/webhooks", json={"url": url, "events": ["memory.created"]}, headers=tenant_a.headers)
        problem(r, 422, "webhook_url_refused")
        assert (await client.get("/v1/webhooks", headers=tenant_a.headers)).json()["data"] == []

    def test_the_operator_may_allow_private_and_plain_http(self) -> None:
        assert url_refusal("http://127.0.0.1:8080/in", allow_private=True) is None
        assert url_refusal("http://u:p@127.0.0.1/in", allow_private=True) is not None
        assert url_refusal("https://93.184.216.34/in", allow_private=False) is None

    @pytest.mark.parametrize("events", [["memory.exploded"], [], "memory.created"])
    async def test_unknown_event_types_are_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant, events: Any
    ) -> None:
        r = await client.post("/v1/webhooks", json={"url": HOOK_URL, "events": events}, headers=tenant_a.headers)
        problem(r, 422, "validation_error")

    async def test_read_and_write_keys_are_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await subscribe(client, tenant_a)
        writer = await key(client, tenant_a, scopes=["read", "write"])
        for method, path, body in [
            ("POST", "/v1/webhooks", {"url": HOOK_URL, "events": ["memory.created"]}),
            ("GET", "/v1/webhooks", None),
            ("GET", f"/v1/webhooks/{made['id']}", None),
            ("PATCH", f"/v1/webhooks/{made['id']}", {"enabled": False}),
            ("DELETE", f"/v1/webhooks/{made['id']}", None),
            ("POST", f"/v1/webhooks/{made['id']}/rotate", {}),
            ("GET", f"/v1/webhooks/{made['id']}/deliveries", None),
            ("POST", f"/v1/webhooks/{made['id']}/replay", {"since": "2026-01-01T00:00:00Z"}),
        ]:
            r = await client.request(method, path, json=body, headers=writer)
            problem(r, 403, "forbidden")

    async def test_namespaces_beyond_the_keys_reach_are_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        limited = await key(client, tenant_a, scopes=["read", "write", "admin"], namespaces=[tenant_a.namespace])
        r = await client.post("/v1/webhooks", json={"url": HOOK_URL, "events": ["job.failed"]}, headers=limited)
        problem(r, 403, "forbidden")
        r = await client.post(
            "/v1/webhooks",
            json={"url": HOOK_URL, "events": ["job.failed"], "namespaces": [tenant_a.namespace]},
            headers=limited,
        )
        assert r.status_code == 201, r.text
        wide = await subscribe(client, tenant_a)
        # The limited admin lists and reaches only endpoints within its namespaces.
        seen = [e["id"] for e in (await client.get("/v1/webhooks", headers=limited)).json()["data"]]
        assert seen == [r.json()["id"]]
        problem(await client.get(f"/v1/webhooks/{wide['id']}", headers=limited), 404, "webhook_not_found")

    async def test_endpoints_per_tenant_are_capped(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"webhooks": 1})
        await subscribe(client, tenant_a)
        r = await client.post(
            "/v1/webhooks", json={"url": HOOK_URL, "events": ["job.failed"]}, headers=tenant_a.headers
        )
        assert problem(r, 403, "quota_exceeded")["quota"] == "webhooks"
        await api.set_tenant_plan(tenant_a.id, "unlimited", {})
        for _ in range(MAX_ENDPOINTS - 1):
            await subscribe(client, tenant_a)
        r = await client.post(
            "/v1/webhooks", json={"url": HOOK_URL, "events": ["job.failed"]}, headers=tenant_a.headers
        )
        assert problem(r, 403, "quota_exceeded")["limit"] == MAX_ENDPOINTS


class TestChange:
    async def test_patch_disable_and_enable(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        made = await subscribe(client, tenant_a)
        path = f"/v1/webhooks/{made['id']}"
        r = await client.patch(
            path, json={"events": ["memory.updated"], "namespaces": [tenant_a.namespace]}, headers=tenant_a.headers
        )
        assert r.status_code == 200 and r.json()["events"] == ["memory.updated"], r.text
        assert r.json()["namespaces"] == [tenant_a.namespace] and r.json()["updated_at"] > made["updated_at"]
        off = (await client.patch(path, json={"enabled": False}, headers=tenant_a.headers)).json()
        assert (off["enabled"], off["disabled_reason"]) == (False, "manual")
        # As the sender leaves it after three days of failures.
        await owner.execute(
            "UPDATE webhook_endpoints SET disabled_reason = 'failing', failing_since = now() WHERE id = %s",
            (uuid.UUID(made["id"]),),
        )
        on = (await client.patch(path, json={"enabled": True}, headers=tenant_a.headers)).json()
        assert (on["enabled"], on["disabled_reason"], on["failing_since"]) == (True, None, None)
        problem(await client.patch(path, json={"events": ["nope"]}, headers=tenant_a.headers), 422, "validation_error")

    async def test_rotation_keeps_the_old_secret_signing_for_the_grace_period(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        made = await subscribe(client, tenant_a)
        r = await client.post(
            f"/v1/webhooks/{made['id']}/rotate", json={"grace_seconds": 3600}, headers=tenant_a.headers
        )
        assert r.status_code == 200, r.text
        rotated = r.json()
        assert rotated["secret"].startswith("whsec_") and rotated["secret"] != made["secret"]
        row = await (
            await owner.execute("SELECT * FROM webhook_endpoints WHERE id = %s", (uuid.UUID(made["id"]),))
        ).fetchone()
        assert row["secret"] == rotated["secret"] and row["previous_secret"] == made["secret"]
        left = row["previous_secret_expires_at"] - datetime.now(UTC)
        assert timedelta(minutes=59) < left <= timedelta(hours=1)
        assert rotated["previous_secret_expires_at"] is not None

        default = (await client.post(f"/v1/webhooks/{made['id']}/rotate", headers=tenant_a.headers)).json()
        row = await (
            await owner.execute("SELECT * FROM webhook_endpoints WHERE id = %s", (uuid.UUID(made["id"]),))
        ).fetchone()
        assert row["previous_secret"] == rotated["secret"] and row["secret"] == default["secret"]
        assert timedelta(hours=23) < row["previous_secret_expires_at"] - datetime.now(UTC) <= timedelta(hours=24)

        now = (
            await client.post(f"/v1/webhooks/{made['id']}/rotate", json={"grace_seconds": 0}, headers=tenant_a.headers)
        ).json()
        assert now["previous_secret_expires_at"] is None
        too_long = {"grace_seconds": 8 * 86400}
        r = await client.post(f"/v1/webhooks/{made['id']}/rotate", json=too_long, headers=tenant_a.headers)
        problem(r, 422, "validation_error")

    async def test_delete_takes_the_deliveries_along(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        made = await subscribe(client, tenant_a)
        await store(client, tenant_a)
        assert len(await deliveries(owner, tenant_a.id)) == 1
        r = await client.delete(f"/v1/webhooks/{made['id']}", headers=tenant_a.headers)
        assert r.status_code == 204, r.text
        assert await deliveries(owner, tenant_a.id) == []
        problem(await client.get(f"/v1/webhooks/{made['id']}", headers=tenant_a.headers), 404, "webhook_not_found")
        problem(await client.delete(f"/v1/webhooks/{made['id']}", headers=tenant_a.headers), 404, "webhook_not_found")

    async def test_changes_are_audited(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = await subscribe(client, tenant_a)
        await client.patch(f"/v1/webhooks/{made['id']}", json={"description": "x"}, headers=tenant_a.headers)
        await client.post(f"/v1/webhooks/{made['id']}/rotate", headers=tenant_a.headers)
        await client.delete(f"/v1/webhooks/{made['id']}", headers=tenant_a.headers)
        entries = (await client.get("/v1/audit", headers=tenant_a.headers)).json()["data"]
        actions = [e["action"] for e in entries if e["target_id"] == made["id"]]
        assert set(actions) == {"webhook.create", "webhook.update", "webhook.rotate", "webhook.delete"}
        assert made["secret"] not in str(entries)


class TestOtherTenant:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        made = await subscribe(client, tenant_a)
        path = f"/v1/webhooks/{made['id']}"
        assert (await client.get("/v1/webhooks", headers=tenant_b.headers)).json()["data"] == []
        for method, suffix, body in [
            ("GET", "", None),
            ("PATCH", "", {"enabled": False}),
            ("DELETE", "", None),
            ("POST", "/rotate", {}),
            ("GET", "/deliveries", None),
            ("POST", "/replay", {"since": "2026-01-01T00:00:00Z"}),
        ]:
            r = await client.request(method, path + suffix, json=body, headers=tenant_b.headers)
            problem(r, 404, "webhook_not_found")
        still = (await client.get(path, headers=tenant_a.headers)).json()
        assert still["enabled"] and still["updated_at"] == made["updated_at"]


class TestDeliveriesLog:
    async def test_newest_first_paged_and_replay_requeues(
        self, client: httpx.AsyncClient, tenant_a: Tenant, owner: psycopg.AsyncConnection
    ) -> None:
        made = await subscribe(client, tenant_a)
        since = datetime.now(UTC).isoformat()
        for i in range(3):
            await store(client, tenant_a, f"Fact number {i} about the user")
        path = f"/v1/webhooks/{made['id']}/deliveries"
        first = (await client.get(path, params={"limit": 2}, headers=tenant_a.headers)).json()
        rest = (await client.get(path, params={"cursor": first["next_cursor"]}, headers=tenant_a.headers)).json()
        log = first["data"] + rest["data"]
        assert len(log) == 3 and rest["next_cursor"] is None
        assert [d["created_at"] for d in log] == sorted((d["created_at"] for d in log), reverse=True)
        assert {d["status"] for d in log} == {"pending"} and all(d["next_attempt_at"] for d in log)
        assert {d["event_type"] for d in log} == {"memory.created"} and all(
            d["message_id"].startswith("msg_") for d in log
        )

        # Still pending: nothing to queue twice.
        r = await client.post(f"/v1/webhooks/{made['id']}/replay", json={"since": since}, headers=tenant_a.headers)
        assert r.status_code == 200 and r.json() == {"requeued": 0}, r.text
        # As the sender leaves them: delivered, or given up on.
        await owner.execute(
            "UPDATE webhook_deliveries SET status = CASE WHEN message_id = %s THEN 'failed' ELSE 'succeeded' END, "
            "attempts = 1, last_attempt_at = now(), response_status = 200 WHERE endpoint_id = %s",
            (log[0]["message_id"], uuid.UUID(made["id"])),
        )
        r = await client.post(f"/v1/webhooks/{made['id']}/replay", json={"since": since}, headers=tenant_a.headers)
        assert r.json() == {"requeued": 3}
        rows = await deliveries(owner, tenant_a.id, made["id"])
        assert len(rows) == 6
        fresh = [d for d in rows if d["status"] == "pending"]
        assert sorted(d["message_id"] for d in fresh) == sorted(d["message_id"] for d in log)
        assert all(d["attempts"] == 0 and d["next_attempt_at"] <= datetime.now(UTC) for d in fresh)
        old = {d["message_id"]: d["payload"] for d in rows if d["status"] != "pending"}
        assert all(d["payload"] == old[d["message_id"]] for d in fresh)
        # A replay from later on finds nothing new to send.
        later = {"since": (datetime.now(UTC) + timedelta(seconds=5)).isoformat()}
        r = await client.post(f"/v1/webhooks/{made['id']}/replay", json=later, headers=tenant_a.headers)
        assert r.json() == {"requeued": 0}
        problem(
            await client.post(
                f"/v1/webhooks/{made['id']}/replay", json={"since": "2026-01-01T00:00:00"}, headers=tenant_a.headers
            ),
            422,
            "validation_error",
        )
