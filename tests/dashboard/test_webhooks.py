"""The webhooks pages: an endpoint made there is the REST API's own (its secret shown once, in the
answer to the form only), changed, rotated (the old secret keeps signing for its grace) and deleted
there; its deliveries log shows what receivers answered, escaped; only owners and admins of the
endpoint's own organisation can open or act, as on the keys page."""

from __future__ import annotations

import re
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from memvault.api import NamespaceAPI
from memvault.db.urls import DatabaseUrls
from memvault.webhooks.schemas import WebhookIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member
from tests.db.conftest import conninfo

HOOK = "https://hooks.example.com/in"
_SECRET = re.compile(r'<code id="new-secret">(whsec_[A-Za-z0-9+/=]+)</code>')


def secret_in(html: str) -> str:
    found = _SECRET.search(html)
    assert found, "the page shows no new secret"
    return found.group(1)


@pytest.fixture
async def owner_db(pg_urls: DatabaseUrls) -> AsyncIterator[psycopg.AsyncConnection[dict[str, Any]]]:
    """The database owner's connection: the signing secrets and the deliveries' rows, which no page
    and no REST answer shows."""
    async with await psycopg.AsyncConnection.connect(
        conninfo(pg_urls.owner), autocommit=True, row_factory=dict_row
    ) as conn:
        yield conn


async def create(browser: Browser, **fields: object) -> httpx.Response:
    await browser.get("/dashboard/webhooks")
    data = {"url": HOOK, "events": ["memory.created"], "namespaces": "", "description": "", **fields}
    return await browser.post("/dashboard/webhooks", data)


async def the_endpoint(api: NamespaceAPI, tenant: Tenant, url: str = HOOK) -> uuid.UUID:
    [found] = [e for e in (await api.list_webhooks(tenant.principal)).data if e.url == url]
    return found.id


async def secrets_of(owner_db: psycopg.AsyncConnection[dict[str, Any]], endpoint_id: uuid.UUID) -> dict[str, Any]:
    cur = await owner_db.execute(
        "SELECT secret, previous_secret, previous_secret_expires_at FROM webhook_endpoints WHERE id = %s",
        (endpoint_id,),
    )
    row = await cur.fetchone()
    assert row is not None
    return row


async def add_delivery(
    owner_db: psycopg.AsyncConnection[dict[str, Any]], tenant: Tenant, endpoint_id: uuid.UUID, **columns: Any
) -> uuid.UUID:
    """A delivery row as the sender leaves one (status, response, excerpt...)."""
    values = {
        "tenant_id": tenant.id,
        "endpoint_id": endpoint_id,
        "message_id": "msg_" + uuid.uuid4().hex,
        "event_type": "memory.created",
        "namespace": tenant.namespace,
        "payload": '{"type": "memory.created", "data": {}}',
        **columns,
    }
    names = ", ".join(values)
    marks = ", ".join(["%s"] * len(values))
    cur = await owner_db.execute(
        f"INSERT INTO webhook_deliveries ({names}) VALUES ({marks}) RETURNING id", tuple(values.values())
    )
    row = await cur.fetchone()
    assert row is not None
    return uuid.UUID(str(row["id"]))


class TestCreateEditRotateDelete:
    async def test_the_owners_whole_round(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        home = await signed_in.get("/dashboard")
        assert 'id="nav-webhooks"' in home.text

        # Create: the answer to the form shows the secret, the one the endpoint signs with.
        r = await create(
            signed_in,
            events=["memory.created", "memory.deleted"],
            namespaces=tenant_a.namespace,
            description="cache refresher",
        )
        assert r.status_code == 200 and 'id="copy-secret"' in r.text and 'data-copy="new-secret"' in r.text
        secret = secret_in(r.text)
        assert "location" not in r.headers and r.headers["cache-control"] == "no-store"
        assert r.text.count(secret) == 1
        eid = await the_endpoint(api, tenant_a)
        made = await api.get_webhook(tenant_a.principal, eid)
        assert made.events == ["memory.created", "memory.deleted"] and made.namespaces == [tenant_a.namespace]
        assert made.description == "cache refresher" and made.enabled
        assert (await secrets_of(owner_db, eid))["secret"] == secret

        # Listed with its events, namespaces, state and (no) last delivery; the secret nowhere.
        listing = await signed_in.get("/dashboard/webhooks")
        row = re.search(rf'<tr id="webhook-{eid}".*?</tr>', listing.text, re.S)
        assert row, listing.text
        assert "memory.created, memory.deleted" in row.group(0) and tenant_a.namespace in row.group(0)
        assert "enabled" in row.group(0) and "none yet" in row.group(0)
        for path in ("/dashboard/webhooks", f"/dashboard/webhooks/{eid}", f"/dashboard/webhooks/{eid}/edit"):
            page = await signed_in.get(path)
            assert page.status_code == 200 and secret not in page.text and secret[:16] not in page.text

        # Edit: events, namespaces (none: every one), description, and disable.
        edit = await signed_in.get(f"/dashboard/webhooks/{eid}/edit")
        assert 'id="edit-event-memory-deleted" name="events" value="memory.deleted" checked' in edit.text
        r = await signed_in.post(
            f"/dashboard/webhooks/{eid}/edit",
            {"events": ["job.failed", "quota.warning"], "namespaces": "", "description": "on call"},
        )
        assert r.status_code == 303 and r.headers["location"] == f"/dashboard/webhooks/{eid}?done=saved"
        changed = await api.get_webhook(tenant_a.principal, eid)
        assert changed.events == ["job.failed", "quota.warning"] and changed.namespaces is None
        assert changed.description == "on call"
        assert not changed.enabled and changed.disabled_reason == "manual"
        page = await signed_in.get(r.headers["location"])
        assert 'id="notice"' in page.text and "disabled by a member" in page.text
        # Enabled again from the same form.
        await signed_in.get(f"/dashboard/webhooks/{eid}/edit")
        r = await signed_in.post(
            f"/dashboard/webhooks/{eid}/edit", {"events": ["job.failed"], "namespaces": "", "enabled": "on"}
        )
        assert r.status_code == 303
        again = await api.get_webhook(tenant_a.principal, eid)
        assert again.enabled and again.disabled_reason is None

        # Rotate: the new secret once; the old one signs beside it for the grace chosen.
        await signed_in.get(f"/dashboard/webhooks/{eid}")
        r = await signed_in.post(f"/dashboard/webhooks/{eid}/rotate", {"grace_seconds": "3600"})
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store" and 'id="grace"' in r.text
        new = secret_in(r.text)
        stored = await secrets_of(owner_db, eid)
        assert new != secret and stored["secret"] == new and stored["previous_secret"] == secret
        left = stored["previous_secret_expires_at"] - datetime.now(UTC)
        assert timedelta(minutes=55) < left <= timedelta(hours=1)
        page = await signed_in.get(f"/dashboard/webhooks/{eid}")
        assert new not in page.text and "signs too until" in page.text

        # Delete: a page that says what goes, then the post.
        confirm = await signed_in.get(f"/dashboard/webhooks/{eid}/delete")
        assert confirm.status_code == 200 and 'id="confirm-delete"' in confirm.text and HOOK in confirm.text
        assert await api.get_webhook(tenant_a.principal, eid)  # opening the page deleted nothing
        r = await signed_in.post(f"/dashboard/webhooks/{eid}/delete")
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/webhooks?done=deleted"
        assert eid not in [e.id for e in (await api.list_webhooks(tenant_a.principal)).data]
        after = await signed_in.get(r.headers["location"])
        assert 'id="notice"' in after.text and f"webhook-{eid}" not in after.text
        assert (await signed_in.get(f"/dashboard/webhooks/{eid}")).status_code == 404

    async def test_rotating_with_no_grace_stops_the_old_secret_at_once(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        await create(signed_in)
        eid = await the_endpoint(api, tenant_a)
        await signed_in.get(f"/dashboard/webhooks/{eid}")
        r = await signed_in.post(f"/dashboard/webhooks/{eid}/rotate", {"grace_seconds": "0"})
        assert r.status_code == 200 and "stopped signing at once" in r.text
        assert (await secrets_of(owner_db, eid))["previous_secret"] is None

    async def test_a_form_the_facade_refuses_is_shown_again_with_the_reason(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        # A private address (the test settings do not allow them) and no event at all.
        r = await create(signed_in, url="http://127.0.0.1:9/in", description="keep this")
        assert r.status_code == 422 and 'id="form-error"' in r.text and "refused" in r.text
        assert 'value="keep this"' in r.text and "new-secret" not in r.text
        r = await create(signed_in, events=[])
        assert r.status_code == 422 and "events" in r.text and "new-secret" not in r.text
        assert (await api.list_webhooks(tenant_a.principal)).data == []
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        await signed_in.get(f"/dashboard/webhooks/{made.id}/edit")
        r = await signed_in.post(f"/dashboard/webhooks/{made.id}/edit", {"events": ["no.such"], "enabled": "on"})
        assert r.status_code == 422 and 'id="form-error"' in r.text
        assert (await api.get_webhook(tenant_a.principal, made.id)).events == ["memory.created"]

    async def test_saving_an_enabled_endpoint_keeps_its_failing_clock(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        since = datetime.now(UTC) - timedelta(days=2)
        await owner_db.execute("UPDATE webhook_endpoints SET failing_since = %s WHERE id = %s", (since, made.id))
        page = await signed_in.get(f"/dashboard/webhooks/{made.id}/edit")
        assert "failing since" in page.text
        r = await signed_in.post(
            f"/dashboard/webhooks/{made.id}/edit", {"events": ["memory.created"], "description": "x", "enabled": "on"}
        )
        assert r.status_code == 303
        assert (await api.get_webhook(tenant_a.principal, made.id)).failing_since == since


async def test_a_disabled_endpoint_says_why(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_db: psycopg.AsyncConnection[dict[str, Any]]
) -> None:
    """The sender's own reasons (it sets them as the owner: no page or REST call does)."""
    since = datetime.now(UTC) - timedelta(days=3, hours=1)
    shown = {
        "gone": "the receiver answered 410 Gone",
        "failing": "every delivery failed for 3 days (since",
        "manual": "disabled by a member",
    }
    made = {}
    for reason in shown:
        hook = await api.create_webhook(
            tenant_a.principal, WebhookIn(url=f"{HOOK}/{reason}", events=["memory.created"])
        )
        await owner_db.execute(
            "UPDATE webhook_endpoints SET enabled = false, disabled_reason = %s, failing_since = %s WHERE id = %s",
            (reason, since if reason == "failing" else None, hook.id),
        )
        made[reason] = hook.id
    listing = await signed_in.get("/dashboard/webhooks")
    for reason, words in shown.items():
        row = re.search(rf'<tr id="webhook-{made[reason]}" class="ended">.*?</tr>', listing.text, re.S)
        assert row and "disabled" in row.group(0) and words in row.group(0), reason
        page = await signed_in.get(f"/dashboard/webhooks/{made[reason]}")
        assert words in page.text and "pending deliveries wait until it is enabled" in page.text


class TestDeliveriesLog:
    async def test_what_receivers_answered_is_shown_escaped(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        hostile = '<script>alert("x")</script><img src=x onerror=alert(1)>'
        now = datetime.now(UTC)
        failed = await add_delivery(
            owner_db, tenant_a, made.id, status="pending", attempts=2, response_status=500,
            response_excerpt=hostile, latency_ms=37, error="<b>HTTP 500</b>", last_attempt_at=now,
            next_attempt_at=now + timedelta(minutes=10), created_at=now - timedelta(minutes=1),
        )  # fmt: skip
        page = await signed_in.get(f"/dashboard/webhooks/{made.id}")
        assert page.status_code == 200
        assert "<script>alert" not in page.text and "<img src=x" not in page.text and "<b>HTTP" not in page.text
        assert "&lt;script&gt;alert(&#34;x&#34;)&lt;/script&gt;" in page.text and "&lt;b&gt;HTTP 500" in page.text
        row = re.search(rf'<tr id="delivery-{failed}".*?</tr>', page.text, re.S)
        assert row and "pending" in row.group(0) and ">500<" in row.group(0) and "37 ms" in row.group(0)
        assert f'id="excerpt-{failed}"' in row.group(0)

        # The list shows how it last went, by the newest delivery.
        ok = await add_delivery(
            owner_db, tenant_a, made.id, status="succeeded", attempts=1, response_status=204,
            latency_ms=5, last_attempt_at=now, response_excerpt="",
        )  # fmt: skip
        listing = await signed_in.get("/dashboard/webhooks")
        last = re.search(rf'<td class="hook-last" id="last-{made.id}">(.*?)</td>', listing.text, re.S)
        assert last and "succeeded" in last.group(1) and "204" in last.group(1)
        assert "<script>" not in listing.text
        # A sent delivery shows no next attempt, whatever due time its row kept.
        page = await signed_in.get(f"/dashboard/webhooks/{made.id}")
        row = re.search(rf'<tr id="delivery-{ok}".*?</tr>', page.text, re.S)
        assert row and row.group(0).count("—") == 1  # next attempt only

    async def test_the_log_is_paged(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        for i in range(53):
            await add_delivery(owner_db, tenant_a, made.id, created_at=datetime.now(UTC) - timedelta(seconds=i))
        first = await signed_in.get(f"/dashboard/webhooks/{made.id}")
        assert first.text.count('<tr id="delivery-') == 50
        found = re.search(r'href="([^"]+)" id="deliveries-next"', first.text)
        assert found
        second = await signed_in.get(found.group(1).replace("&amp;", "&"))
        assert second.text.count('<tr id="delivery-') == 3
        assert 'id="deliveries-next"' not in second.text and 'id="deliveries-first"' in second.text

    async def test_replay_since_a_time(
        self,
        signed_in: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        now = datetime.now(UTC)
        for ago in (timedelta(hours=3), timedelta(minutes=20), timedelta(minutes=10)):
            await add_delivery(owner_db, tenant_a, made.id, status="succeeded", attempts=1, created_at=now - ago)
        page = await signed_in.get(f"/dashboard/webhooks/{made.id}")
        assert 'id="replay"' in page.text and 'type="datetime-local"' in page.text
        since = (now - timedelta(hours=1)).strftime("%Y-%m-%dT%H:%M")  # as the field sends it: UTC, no zone
        r = await signed_in.post(f"/dashboard/webhooks/{made.id}/replay", {"since": since})
        assert r.status_code == 303
        after = await signed_in.get(r.headers["location"])
        assert "2 events queued to be sent again." in after.text
        log = await api.webhook_deliveries(tenant_a.principal, made.id)
        assert sorted(d.status for d in log.data) == ["pending", "pending", "succeeded", "succeeded", "succeeded"]

        await signed_in.get(f"/dashboard/webhooks/{made.id}")
        r = await signed_in.post(f"/dashboard/webhooks/{made.id}/replay", {"since": "yesterday"})
        assert r.status_code == 422 and 'id="replay-error"' in r.text and 'value="yesterday"' in r.text
        # A notice is the page's own words: a count that is not a number shows none.
        odd = await signed_in.get(f"/dashboard/webhooks/{made.id}?done=replayed&requeued=<b>9</b>")
        assert odd.status_code == 200 and 'id="notice"' not in odd.text


class TestWhoMay:
    @pytest.mark.parametrize("role", ["viewer", "member"])
    async def test_a_viewer_or_member_sees_no_webhooks_and_its_posts_are_refused(
        self,
        role: str,
        browser: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        await browser.sign_in(await add_member(api, tenant_a, role))
        home = await browser.get("/dashboard")
        assert 'id="nav-webhooks"' not in home.text
        for path in ("/dashboard/webhooks", f"/dashboard/webhooks/{made.id}", f"/dashboard/webhooks/{made.id}/edit"):
            page = await browser.get(path)
            assert page.status_code == 403 and HOOK not in page.text and "create-webhook" not in page.text
        before = await secrets_of(owner_db, made.id)
        for path, data in (
            ("/dashboard/webhooks", {"url": "https://evil.example.com/", "events": ["memory.created"]}),
            (f"/dashboard/webhooks/{made.id}/edit", {"events": ["memory.deleted"]}),
            (f"/dashboard/webhooks/{made.id}/rotate", {}),
            (f"/dashboard/webhooks/{made.id}/replay", {"since": "2026-01-01T00:00"}),
            (f"/dashboard/webhooks/{made.id}/delete", {}),
        ):
            await browser.get("/dashboard")
            r = await browser.post(path, data)
            assert r.status_code == 403, path
        assert [e.id for e in (await api.list_webhooks(tenant_a.principal)).data] == [made.id]
        assert (await api.get_webhook(tenant_a.principal, made.id)).events == ["memory.created"]
        assert await secrets_of(owner_db, made.id) == before

    async def test_an_admin_limited_to_a_namespace_stays_within_it(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        everywhere = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        await browser.sign_in(await add_member(api, tenant_a, "admin", namespaces=[tenant_a.namespace]))
        page = await browser.get("/dashboard/webhooks")
        assert page.status_code == 200 and f'value="{tenant_a.namespace}"' in page.text  # the default
        assert str(everywhere.id) not in page.text
        assert (await browser.get(f"/dashboard/webhooks/{everywhere.id}")).status_code == 404
        r = await create(browser, url="https://hooks.example.com/too-wide", namespaces="")
        assert r.status_code == 403 and 'id="form-error"' in r.text and "new-secret" not in r.text
        r = await create(browser, url="https://hooks.example.com/inside", namespaces=tenant_a.namespace)
        assert r.status_code == 200 and secret_in(r.text)

    async def test_another_organisations_endpoint_is_not_found(
        self,
        browser: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        tenant_b: Tenant,
        owner_db: psycopg.AsyncConnection[dict[str, Any]],
    ) -> None:
        theirs = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        await add_delivery(owner_db, tenant_a, theirs.id, response_excerpt="tenant A's receiver said this")
        before = await secrets_of(owner_db, theirs.id)
        await browser.sign_in(await add_member(api, tenant_b, "owner"))
        listing = await browser.get("/dashboard/webhooks")
        assert listing.status_code == 200 and str(theirs.id) not in listing.text
        for path in ("", "/edit", "/delete"):
            page = await browser.get(f"/dashboard/webhooks/{theirs.id}{path}")
            assert page.status_code == 404 and "webhook_not_found" in page.text, path
            assert "tenant A's receiver" not in page.text and HOOK not in page.text
        for action, data in (
            ("edit", {"events": ["memory.deleted"]}),
            ("rotate", {}),
            ("replay", {"since": "2026-01-01T00:00"}),
            ("delete", {}),
        ):
            await browser.get("/dashboard/webhooks")
            r = await browser.post(f"/dashboard/webhooks/{theirs.id}/{action}", data)
            assert r.status_code == 404 and "webhook_not_found" in r.text, action
        assert (await api.get_webhook(tenant_a.principal, theirs.id)).events == ["memory.created"]
        assert await secrets_of(owner_db, theirs.id) == before

    async def test_a_form_without_its_token_is_refused(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        made = await api.create_webhook(tenant_a.principal, WebhookIn(url=HOOK, events=["memory.created"]))
        await signed_in.get("/dashboard/webhooks")
        r = await signed_in.post("/dashboard/webhooks", {"url": HOOK + "2", "events": ["memory.created"]}, csrf="")
        assert r.status_code == 403 and "csrf_failed" in r.text
        for action in ("delete", "rotate"):
            r = await signed_in.post(f"/dashboard/webhooks/{made.id}/{action}", csrf="")
            assert r.status_code == 403 and "csrf_failed" in r.text
        assert [e.id for e in (await api.list_webhooks(tenant_a.principal)).data] == [made.id]
