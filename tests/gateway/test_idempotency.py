"""Idempotency-Key on write routes: a retry with the same key answers with the first response and
writes nothing; a different request under the same key, a request still in flight, a malformed
key and the key-minting route are refused with stable codes; keys are per tenant and expire."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import psycopg
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts

from memvault.api import NamespaceAPI
from memvault.db.urls import DatabaseUrls
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT, request_hash
from tests.conftest import Tenant, make_tenant
from tests.db.conftest import conninfo
from tests.memories.test_router import problem

MEMORIES = "/v1/namespaces/default/memories"


def keyed(t: Tenant, key: str) -> dict[str, str]:
    return {**t.headers, "Idempotency-Key": key}


async def post(client: httpx.AsyncClient, t: Tenant, path: str, body: Any, key: str | None) -> httpx.Response:
    headers = keyed(t, key) if key is not None else t.headers
    return await client.post(path, content=json.dumps(body), headers={**headers, "content-type": "application/json"})


async def count_memories(client: httpx.AsyncClient, t: Tenant) -> int:
    r = await client.get(MEMORIES, params={"limit": 200}, headers=t.headers)
    assert r.status_code == 200, r.text
    return len(r.json()["data"])


class TestReplay:
    async def test_a_retry_answers_with_the_first_response_and_writes_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        body = {"content": "Ana prefers window seats", "type": "preference", "user_id": "ana"}
        first = await post(client, tenant_a, MEMORIES, body, "k-1")
        assert first.status_code == 201, first.text
        assert "idempotent-replayed" not in first.headers
        again = await post(client, tenant_a, MEMORIES, body, "k-1")
        assert again.status_code == 201
        assert again.headers["idempotent-replayed"] == "true"
        assert again.headers["content-type"] == "application/json"
        assert again.json() == first.json()
        assert again.headers["x-request-id"] != first.headers["x-request-id"]
        assert await count_memories(client, tenant_a) == 1

    async def test_without_the_header_every_request_writes(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {"content": "The office is in Porto"}
        for _ in range(2):
            assert (await post(client, tenant_a, MEMORIES, body, None)).status_code == 201
        assert await count_memories(client, tenant_a) == 2

    async def test_a_new_key_is_a_new_request(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {"content": "The office is in Porto"}
        a = await post(client, tenant_a, MEMORIES, body, "k-a")
        b = await post(client, tenant_a, MEMORIES, body, "k-b")
        assert a.json()["id"] != b.json()["id"]

    async def test_an_ingest_replay_keeps_its_status_and_job_location(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        body = {"session_id": "s1", "messages": [{"role": "user", "content": "I moved to Lisbon"}]}
        path = "/v1/namespaces/default/events"
        first = await post(client, tenant_a, path, body, "ingest-1")
        assert first.status_code == 202, first.text
        again = await post(client, tenant_a, path, body, "ingest-1")
        assert again.status_code == 202
        assert again.headers["location"] == first.headers["location"] == f"/v1/jobs/{first.json()['job_id']}"
        assert again.json()["event_ids"] == first.json()["event_ids"]
        r = await client.get("/v1/namespaces/default/sessions/s1", headers=tenant_a.headers)
        assert r.json()["message_count"] == 1


async def _fixtures(client: httpx.AsyncClient, t: Tenant) -> dict[str, str]:
    """Objects the write routes refer to, made without idempotency keys."""
    ns = "/v1/namespaces/default"
    out: dict[str, str] = {}
    for name in ("Ana", "Acme"):
        r = await post(client, t, f"{ns}/entities", {"name": name, "type": "person"}, None)
        out[name] = r.json()["id"]
    out["memory"] = (await post(client, t, f"{ns}/memories", {"content": "Ana works at Acme"}, None)).json()["id"]
    out["trace"] = (await post(client, t, f"{ns}/traces", {"task": "book a flight"}, None)).json()["id"]
    return out


# Every write route that takes an Idempotency-Key: (path, body) with {placeholders} from _fixtures.
WRITES: dict[str, tuple[str, dict[str, Any]]] = {
    "memory": ("/memories", {"content": "Ana likes tea"}),
    "memory batch": ("/memories/batch", {"memories": [{"content": "Ana likes tea"}, {"content": "Ana runs"}]}),
    "promote": ("/memories/{memory}/promote", {}),
    "archive": ("/memories/{memory}/archive", {}),
    "link entities": ("/memories/{memory}/entities", {"entity_ids": ["{Ana}"]}),
    "events": ("/events", {"session_id": "s9", "messages": [{"role": "user", "content": "hello"}]}),
    "entity": ("/entities", {"name": "Lisbon", "type": "location"}),
    "relation": ("/relations", {"source_id": "{Ana}", "type": "works_at", "target_id": "{Acme}"}),
    "trace": ("/traces", {"task": "water the plants"}),
    "trace step": ("/traces/{trace}/steps", {"thought": "check the soil"}),
    "trace complete": ("/traces/{trace}/complete", {"outcome": "booked", "success": True}),
    "forget": ("/forget", {"user_id": "nobody"}),
}


class TestEveryWriteRoute:
    @pytest.mark.parametrize("route", list(WRITES), ids=list(WRITES))
    async def test_replays(self, client: httpx.AsyncClient, tenant_a: Tenant, route: str) -> None:
        ids = await _fixtures(client, tenant_a)
        path, body = WRITES[route]
        url = "/v1/namespaces/default" + path.format(**ids)
        raw = json.dumps(body)
        for name in ("Ana", "Acme"):
            raw = raw.replace(f'"{{{name}}}"', f'"{ids[name]}"')
        body = json.loads(raw)
        first = await post(client, tenant_a, url, body, f"key-{route}")
        assert 200 <= first.status_code < 300, first.text
        again = await post(client, tenant_a, url, body, f"key-{route}")
        assert (again.status_code, again.json()) == (first.status_code, first.json())
        assert again.headers["idempotent-replayed"] == "true"

    async def test_namespace_create_replays(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {"name": f"ns-{uuid.uuid4().hex[:8]}"}
        first = await post(client, tenant_a, "/v1/namespaces", body, "ns-key")
        again = await post(client, tenant_a, "/v1/namespaces", body, "ns-key")
        assert first.status_code == again.status_code == 201
        assert again.json() == first.json()

    async def test_import_replays(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await post(client, tenant_a, MEMORIES, {"content": "Ana likes tea"}, None)
        export = (await client.get("/v1/namespaces/default/export", headers=tenant_a.headers)).content
        await post(client, tenant_a, "/v1/namespaces", {"name": "restored"}, None)
        headers = {**keyed(tenant_a, "import-1"), "content-type": "application/x-ndjson"}
        first = await client.post("/v1/namespaces/restored/import", content=export, headers=headers)
        again = await client.post("/v1/namespaces/restored/import", content=export, headers=headers)
        assert first.status_code == again.status_code == 200, first.text
        assert again.headers["idempotent-replayed"] == "true"
        r = await client.get("/v1/namespaces/restored/memories", headers=tenant_a.headers)
        assert len(r.json()["data"]) == 1


# PATCH and DELETE routes: (method, path, body) with {placeholders} from _fixtures.
CHANGES: dict[str, tuple[str, str, dict[str, Any] | None]] = {
    "memory update": ("PATCH", "/memories/{memory}", {"content": "Ana works at Acme, in Porto"}),
    "memory delete": ("DELETE", "/memories/{memory}", None),
    "entity update": ("PATCH", "/entities/{Ana}", {"description": "a colleague"}),
    "entity delete": ("DELETE", "/entities/{Ana}", None),
    "relation delete": ("DELETE", "/relations/{relation}", None),
    "unlink entity": ("DELETE", "/memories/{memory}/entities/{Ana}", None),
    "trace delete": ("DELETE", "/traces/{trace}", None),
}


class TestPatchAndDelete:
    """A retried PATCH or DELETE whose first answer was lost must get that answer again, not a
    404 for the thing it deleted itself, nor a second change."""

    @pytest.mark.parametrize("route", list(CHANGES), ids=list(CHANGES))
    async def test_replays(self, client: httpx.AsyncClient, tenant_a: Tenant, route: str) -> None:
        ids = await _fixtures(client, tenant_a)
        ns = "/v1/namespaces/default"
        rel = await post(
            client,
            tenant_a,
            f"{ns}/relations",
            {"source_id": ids["Ana"], "type": "knows", "target_id": ids["Acme"]},
            None,
        )
        ids["relation"] = rel.json()["id"]
        link = await post(
            client, tenant_a, f"{ns}/memories/{ids['memory']}/entities", {"entity_ids": [ids["Ana"]]}, None
        )
        assert link.status_code == 200, link.text
        method, path, body = CHANGES[route]
        url, key = ns + path.format(**ids), f"key-{route}"
        content = json.dumps(body) if body is not None else None
        headers = {**keyed(tenant_a, key), "content-type": "application/json"}
        first = await client.request(method, url, content=content, headers=headers)
        assert 200 <= first.status_code < 300, first.text
        again = await client.request(method, url, content=content, headers=headers)
        assert (again.status_code, again.content) == (first.status_code, first.content)
        assert again.headers["idempotent-replayed"] == "true"
        if method == "DELETE":
            # Without the key the same DELETE is a new request, and the thing is gone.
            plain = await client.request(method, url, headers=tenant_a.headers)
            assert plain.status_code == 404, plain.text

    async def test_an_update_is_applied_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        m = (await post(client, tenant_a, MEMORIES, {"content": "Ana lives in Porto"}, None)).json()
        headers = {**keyed(tenant_a, "move"), "content-type": "application/json"}
        for _ in range(2):
            r = await client.patch(f"{MEMORIES}/{m['id']}", json={"content": "Ana lives in Lisbon"}, headers=headers)
            assert r.status_code == 200, r.text
        h = (await client.get(f"{MEMORIES}/{m['id']}/history", headers=tenant_a.headers)).json()
        assert [c["action"] for c in h["changes"]] == ["created", "updated"]

    async def test_namespace_delete_replays(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        name = f"ns-{uuid.uuid4().hex[:8]}"
        assert (await post(client, tenant_a, "/v1/namespaces", {"name": name}, None)).status_code == 201
        for replayed in (False, True):
            r = await client.delete(f"/v1/namespaces/{name}", headers=keyed(tenant_a, "drop-ns"))
            assert r.status_code == 204, r.text
            assert ("idempotent-replayed" in r.headers) is replayed

    async def test_a_key_revocation_replays(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        made = (await client.post("/v1/keys", json={"name": "ci"}, headers=tenant_a.headers)).json()
        first = await client.delete(f"/v1/keys/{made['id']}", headers=keyed(tenant_a, "revoke-ci"))
        again = await client.delete(f"/v1/keys/{made['id']}", headers=keyed(tenant_a, "revoke-ci"))
        assert first.status_code == again.status_code == 200, first.text
        assert again.json() == first.json() and again.headers["idempotent-replayed"] == "true"


# POSTs that only read (a query too large for a URL): repeating them changes nothing.
READ_POSTS = {"/v1/namespaces/{ns}/search", "/v1/namespaces/{ns}/context", "/v1/namespaces/{ns}/traces/search"}


def test_every_write_route_takes_or_refuses_the_header(app: FastAPI) -> None:
    """A new POST/PUT/PATCH/DELETE route under /v1 must say what a retry with Idempotency-Key gets:
    the first answer again (IDEMPOTENT) or a refusal (NOT_IDEMPOTENT). Silently ignoring the key
    would let a client's retry apply a change twice or report 404 for its own delete."""

    def calls(route: Any) -> set[Any]:
        out, todo = set(), [route.dependant]
        while todo:
            d = todo.pop()
            out.add(d.call)
            todo.extend(d.dependencies)
        return out

    undeclared = []
    for route in iter_route_contexts(app.routes):
        if not isinstance(route.original_route, APIRoute) or not route.path_format.startswith("/v1/"):
            continue
        if not set(route.methods) & {"POST", "PUT", "PATCH", "DELETE"} or route.path_format in READ_POSTS:
            continue
        if not calls(route) & {IDEMPOTENT.dependency, NOT_IDEMPOTENT.dependency}:
            undeclared.append(f"{sorted(route.methods)} {route.path_format}")
    assert undeclared == []


class TestRefusals:
    async def test_the_same_key_with_another_body_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        assert (await post(client, tenant_a, MEMORIES, {"content": "one"}, "k")).status_code == 201
        r = await post(client, tenant_a, MEMORIES, {"content": "two"}, "k")
        assert problem(r, 422, "idempotency_key_reused")["field"] == "Idempotency-Key"
        assert await count_memories(client, tenant_a) == 1

    async def test_the_same_key_on_another_route_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        assert (await post(client, tenant_a, MEMORIES, {"content": "one"}, "k")).status_code == 201
        r = await post(client, tenant_a, "/v1/namespaces/default/traces", {"task": "one"}, "k")
        problem(r, 422, "idempotency_key_reused")

    async def test_the_same_key_from_another_api_key_is_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/keys", json={"name": "second"}, headers=tenant_a.headers)
        other = Tenant(tenant_a.id, tenant_a.name, r.json()["key"], tenant_a.namespace)
        assert (await post(client, tenant_a, MEMORIES, {"content": "one"}, "k")).status_code == 201
        problem(await post(client, other, MEMORIES, {"content": "one"}, "k"), 422, "idempotency_key_reused")

    async def test_a_duplicate_while_the_first_runs_is_told_to_wait(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: NamespaceAPI
    ) -> None:
        body = {"content": "Ana likes tea"}
        p = await api.authenticate(tenant_a.key)
        # The first request, claimed but not yet answered, exactly as the gateway claims it.
        digest = request_hash("POST", MEMORIES, json.dumps(body).encode())
        assert await api.claim_idempotency_key(p, "busy", method="POST", path=MEMORIES, request_hash=digest) is None
        r = await post(client, tenant_a, MEMORIES, body, "busy")
        problem(r, 409, "idempotency_in_progress")
        assert await count_memories(client, tenant_a) == 0

    @pytest.mark.parametrize("key", [b"", b"x" * 256, b"cl\xc3\xa9"], ids=["empty", "too long", "not ascii"])
    async def test_a_malformed_key_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant, key: bytes) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}
        r = await client.post(
            MEMORIES, content=b'{"content": "x"}', headers=[*headers.items(), ("Idempotency-Key", key)]
        )
        assert problem(r, 422, "invalid_idempotency_key")["field"] == "Idempotency-Key"
        assert await count_memories(client, tenant_a) == 0

    async def test_255_printable_characters_are_a_key(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        key = "k" * 250 + " ~!@#"
        assert (await post(client, tenant_a, MEMORIES, {"content": "x"}, key)).status_code == 201
        assert (await post(client, tenant_a, MEMORIES, {"content": "x"}, key)).headers["idempotent-replayed"] == "true"

    async def test_creating_an_api_key_refuses_the_header(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        before = len((await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"])
        r = await post(client, tenant_a, "/v1/keys", {"name": "ci"}, "key-1")
        problem(r, 422, "idempotency_not_supported")
        assert len((await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]) == before

    async def test_a_read_only_key_is_refused_before_any_claim(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/keys", json={"name": "ro", "scopes": ["read"]}, headers=tenant_a.headers)
        reader = Tenant(tenant_a.id, tenant_a.name, r.json()["key"], tenant_a.namespace)
        problem(await post(client, reader, MEMORIES, {"content": "x"}, "ro-1"), 403, "forbidden")
        # Nothing was left claimed: the admin key may use the same key for its own request.
        assert (await post(client, tenant_a, MEMORIES, {"content": "x"}, "ro-1")).status_code == 201


class TestFailures:
    async def test_a_failed_request_frees_its_key(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = {"name": f"ns-{uuid.uuid4().hex[:8]}"}
        assert (await post(client, tenant_a, "/v1/namespaces", body, None)).status_code == 201
        problem(await post(client, tenant_a, "/v1/namespaces", body, "nk"), 409, "namespace_exists")
        r = await client.delete(f"/v1/namespaces/{body['name']}", headers=tenant_a.headers)
        assert r.status_code == 204
        again = await post(client, tenant_a, "/v1/namespaces", body, "nk")
        assert again.status_code == 201, again.text
        assert "idempotent-replayed" not in again.headers

    async def test_an_invalid_body_frees_its_key(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        problem(await post(client, tenant_a, MEMORIES, {"content": ""}, "v"), 422, "validation_error")
        problem(await post(client, tenant_a, MEMORIES, {"content": ""}, "v"), 422, "validation_error")


class TestExpiry:
    async def test_a_key_older_than_a_day_is_a_new_request(
        self, client: httpx.AsyncClient, tenant_a: Tenant, pg_urls: DatabaseUrls
    ) -> None:
        first = await post(client, tenant_a, MEMORIES, {"content": "Ana likes tea"}, "old")
        async with await psycopg.AsyncConnection.connect(conninfo(pg_urls.owner), autocommit=True) as owner:
            await owner.execute(
                "UPDATE idempotency_keys SET created_at = now() - interval '25 hours' WHERE tenant_id = %s",
                (tenant_a.id,),
            )
            again = await post(client, tenant_a, MEMORIES, {"content": "Ana likes coffee"}, "old")
            assert again.status_code == 201, again.text
            assert again.json()["id"] != first.json()["id"]
            # The expired claim is gone; only the fresh one is kept.
            cur = await owner.execute("SELECT count(*) FROM idempotency_keys WHERE tenant_id = %s", (tenant_a.id,))
            assert (await cur.fetchone()) == (1,)


class TestTenancy:
    async def test_the_same_key_in_two_tenants_is_two_requests(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        a = await post(client, tenant_a, MEMORIES, {"content": "Ana likes tea"}, "shared")
        b = await post(client, tenant_b, MEMORIES, {"content": "Bo likes chess"}, "shared")
        assert a.status_code == b.status_code == 201
        assert "idempotent-replayed" not in b.headers
        b2 = await post(client, tenant_b, MEMORIES, {"content": "Bo likes chess"}, "shared")
        assert b2.json() == b.json()
        assert await count_memories(client, tenant_a) == await count_memories(client, tenant_b) == 1

    async def test_another_tenant_cannot_replay_or_block_a_key(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: NamespaceAPI
    ) -> None:
        body = {"content": "Ana likes tea"}
        first = await post(client, tenant_a, MEMORIES, body, "mine")
        other = await make_tenant(api, "c")
        r = await post(client, other, MEMORIES, body, "mine")
        assert r.status_code == 201 and "idempotent-replayed" not in r.headers
        assert r.json()["id"] != first.json()["id"]
