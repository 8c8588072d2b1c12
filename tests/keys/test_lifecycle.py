"""API keys over time (issue 23): expiry, rotation with a grace period, the paginated listing and
the `api_keys` quota, through the app over HTTP against the session's PostgreSQL. Time is moved by
writing the key's expiry into the past as the owner, not by sleeping."""

from __future__ import annotations

import asyncio
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.keys.test_router import assert_unauthenticated, bearer, create_key, create_namespace, revoke
from tests.mcp.conftest import mcp_session
from tests.servers import served


async def age_key(api: NamespaceAPI, key_id: str, column: str) -> None:
    """Put the key's ``column`` (expires_at, previous_expires_at) a second in the past."""
    assert column in ("expires_at", "previous_expires_at")
    async with api._db.owner() as s:
        await s.execute(
            text(f"UPDATE api_keys SET {column} = now() - interval '1 second' WHERE id = :id"), {"id": key_id}
        )


async def rotate(client: httpx.AsyncClient, headers: dict[str, str], key_id: str, **body: Any) -> httpx.Response:
    return await client.post(f"/v1/keys/{key_id}/rotate", json=body, headers=headers)


async def listed(client: httpx.AsyncClient, headers: dict[str, str], limit: int = 50) -> list[dict[str, Any]]:
    """Every key of every page, following next_cursor."""
    keys: list[dict[str, Any]] = []
    cursor: str | None = None
    while True:
        params: dict[str, Any] = {"limit": limit, **({"cursor": cursor} if cursor else {})}
        r = await client.get("/v1/keys", params=params, headers=headers)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["data"]) <= limit
        keys += page["data"]
        if (cursor := page["next_cursor"]) is None:
            return keys


class TestExpiry:
    async def test_expires_in_days_sets_the_time(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        before = datetime.now(UTC)
        created = await create_key(client, tenant_a, scopes=["read"], expires_in_days=30)

        at = datetime.fromisoformat(created["expires_at"])
        assert before + timedelta(days=30) <= at <= datetime.now(UTC) + timedelta(days=30)
        assert (await client.get("/v1/namespaces", headers=bearer(created["key"]))).status_code == 200

    @pytest.mark.parametrize(
        "body",
        [
            {"expires_at": "2020-01-01T00:00:00Z"},
            {"expires_at": (datetime.now(UTC) + timedelta(days=4000)).isoformat()},
            {"expires_at": "2099-01-01T00:00:00"},
            {"expires_in_days": 0},
            {"expires_in_days": 3651},
            {"expires_in_days": 3, "expires_at": (datetime.now(UTC) + timedelta(days=3)).isoformat()},
        ],
        ids=["past", "too-far", "no-time-zone", "zero-days", "too-many-days", "both"],
    )
    async def test_bad_expiry_is_422_and_stores_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, body: dict[str, Any]
    ) -> None:
        before = await listed(client, tenant_a.headers)

        r = await client.post("/v1/keys", json={"scopes": ["read"], **body}, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"
        assert await listed(client, tenant_a.headers) == before

    async def test_an_expired_key_is_refused_saying_so(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        created = await create_key(client, tenant_a, scopes=["read"], expires_in_days=1)
        await age_key(api, created["id"], "expires_at")

        r = await client.get("/v1/namespaces", headers=bearer(created["key"]))

        assert_unauthenticated(r, "api_key_expired")
        assert "expired" in r.json()["detail"] and r.json()["expired_at"]
        # Listed as expired, not revoked; the tenant's other keys are unaffected.
        [shown] = [k for k in await listed(client, tenant_a.headers) if k["id"] == created["id"]]
        assert shown["revoked_at"] is None and datetime.fromisoformat(shown["expires_at"]) < datetime.now(UTC)

    async def test_an_expired_key_is_refused_on_mcp(
        self, app: Any, api: NamespaceAPI, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        created = await create_key(client, tenant_a, scopes=["read"], expires_in_days=1)
        async with served(app) as base:
            async with mcp_session(base, created["key"]) as session:  # works while it lives
                assert (await session.list_tools()).tools
            await age_key(api, created["id"], "expires_at")
            async with httpx.AsyncClient() as raw:
                r = await raw.post(
                    f"{base}/mcp", json={"jsonrpc": "2.0", "id": 1, "method": "ping"}, headers=bearer(created["key"])
                )

        assert r.status_code == 401 and 'error="invalid_token"' in r.headers["www-authenticate"]
        assert r.json()["code"] == "api_key_expired"

    async def test_expired_keys_cannot_be_rotated(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        created = await create_key(client, tenant_a, scopes=["read"], expires_in_days=1)
        await age_key(api, created["id"], "expires_at")

        r = await rotate(client, tenant_a.headers, created["id"])

        assert r.status_code == 409, r.text
        assert (r.json()["code"], r.json()["state"]) == ("api_key_not_active", "expired")


class TestRotation:
    async def test_new_secret_same_key_old_secret_works_during_grace(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "ops")
        old = await create_key(
            client, tenant_a, name="deploy bot", scopes=["read", "write"], namespaces=["ops"], default_namespace="ops"
        )

        r = await rotate(client, tenant_a.headers, old["id"], grace_seconds=600)

        assert r.status_code == 200, r.text
        new = r.json()
        assert new["id"] == old["id"] and new["key"] != old["key"] and new["prefix"] == new["key"][:15]
        for kept in ("name", "scopes", "namespaces", "default_namespace", "created_at", "expires_at"):
            assert new[kept] == old[kept], kept
        assert new["previous_prefix"] == old["prefix"]
        grace_end = datetime.fromisoformat(new["previous_expires_at"])
        assert timedelta(seconds=590) < grace_end - datetime.now(UTC) <= timedelta(seconds=600)
        for secret in (new["key"], old["key"]):
            r = await client.get("/v1/namespaces", headers=bearer(secret))
            assert r.status_code == 200, r.text
            assert [n["name"] for n in r.json()] == ["ops"]
        # Listed once, under the new prefix; neither secret appears.
        page = await client.get("/v1/keys", headers=tenant_a.headers)
        assert [k["prefix"] for k in page.json()["data"] if k["id"] == old["id"]] == [new["prefix"]]
        assert old["key"] not in page.text and new["key"] not in page.text

    async def test_old_secret_refused_after_grace(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        old = await create_key(client, tenant_a, scopes=["read"])
        new = (await rotate(client, tenant_a.headers, old["id"], grace_seconds=3600)).json()
        await age_key(api, old["id"], "previous_expires_at")

        r = await client.get("/v1/namespaces", headers=bearer(old["key"]))

        assert_unauthenticated(r, "api_key_rotated")
        assert (await client.get("/v1/namespaces", headers=bearer(new["key"]))).status_code == 200

    async def test_zero_grace_ends_the_old_secret_at_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        old = await create_key(client, tenant_a, scopes=["read"])

        new = (await rotate(client, tenant_a.headers, old["id"], grace_seconds=0)).json()

        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(old["key"])), "api_key_rotated")
        assert (await client.get("/v1/namespaces", headers=bearer(new["key"]))).status_code == 200

    async def test_a_second_rotation_drops_the_first_secret(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first = await create_key(client, tenant_a, scopes=["read"])
        second = (await rotate(client, tenant_a.headers, first["id"])).json()

        third = (await rotate(client, tenant_a.headers, first["id"])).json()

        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(first["key"])), "invalid_api_key")
        for secret in (second["key"], third["key"]):
            assert (await client.get("/v1/namespaces", headers=bearer(secret))).status_code == 200

    async def test_rotating_the_calling_key_itself(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        admin = await create_key(client, tenant_a, scopes=["admin"])

        r = await rotate(client, bearer(admin["key"]), admin["id"], grace_seconds=60)

        assert r.status_code == 200, r.text
        assert (await client.get("/v1/keys", headers=bearer(r.json()["key"]))).status_code == 200

    async def test_revoking_ends_both_secrets(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        old = await create_key(client, tenant_a, scopes=["read"])
        new = (await rotate(client, tenant_a.headers, old["id"])).json()

        await revoke(client, tenant_a, old["id"])

        for secret in (old["key"], new["key"]):
            assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(secret)), "api_key_revoked")
        r = await rotate(client, tenant_a.headers, old["id"])
        assert r.status_code == 409, r.text
        assert (r.json()["code"], r.json()["state"]) == ("api_key_not_active", "revoked")

    @pytest.mark.parametrize("grace", [-1, 86_401, "soon"], ids=["negative", "over-a-day", "not-a-number"])
    async def test_bad_grace_is_422_and_rotates_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, grace: Any
    ) -> None:
        old = await create_key(client, tenant_a, scopes=["read"])

        r = await rotate(client, tenant_a.headers, old["id"], grace_seconds=grace)

        assert r.status_code == 422, r.text
        assert r.json()["field"] == "grace_seconds"
        assert (await client.get("/v1/namespaces", headers=bearer(old["key"]))).status_code == 200

    async def test_audited_and_not_replayable(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        old = await create_key(client, tenant_a, scopes=["read"])

        refused = await client.post(
            f"/v1/keys/{old['id']}/rotate", json={}, headers={**tenant_a.headers, "Idempotency-Key": "rotate-1"}
        )
        done = await client.post(f"/v1/keys/{old['id']}/rotate", headers=tenant_a.headers)  # no body: defaults

        assert refused.status_code == 422 and refused.json()["code"] == "idempotency_not_supported"
        assert done.status_code == 200, done.text
        r = await client.get("/v1/audit", params={"action": "key.rotate"}, headers=tenant_a.headers)
        [entry] = [e for e in r.json()["data"] if e["target_id"] == old["id"]]
        assert entry["detail"] == {"grace_seconds": 3600, "previous_prefix": old["prefix"]}


class TestReach:
    async def test_another_tenant_cannot_rotate_or_see_the_key(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        a_key = await create_key(client, tenant_a, scopes=["read"])

        foreign = await rotate(client, tenant_b.headers, a_key["id"])
        absent = await rotate(client, tenant_b.headers, str(uuid.uuid4()))

        assert (foreign.status_code, foreign.json()["code"]) == (404, "api_key_not_found")
        assert (absent.status_code, absent.json()["code"]) == (404, "api_key_not_found")
        [still] = [k for k in await listed(client, tenant_a.headers) if k["id"] == a_key["id"]]
        assert still["prefix"] == a_key["prefix"] and still["rotated_at"] is None
        b_list = await client.get("/v1/keys", params={"limit": 200}, headers=tenant_b.headers)
        assert a_key["id"] not in b_list.text and a_key["prefix"] not in b_list.text

    async def test_a_namespace_limited_admin_cannot_rotate_a_broader_key(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "team")
        limited = await create_key(client, tenant_a, scopes=["admin"], namespaces=["team"])
        broad = await create_key(client, tenant_a, scopes=["read"])
        inside = await create_key(client, tenant_a, scopes=["read"], namespaces=["team"])

        refused = await rotate(client, bearer(limited["key"]), broad["id"])
        allowed = await rotate(client, bearer(limited["key"]), inside["id"])

        assert (refused.status_code, refused.json()["code"]) == (403, "forbidden")
        [still] = [k for k in await listed(client, tenant_a.headers) if k["id"] == broad["id"]]
        assert still["prefix"] == broad["prefix"]
        assert allowed.status_code == 200, allowed.text


class TestPagination:
    async def test_pages_cover_every_key_once_newest_first(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = [await create_key(client, tenant_a, name=f"bot {i}", scopes=["read"]) for i in range(7)]

        paged = await listed(client, tenant_a.headers, limit=3)

        ids = [k["id"] for k in paged]
        assert len(ids) == len(set(ids)) == 8  # the tenant's own admin key and the seven
        assert ids[:7] == [k["id"] for k in reversed(made)]
        assert ids == [k["id"] for k in await listed(client, tenant_a.headers, limit=200)]

    async def test_a_limited_admin_gets_full_pages_of_its_keys(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await create_namespace(client, tenant_a, "team")
        limited = await create_key(client, tenant_a, scopes=["admin"], namespaces=["team"])
        mine = [await create_key(client, tenant_a, scopes=["read"], namespaces=["team"]) for _ in range(3)]
        for _ in range(3):
            await create_key(client, tenant_a, scopes=["read"])  # every namespace: beyond it

        first = (await client.get("/v1/keys", params={"limit": 2}, headers=bearer(limited["key"]))).json()
        every = await listed(client, bearer(limited["key"]), limit=2)

        assert len(first["data"]) == 2 and first["next_cursor"] is not None
        assert {k["id"] for k in every} == {limited["id"], *(k["id"] for k in mine)}

    @pytest.mark.parametrize("params", [{"cursor": "not-a-cursor"}, {"limit": 0}, {"limit": 201}])
    async def test_bad_page_parameters_are_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, params: dict[str, Any]
    ) -> None:
        r = await client.get("/v1/keys", params=params, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"


class TestQuota:
    async def test_past_the_plans_api_keys_nothing_is_stored(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"api_keys": 3})
        plain = await create_key(client, tenant_a, scopes=["read"])
        expiring = await create_key(client, tenant_a, scopes=["read"], expires_in_days=1)
        before = await listed(client, tenant_a.headers)

        r = await client.post("/v1/keys", json={"name": "one too many"}, headers=tenant_a.headers)

        assert r.status_code == 403, r.text
        assert (r.json()["code"], r.json()["quota"], r.json()["limit"], r.json()["used"]) == (
            "quota_exceeded",
            "api_keys",
            3,
            3,
        )
        assert await listed(client, tenant_a.headers) == before
        # Revoked and expired keys leave room.
        await revoke(client, tenant_a, plain["id"])
        await create_key(client, tenant_a, scopes=["read"])
        await age_key(api, expiring["id"], "expires_at")
        await create_key(client, tenant_a, scopes=["read"])
        r = await client.post("/v1/keys", json={}, headers=tenant_a.headers)
        assert (r.status_code, r.json()["code"]) == (403, "quota_exceeded")

    async def test_concurrent_creations_never_pass_the_cap(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"api_keys": 3})

        answers = await asyncio.gather(
            *(client.post("/v1/keys", json={"name": f"racer {i}"}, headers=tenant_a.headers) for i in range(6))
        )

        assert sorted(r.status_code for r in answers) == [201, 201, 403, 403, 403, 403]
        assert len(await listed(client, tenant_a.headers)) == 3

    async def test_rotation_needs_no_room(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant) -> None:
        await api.set_tenant_plan(tenant_a.id, "unlimited", {"api_keys": 1})

        r = await client.get("/v1/keys", headers=tenant_a.headers)
        [own] = r.json()["data"]
        rotated = await rotate(client, tenant_a.headers, own["id"])

        assert rotated.status_code == 200, rotated.text
