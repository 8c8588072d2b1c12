"""API keys over REST: their lifecycle, and the bearer check, scopes and namespace limits that
every protected route applies."""

from __future__ import annotations

import hashlib
import re
import secrets
import string
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest
from fastapi.routing import iter_route_contexts

from memvault.app import create_app
from memvault.config import Settings
from tests.conftest import Tenant

# /mcp checks its bearer in its own endpoint and speaks JSON-RPC, not REST: tests/mcp covers it.
MCP_ROUTES = {
    (method, f"/mcp{profile}{slash}")
    for method in ("GET", "POST", "DELETE")
    for profile in ("", "/core", "/extended")
    for slash in ("", "/")
}

# The operator's scrape: no API key opens it; a token of its own or a client on this machine does
# (docs/operations.md, "Metrics"), and tests/observability/test_metrics.py covers both.
OPERATOR_ROUTES = {("GET", "/metrics")}


# The dashboard's pages sign in by a session cookie, not a key: tests/dashboard/test_routes.py
# holds every one of them to that (no session: a GET goes to sign-in, a POST gets 401).
def _dashboard(route: tuple[str, str]) -> bool:
    return route[1] == "/dashboard" or route[1].startswith("/dashboard/")


# Routes anyone may call. Everything else the app serves must be in REQUIRED_SCOPE.
PUBLIC = {
    ("GET", "/healthz"),
    ("GET", "/readyz"),
    ("GET", "/v1/status"),
    # The status page and its history reveal nothing about tenants (tests/status, tests/browser).
    ("GET", "/v1/status/history"),
    ("GET", "/status"),
    ("GET", "/static/{name}"),
    ("GET", "/docs"),
    ("GET", "/docs/oauth2-redirect"),
    ("GET", "/openapi.json"),
    ("GET", "/redoc"),
    # OAuth: discovery and the authorization server's own endpoints (tests/oauth).
    ("GET", "/.well-known/oauth-protected-resource"),
    ("GET", "/.well-known/oauth-protected-resource/mcp"),
    ("GET", "/.well-known/oauth-protected-resource/mcp/core"),
    ("GET", "/.well-known/oauth-protected-resource/mcp/extended"),
    ("GET", "/.well-known/oauth-authorization-server"),
    ("GET", "/oauth/jwks.json"),
    ("GET", "/oauth/authorize"),
    ("POST", "/oauth/authorize"),
    ("POST", "/oauth/register"),
    ("POST", "/oauth/token"),
    ("POST", "/oauth/revoke"),
    # Self-serve sign-up and invitations: the signed link is the credential (tests/members).
    ("POST", "/v1/signup"),
    ("POST", "/v1/signup/verify"),
    ("POST", "/v1/signup/resend"),
    ("POST", "/v1/invitations/accept"),
    ("GET", "/signup"),
    ("POST", "/signup"),
    ("GET", "/signup/verify"),
    ("POST", "/signup/verify"),
    ("GET", "/invitations/accept"),
    ("POST", "/invitations/accept"),
    *(
        ("OPTIONS", path)
        for path in (
            "/.well-known/oauth-protected-resource",
            "/.well-known/oauth-protected-resource/mcp",
            "/.well-known/oauth-protected-resource/mcp/core",
            "/.well-known/oauth-protected-resource/mcp/extended",
            "/.well-known/oauth-authorization-server",
            "/oauth/jwks.json",
            "/oauth/register",
            "/oauth/token",
            "/oauth/revoke",
        )
    ),
}

MEMORY = "/v1/namespaces/{ns}/memories/{memory_id}"

# The scope each protected route needs (docs/api.md, "Routes").
REQUIRED_SCOPE = {
    ("POST", "/v1/namespaces"): "admin",
    ("GET", "/v1/namespaces"): "read",
    ("GET", "/v1/namespaces/{ns}"): "read",
    ("PATCH", "/v1/namespaces/{ns}"): "admin",
    ("DELETE", "/v1/namespaces/{ns}"): "admin",
    ("POST", "/v1/namespaces/{ns}/memories"): "write",
    ("POST", "/v1/namespaces/{ns}/memories/batch"): "write",
    ("GET", "/v1/namespaces/{ns}/memories"): "read",
    ("GET", MEMORY): "read",
    ("PATCH", MEMORY): "write",
    ("DELETE", MEMORY): "write",
    ("POST", "/v1/namespaces/{ns}/search"): "read",
    ("POST", "/v1/namespaces/{ns}/context"): "read",
    ("GET", f"{MEMORY}/history"): "read",
    ("POST", f"{MEMORY}/promote"): "write",
    ("POST", f"{MEMORY}/archive"): "write",
    ("POST", f"{MEMORY}/entities"): "write",
    ("DELETE", f"{MEMORY}/entities/{{entity_id}}"): "write",
    ("POST", "/v1/namespaces/{ns}/entities"): "write",
    ("GET", "/v1/namespaces/{ns}/entities"): "read",
    ("GET", "/v1/namespaces/{ns}/entities/{entity_id}"): "read",
    ("PATCH", "/v1/namespaces/{ns}/entities/{entity_id}"): "write",
    ("DELETE", "/v1/namespaces/{ns}/entities/{entity_id}"): "write",
    ("POST", "/v1/namespaces/{ns}/relations"): "write",
    ("GET", "/v1/namespaces/{ns}/relations"): "read",
    ("DELETE", "/v1/namespaces/{ns}/relations/{relation_id}"): "write",
    ("POST", "/v1/namespaces/{ns}/events"): "write",
    ("GET", "/v1/namespaces/{ns}/sessions"): "read",
    ("GET", "/v1/namespaces/{ns}/sessions/{session_id:path}"): "read",
    ("GET", "/v1/namespaces/{ns}/sessions/{session_id:path}/messages"): "read",
    ("GET", "/v1/namespaces/{ns}/sessions/{session_id:path}/observations"): "read",
    ("GET", "/v1/namespaces/{ns}/graph"): "read",
    ("GET", "/v1/namespaces/{ns}/graph/entities"): "read",
    ("GET", "/v1/namespaces/{ns}/graph/paths"): "read",
    ("GET", "/v1/namespaces/{ns}/graph/related"): "read",
    ("POST", "/v1/namespaces/{ns}/preferences"): "write",
    ("POST", "/v1/namespaces/{ns}/facts"): "write",
    ("POST", "/v1/namespaces/{ns}/contradictions"): "write",
    ("GET", "/v1/namespaces/{ns}/contradictions"): "read",
    ("POST", "/v1/namespaces/{ns}/contradictions/resolve"): "write",
    ("POST", "/v1/namespaces/{ns}/contradictions/{contradiction_id}/resolve"): "write",
    ("POST", "/v1/namespaces/{ns}/traces"): "write",
    ("GET", "/v1/namespaces/{ns}/traces"): "read",
    ("POST", "/v1/namespaces/{ns}/traces/search"): "read",
    ("GET", "/v1/namespaces/{ns}/traces/{trace_id}"): "read",
    ("DELETE", "/v1/namespaces/{ns}/traces/{trace_id}"): "write",
    ("POST", "/v1/namespaces/{ns}/traces/{trace_id}/steps"): "write",
    ("POST", "/v1/namespaces/{ns}/traces/{trace_id}/complete"): "write",
    ("POST", "/v1/namespaces/{ns}/forget"): "write",
    ("GET", "/v1/namespaces/{ns}/export"): "read",
    ("POST", "/v1/namespaces/{ns}/import"): "write",
    ("POST", "/v1/keys"): "admin",
    ("GET", "/v1/keys"): "admin",
    ("POST", "/v1/keys/{key_id}/rotate"): "admin",
    ("DELETE", "/v1/keys/{key_id}"): "admin",
    ("GET", "/v1/audit"): "admin",
    ("GET", "/v1/jobs"): "read",
    ("GET", "/v1/jobs/{job_id}"): "read",
    ("POST", "/v1/jobs/{job_id}/cancel"): "write",
    ("POST", "/v1/namespaces/{ns}/organize"): "write",
    ("POST", "/v1/users"): "admin",
    ("GET", "/v1/users"): "admin",
    ("POST", "/v1/users/{user_id}/disable"): "admin",
    ("GET", "/v1/account"): "admin",
    ("GET", "/v1/account/usage"): "read",
    ("DELETE", "/v1/account/grants/{grant_id}"): "admin",
    ("GET", "/v1/members"): "admin",
    ("PATCH", "/v1/members/{user_id}"): "admin",
    ("DELETE", "/v1/members/{user_id}"): "admin",
    ("POST", "/v1/members/invitations"): "admin",
    ("GET", "/v1/members/invitations"): "admin",
    ("DELETE", "/v1/members/invitations/{invitation_id}"): "admin",
    ("POST", "/v1/webhooks"): "admin",
    ("GET", "/v1/webhooks"): "admin",
    ("GET", "/v1/webhooks/{endpoint_id}"): "admin",
    ("PATCH", "/v1/webhooks/{endpoint_id}"): "admin",
    ("DELETE", "/v1/webhooks/{endpoint_id}"): "admin",
    ("POST", "/v1/webhooks/{endpoint_id}/rotate"): "admin",
    ("GET", "/v1/webhooks/{endpoint_id}/deliveries"): "admin",
    ("POST", "/v1/webhooks/{endpoint_id}/replay"): "admin",
}


def _served_routes() -> list[tuple[str, str]]:
    # Routes are fixed when the app is built; the lifespan (database, model) is not needed to list them.
    app = create_app(Settings(_env_file=None))
    served = {
        (method, ctx.path)
        for ctx in iter_route_contexts(app.routes)
        if ctx.path is not None
        for method in ctx.methods or ()
        if method != "HEAD"
    }
    return sorted(r for r in served - PUBLIC - MCP_ROUTES - OPERATOR_ROUTES if not _dashboard(r))


PROTECTED = _served_routes()
ROUTE_IDS = [f"{m} {p}" for m, p in PROTECTED]


def _of_scope(*scopes: str) -> list[tuple[str, str]]:
    return [r for r in PROTECTED if REQUIRED_SCOPE.get(r) in scopes]


def _body(route: tuple[str, str]) -> dict[str, Any] | None:
    """A valid body for the route, so only the credentials decide the answer."""
    return {
        ("POST", "/v1/namespaces"): {"name": f"ns-{uuid.uuid4().hex[:8]}"},
        ("POST", "/v1/namespaces/{ns}/memories"): {"content": "The user's cat is called Miso"},
        ("POST", "/v1/namespaces/{ns}/memories/batch"): {"memories": [{"content": "The user lives in Lisbon"}]},
        ("PATCH", MEMORY): {"importance": 0.9},
        ("POST", "/v1/namespaces/{ns}/search"): {"query": "pets"},
        ("POST", "/v1/namespaces/{ns}/context"): {"query": "pets"},
        ("POST", "/v1/keys"): {"name": "made in a test", "scopes": ["read"]},
        ("POST", "/v1/webhooks"): {"url": "https://hooks.example.com/in", "events": ["memory.created"]},
        ("PATCH", "/v1/webhooks/{endpoint_id}"): {"description": "changed"},
        ("POST", "/v1/webhooks/{endpoint_id}/replay"): {"since": "2026-01-01T00:00:00Z"},
        ("POST", "/v1/users"): {"email": f"u-{uuid.uuid4().hex[:12]}@example.com", "password": "correct horse"},
        ("POST", "/v1/members/invitations"): {"email": f"i-{uuid.uuid4().hex[:12]}@example.com"},
        ("PATCH", "/v1/members/{user_id}"): {"role": "viewer"},
        ("POST", "/v1/namespaces/{ns}/entities"): {"name": f"Entity {uuid.uuid4().hex[:8]}", "type": "person"},
        ("PATCH", "/v1/namespaces/{ns}/entities/{entity_id}"): {"description": "changed"},
        ("POST", f"{MEMORY}/entities"): {"entity_ids": [str(uuid.uuid4())]},
        ("POST", "/v1/namespaces/{ns}/relations"): {
            "source_id": str(uuid.uuid4()),
            "type": "knows",
            "target_id": str(uuid.uuid4()),
        },
        ("POST", "/v1/namespaces/{ns}/events"): {
            "session_id": "s1",
            "messages": [{"role": "user", "content": "hello"}],
        },
        ("POST", "/v1/namespaces/{ns}/traces"): {"task": "water the plants"},
        ("POST", "/v1/namespaces/{ns}/traces/search"): {"query": "plants"},
        ("POST", "/v1/namespaces/{ns}/traces/{trace_id}/steps"): {"thought": "check soil"},
        ("POST", "/v1/namespaces/{ns}/traces/{trace_id}/complete"): {"outcome": "done", "success": True},
        ("POST", "/v1/namespaces/{ns}/forget"): {"user_id": "nobody"},
        ("POST", "/v1/namespaces/{ns}/organize"): {"jobs": ["promote"], "budget_ms": 1000},
        ("POST", "/v1/namespaces/{ns}/preferences"): {"category": "seating", "preference": "window seats"},
        ("POST", "/v1/namespaces/{ns}/facts"): {"subject": "Ana", "predicate": "lives in", "object": "Lisbon"},
        # Another memory the test does not create: past authorisation, its 404.
        ("POST", "/v1/namespaces/{ns}/contradictions"): {"memory_id": str(uuid.uuid4()), "other_id": str(uuid.uuid4())},
        ("POST", "/v1/namespaces/{ns}/contradictions/resolve"): {
            "memory_id": str(uuid.uuid4()),
            "other_id": str(uuid.uuid4()),
            "resolution": "keep_both",
        },
        ("POST", "/v1/namespaces/{ns}/contradictions/{contradiction_id}/resolve"): {"resolution": "keep_both"},
    }.get(route)


def _query(route: tuple[str, str]) -> dict[str, str] | None:
    """The query parameters a route requires (entities the test does not create: their 404)."""
    return {
        ("GET", "/v1/namespaces/{ns}/graph/entities"): {"name": "Ana"},
        ("GET", "/v1/namespaces/{ns}/graph/paths"): {"source": str(uuid.uuid4()), "target": str(uuid.uuid4())},
        ("GET", "/v1/namespaces/{ns}/graph/related"): {"entity": str(uuid.uuid4())},
    }.get(route)


async def call(
    client: httpx.AsyncClient,
    route: tuple[str, str],
    headers: dict[str, str],
    *,
    ns: str = "default",
    memory_id: uuid.UUID | None = None,
    key_id: uuid.UUID | None = None,
) -> httpx.Response:
    method, path = route
    known = {"ns": ns, "memory_id": memory_id, "key_id": key_id, "session_id": "s1"}
    url = re.sub(r"\{(\w+)(?::\w+)?\}", lambda m: str(known.get(m[1]) or uuid.uuid4()), path)
    return await client.request(method, url, json=_body(route), params=_query(route), headers=headers)


def assert_allowed(r: httpx.Response, route: tuple[str, str]) -> None:
    """The key got past authorisation. Routes naming an object the test does not create (an
    entity, a trace, a session) answer 404 for it; an import of an empty body is 422."""
    ours = {"ns", "memory_id", "key_id"}
    others = set(re.findall(r"\{(\w+)", route[1])) - ours
    if (
        others
        or route[1].endswith("/memories/{memory_id}/entities")
        or (route[0:1] == ("POST",) and route[1].endswith(("/relations", "/contradictions", "/contradictions/resolve")))
        or route in {("GET", "/v1/namespaces/{ns}/graph/paths"), ("GET", "/v1/namespaces/{ns}/graph/related")}
    ):
        assert r.status_code in (200, 201, 204) or (r.status_code == 404 and r.json()["code"].endswith("_not_found")), (
            r.text
        )
    elif route[1].endswith("/import"):
        assert r.status_code == 422 and r.json()["code"] == "import_invalid", r.text
    else:
        assert r.status_code in (200, 201, 202, 204), r.text


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


async def create_key(client: httpx.AsyncClient, admin: Tenant, **body: Any) -> dict[str, Any]:
    r = await client.post("/v1/keys", json=body, headers=admin.headers)
    assert r.status_code == 201, r.text
    return r.json()


async def revoke(client: httpx.AsyncClient, admin: Tenant, key_id: str) -> httpx.Response:
    r = await client.delete(f"/v1/keys/{key_id}", headers=admin.headers)
    assert r.status_code == 200, r.text
    return r


async def store(client: httpx.AsyncClient, headers: dict[str, str], content: str, ns: str = "default") -> str:
    r = await client.post(f"/v1/namespaces/{ns}/memories", json={"content": content}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()["id"]


async def create_namespace(client: httpx.AsyncClient, admin: Tenant, name: str) -> None:
    r = await client.post("/v1/namespaces", json={"name": name}, headers=admin.headers)
    assert r.status_code == 201, r.text


def assert_unauthenticated(r: httpx.Response, code: str) -> None:
    assert r.status_code == 401, r.text
    assert r.headers["content-type"].startswith("application/problem+json")
    assert r.json()["code"] == code
    assert r.headers["www-authenticate"].startswith("Bearer")


def unknown_key() -> str:
    alphabet = string.ascii_letters + string.digits
    return "mv_" + "".join(secrets.choice(alphabet) for _ in range(40))


class TestEveryRouteIsClassified:
    def test_each_protected_route_has_a_required_scope(self) -> None:
        # A new route fails here until its scope is decided, and then every test below covers it.
        assert set(PROTECTED) == set(REQUIRED_SCOPE)


class TestCreateKey:
    async def test_returns_the_key_once_with_its_prefix(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, name="ingest bot", scopes=["read", "write"])

        key = created["key"]
        assert key.startswith("mv_") and len(key) == 43
        assert created["prefix"] == key[:15]
        assert created["name"] == "ingest bot"
        assert created["scopes"] == ["read", "write"]
        assert created["namespaces"] is None
        assert created["revoked_at"] is None
        assert created["last_used_at"] is None

    async def test_new_key_authenticates(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, scopes=["read"])

        r = await client.get("/v1/namespaces", headers=bearer(created["key"]))

        assert r.status_code == 200, r.text
        assert [n["name"] for n in r.json()] == ["default"]

    async def test_each_key_is_different(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        first = await create_key(client, tenant_a)
        second = await create_key(client, tenant_a)

        assert first["key"] != second["key"]
        assert first["prefix"] != second["prefix"]

    @pytest.mark.parametrize(
        "scopes",
        [["superuser"], ["read", "owner"], [], "admin", ["READ"], None],
        ids=["unknown", "one-unknown", "empty", "not-a-list", "wrong-case", "null"],
    )
    async def test_invalid_scopes_are_422(self, client: httpx.AsyncClient, tenant_a: Tenant, scopes: Any) -> None:
        r = await client.post("/v1/keys", json={"scopes": scopes}, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"
        assert r.json()["field"].startswith("scopes")

    async def test_default_namespace_outside_the_allow_list_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        body = {"scopes": ["read"], "namespaces": ["default"], "default_namespace": "elsewhere"}
        r = await client.post("/v1/keys", json=body, headers=tenant_a.headers)

        assert r.status_code == 422, r.text
        assert r.json()["code"] == "validation_error"

    async def test_invalid_scopes_create_no_key(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        before = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]

        await client.post("/v1/keys", json={"scopes": ["root"]}, headers=tenant_a.headers)

        after = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]
        assert [k["id"] for k in after] == [k["id"] for k in before]


class TestListKeys:
    async def test_shows_prefix_but_never_the_secret_or_its_hash(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        created = await create_key(client, tenant_a, name="listed")
        raw = created["key"]

        r = await client.get("/v1/keys", headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        listed = {k["id"]: k for k in r.json()["data"]}
        assert listed[created["id"]]["prefix"] == raw[:15]
        assert "key" not in listed[created["id"]]
        for k in listed.values():
            assert "secret_hash" not in k
        for secret in (raw, raw[15:], hashlib.sha256(raw.encode()).hexdigest(), tenant_a.key):
            assert secret not in r.text

    async def test_lists_the_tenants_keys(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, name="second")

        r = await client.get("/v1/keys", headers=tenant_a.headers)

        # The admin key made with the tenant, and the new one.
        assert sorted(k["name"] for k in r.json()["data"]) == ["admin (created with the tenant)", "second"]
        assert created["id"] in {k["id"] for k in r.json()["data"]}


class TestLastUsed:
    async def test_set_after_the_key_is_used(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, scopes=["read"])
        before = datetime.now(UTC)

        r = await client.get("/v1/namespaces", headers=bearer(created["key"]))
        assert r.status_code == 200, r.text

        keys = {k["id"]: k for k in (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]}
        used_at = keys[created["id"]]["last_used_at"]
        assert used_at is not None
        assert abs(datetime.fromisoformat(used_at) - before) < timedelta(seconds=30)

    async def test_unset_while_the_key_is_unused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, scopes=["read"])

        keys = {k["id"]: k for k in (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]}

        assert keys[created["id"]]["last_used_at"] is None


class TestRevokeKey:
    async def test_revoked_key_is_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a, scopes=["read"])
        assert (await client.get("/v1/namespaces", headers=bearer(created["key"]))).status_code == 200

        r = await revoke(client, tenant_a, created["id"])

        assert r.json()["id"] == created["id"]
        assert r.json()["revoked_at"] is not None
        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(created["key"])), "api_key_revoked")

    async def test_listing_shows_it_revoked(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a)

        await revoke(client, tenant_a, created["id"])

        keys = {k["id"]: k for k in (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]}
        assert keys[created["id"]]["revoked_at"] is not None

    async def test_other_keys_keep_working(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        kept = await create_key(client, tenant_a, scopes=["read"])
        dropped = await create_key(client, tenant_a, scopes=["read"])

        await revoke(client, tenant_a, dropped["id"])

        assert (await client.get("/v1/namespaces", headers=bearer(kept["key"]))).status_code == 200
        assert (await client.get("/v1/namespaces", headers=tenant_a.headers)).status_code == 200

    async def test_revoking_twice_is_harmless(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        created = await create_key(client, tenant_a)
        first = await revoke(client, tenant_a, created["id"])

        second = await revoke(client, tenant_a, created["id"])

        assert second.json()["revoked_at"] == first.json()["revoked_at"]

    async def test_unknown_id_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.delete(f"/v1/keys/{uuid.uuid4()}", headers=tenant_a.headers)

        assert r.status_code == 404, r.text
        assert r.json()["code"] == "api_key_not_found"


@pytest.mark.parametrize("route", PROTECTED, ids=ROUTE_IDS)
class TestEveryProtectedRouteRefusesBadCredentials:
    async def test_missing_authorization(self, client: httpx.AsyncClient, route: tuple[str, str]) -> None:
        assert_unauthenticated(await call(client, route, {}), "missing_credentials")

    async def test_other_auth_scheme(self, client: httpx.AsyncClient, tenant_a: Tenant, route: tuple[str, str]) -> None:
        r = await call(client, route, {"Authorization": f"Basic {tenant_a.key}"})

        assert_unauthenticated(r, "missing_credentials")

    async def test_malformed_token(self, client: httpx.AsyncClient, route: tuple[str, str]) -> None:
        assert_unauthenticated(await call(client, route, bearer("not-a-memvault-key")), "invalid_api_key")

    async def test_unknown_key(self, client: httpx.AsyncClient, tenant_a: Tenant, route: tuple[str, str]) -> None:
        # Well formed, never issued; tenant_a exists so the database is not empty.
        assert_unauthenticated(await call(client, route, bearer(unknown_key())), "invalid_api_key")

    async def test_revoked_key(self, client: httpx.AsyncClient, tenant_a: Tenant, route: tuple[str, str]) -> None:
        created = await create_key(client, tenant_a, scopes=["read", "write", "admin"])
        await revoke(client, tenant_a, created["id"])

        assert_unauthenticated(await call(client, route, bearer(created["key"])), "api_key_revoked")


class TestMalformedTokens:
    @pytest.mark.parametrize(
        "token",
        [
            "mv_short",
            "mv_" + "!" * 40,
            "sk_" + "a" * 40,
            "mv_" + "a" * 41,
            "mv_" + "a" * 39,
        ],
        ids=["short", "bad-alphabet", "other-prefix", "too-long", "too-short"],
    )
    async def test_refused_as_invalid(self, client: httpx.AsyncClient, token: str) -> None:
        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(token)), "invalid_api_key")

    async def test_real_key_with_a_changed_secret(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # Same lookup prefix, different secret: the hash check must refuse it.
        tampered = tenant_a.key[:-1] + ("a" if tenant_a.key[-1] != "a" else "b")

        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(tampered)), "invalid_api_key")

    async def test_empty_bearer(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/namespaces", headers={"Authorization": "Bearer"})

        assert_unauthenticated(r, "missing_credentials")


@pytest.fixture
async def memory_id(client: httpx.AsyncClient, tenant_a: Tenant) -> uuid.UUID:
    return uuid.UUID(await store(client, tenant_a.headers, "The user prefers aisle seats"))


class TestReadKey:
    @pytest.mark.parametrize("route", _of_scope("write", "admin"), ids=lambda r: f"{r[0]} {r[1]}")
    async def test_refused_on_write_and_admin_routes(
        self, client: httpx.AsyncClient, tenant_a: Tenant, memory_id: uuid.UUID, route: tuple[str, str]
    ) -> None:
        key = await create_key(client, tenant_a, scopes=["read"])

        r = await call(client, route, bearer(key["key"]), memory_id=memory_id)

        assert r.status_code == 403, r.text
        assert r.json()["code"] == "forbidden"
        assert r.json()["required_scope"] == REQUIRED_SCOPE[route]

    @pytest.mark.parametrize("route", _of_scope("read"), ids=lambda r: f"{r[0]} {r[1]}")
    async def test_allowed_on_read_routes(
        self, client: httpx.AsyncClient, tenant_a: Tenant, memory_id: uuid.UUID, route: tuple[str, str]
    ) -> None:
        key = await create_key(client, tenant_a, scopes=["read"])

        r = await call(client, route, bearer(key["key"]), memory_id=memory_id)

        assert_allowed(r, route)

    async def test_refused_write_changes_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, memory_id: uuid.UUID
    ) -> None:
        key = await create_key(client, tenant_a, scopes=["read"])

        await client.delete(f"/v1/namespaces/default/memories/{memory_id}", headers=bearer(key["key"]))

        r = await client.get(f"/v1/namespaces/default/memories/{memory_id}", headers=tenant_a.headers)
        assert r.status_code == 200, r.text


class TestWriteKey:
    @pytest.mark.parametrize("route", _of_scope("admin"), ids=lambda r: f"{r[0]} {r[1]}")
    async def test_refused_on_admin_routes(
        self, client: httpx.AsyncClient, tenant_a: Tenant, route: tuple[str, str]
    ) -> None:
        key = await create_key(client, tenant_a, scopes=["read", "write"])

        r = await call(client, route, bearer(key["key"]))

        assert r.status_code == 403, r.text
        assert r.json()["code"] == "forbidden"
        assert r.json()["required_scope"] == "admin"

    @pytest.mark.parametrize("route", _of_scope("read", "write"), ids=lambda r: f"{r[0]} {r[1]}")
    async def test_allowed_on_read_and_write_routes(
        self, client: httpx.AsyncClient, tenant_a: Tenant, memory_id: uuid.UUID, route: tuple[str, str]
    ) -> None:
        key = await create_key(client, tenant_a, scopes=["write"])

        r = await call(client, route, bearer(key["key"]), memory_id=memory_id)

        assert_allowed(r, route)


# What a key limited to one namespace tries in another: every read and write on memories.
OUTSIDE_CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
    ("GET", "/v1/namespaces/{ns}", None),
    ("GET", "/v1/namespaces/{ns}/memories", None),
    ("GET", MEMORY, None),
    ("POST", "/v1/namespaces/{ns}/memories", {"content": "The user drinks tea"}),
    ("POST", "/v1/namespaces/{ns}/memories/batch", {"memories": [{"content": "The user drinks tea"}]}),
    ("PATCH", MEMORY, {"content": "overwritten"}),
    ("DELETE", MEMORY, None),
    ("POST", "/v1/namespaces/{ns}/search", {"query": "tea"}),
]


class TestNamespaceLimitedKey:
    @pytest.fixture
    async def spaces(self, client: httpx.AsyncClient, tenant_a: Tenant) -> tuple[str, str]:
        allowed, other = f"x-{uuid.uuid4().hex[:8]}", f"y-{uuid.uuid4().hex[:8]}"
        await create_namespace(client, tenant_a, allowed)
        await create_namespace(client, tenant_a, other)
        return allowed, other

    @pytest.fixture
    async def limited(self, client: httpx.AsyncClient, tenant_a: Tenant, spaces: tuple[str, str]) -> dict[str, str]:
        key = await create_key(client, tenant_a, scopes=["read", "write"], namespaces=[spaces[0]])
        return bearer(key["key"])

    @pytest.mark.parametrize(("method", "path", "body"), OUTSIDE_CALLS, ids=[f"{m} {p}" for m, p, _ in OUTSIDE_CALLS])
    async def test_refused_in_other_namespaces(
        self,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        spaces: tuple[str, str],
        limited: dict[str, str],
        method: str,
        path: str,
        body: dict[str, Any] | None,
    ) -> None:
        other = spaces[1]
        memory_id = await store(client, tenant_a.headers, "The user drinks coffee", ns=other)

        r = await client.request(method, path.format(ns=other, memory_id=memory_id), json=body, headers=limited)

        assert r.status_code == 403, r.text
        assert r.json()["code"] == "forbidden"
        still = await client.get(f"/v1/namespaces/{other}/memories/{memory_id}", headers=tenant_a.headers)
        assert still.json()["content"] == "The user drinks coffee"

    async def test_refused_in_the_tenants_default_namespace(
        self, client: httpx.AsyncClient, limited: dict[str, str]
    ) -> None:
        r = await client.get("/v1/namespaces/default/memories", headers=limited)

        assert r.status_code == 403, r.text

    async def test_works_in_its_namespace(
        self, client: httpx.AsyncClient, spaces: tuple[str, str], limited: dict[str, str]
    ) -> None:
        allowed = spaces[0]
        memory_id = await store(client, limited, "The user drinks tea", ns=allowed)

        r = await client.get(f"/v1/namespaces/{allowed}/memories/{memory_id}", headers=limited)

        assert r.status_code == 200, r.text

    async def test_lists_only_its_namespaces(
        self, client: httpx.AsyncClient, spaces: tuple[str, str], limited: dict[str, str]
    ) -> None:
        r = await client.get("/v1/namespaces", headers=limited)

        assert r.status_code == 200, r.text
        assert [n["name"] for n in r.json()] == [spaces[0]]


class TestNamespaceLimitedAdminKey:
    @pytest.fixture
    async def spaces(self, client: httpx.AsyncClient, tenant_a: Tenant) -> tuple[str, str]:
        allowed, other = f"x-{uuid.uuid4().hex[:8]}", f"y-{uuid.uuid4().hex[:8]}"
        await create_namespace(client, tenant_a, allowed)
        await create_namespace(client, tenant_a, other)
        return allowed, other

    @pytest.fixture
    async def limited_admin(
        self, client: httpx.AsyncClient, tenant_a: Tenant, spaces: tuple[str, str]
    ) -> dict[str, str]:
        key = await create_key(client, tenant_a, scopes=["admin"], namespaces=[spaces[0]])
        return bearer(key["key"])

    async def test_cannot_mint_an_unlimited_key(
        self, client: httpx.AsyncClient, tenant_a: Tenant, limited_admin: dict[str, str]
    ) -> None:
        before = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]

        r = await client.post("/v1/keys", json={"scopes": ["read", "write", "admin"]}, headers=limited_admin)

        assert r.status_code == 403, r.text
        assert r.json()["code"] == "forbidden"
        after = (await client.get("/v1/keys", headers=tenant_a.headers)).json()["data"]
        assert len(after) == len(before)

    async def test_cannot_mint_a_key_for_other_namespaces(
        self, client: httpx.AsyncClient, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        r = await client.post("/v1/keys", json={"namespaces": list(spaces)}, headers=limited_admin)

        assert r.status_code == 403, r.text

    async def test_can_mint_a_key_within_its_namespaces(
        self, client: httpx.AsyncClient, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        r = await client.post("/v1/keys", json={"scopes": ["read"], "namespaces": [spaces[0]]}, headers=limited_admin)

        assert r.status_code == 201, r.text
        assert r.json()["namespaces"] == [spaces[0]]

    async def test_lists_only_keys_within_its_namespaces(
        self, client: httpx.AsyncClient, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        r = await client.get("/v1/keys", headers=limited_admin)

        assert r.status_code == 200, r.text
        # Its own key only: the tenant's unlimited admin key is beyond it.
        assert [k["namespaces"] for k in r.json()["data"]] == [[spaces[0]]]

    async def test_cannot_revoke_a_key_that_reaches_further(
        self, client: httpx.AsyncClient, tenant_a: Tenant, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        wider = await create_key(client, tenant_a, namespaces=list(spaces))
        unlimited = await create_key(client, tenant_a)

        for key in (wider, unlimited):
            r = await client.delete(f"/v1/keys/{key['id']}", headers=limited_admin)

            assert r.status_code == 403, r.text
            assert (await client.get("/v1/namespaces", headers=bearer(key["key"]))).status_code == 200
        assert (await client.get("/v1/namespaces", headers=tenant_a.headers)).status_code == 200

    async def test_can_revoke_a_key_within_its_namespaces(
        self, client: httpx.AsyncClient, tenant_a: Tenant, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        narrow = await create_key(client, tenant_a, namespaces=[spaces[0]])

        r = await client.delete(f"/v1/keys/{narrow['id']}", headers=limited_admin)

        assert r.status_code == 200, r.text
        assert_unauthenticated(await client.get("/v1/namespaces", headers=bearer(narrow["key"])), "api_key_revoked")

    async def test_cannot_create_or_delete_other_namespaces(
        self, client: httpx.AsyncClient, tenant_a: Tenant, spaces: tuple[str, str], limited_admin: dict[str, str]
    ) -> None:
        created = await client.post("/v1/namespaces", json={"name": "elsewhere"}, headers=limited_admin)
        deleted = await client.delete(f"/v1/namespaces/{spaces[1]}", headers=limited_admin)

        assert created.status_code == 403, created.text
        assert deleted.status_code == 403, deleted.text
        names = [n["name"] for n in (await client.get("/v1/namespaces", headers=tenant_a.headers)).json()]
        assert spaces[1] in names and "elsewhere" not in names
