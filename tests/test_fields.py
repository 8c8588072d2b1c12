"""One rule for every text a request carries into storage (fields.Body): no NUL, valid Unicode, a
length bound, and the secrets guard, on every field of every request model, through every door.

The walk over the app's routes fails when a new request model is not a Body, so the next field is
covered without anyone remembering."""

from __future__ import annotations

import types
import typing
import uuid
from typing import Any

import httpx
import pytest
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

from memvault.errors import InvalidInput
from memvault.fields import NOT_STORED, Body
from memvault.members.schemas import AcceptIn, SignupIn
from memvault.oauth.schemas import ClientMetadataIn, UserIn
from memvault.portability.records import RECORDS
from tests.conftest import Tenant
from tests.memories.test_router import problem

NS = "/v1/namespaces/default"
AWS_ID = "AK" + "IA" + "IOSFODNN7EXAMPLE"  # AWS's documented sample key id, assembled so no scanner trips
SECRET = f"key {AWS_ID}"
# A fresh address per run, so the users these tests create never meet another test's.
EMAIL = f"ana-{uuid.uuid4().hex[:8]}@example.com"

# Request models that are never stored: they select or search. Anything else that opts out of the
# secrets guard must be added here on purpose.
# TokenIn: a sign-up verification link's token, checked and never kept.
NOT_STORED_MODELS = {"SearchIn", "ContextIn", "MemoryFilters", "TraceSearchIn", "ForgetIn", "TokenIn"}
NOT_STORED_FIELDS = {
    (UserIn, "password"),
    (SignupIn, "password"),
    (AcceptIn, "password"),
    (AcceptIn, "token"),  # an invitation link's token: a signed JWT, checked and never kept
}


def _models(annotation: Any) -> set[type[BaseModel]]:
    """Every pydantic model an annotation names, nested models included."""
    found: set[type[BaseModel]] = set()
    todo = [annotation]
    while todo:
        a = todo.pop()
        if isinstance(a, type) and issubclass(a, BaseModel):
            if a not in found:
                found.add(a)
                todo += [f.annotation for f in a.model_fields.values()]
        else:
            todo += list(typing.get_args(a))
            origin = typing.get_origin(a)
            if origin is not None and origin not in (types.UnionType, typing.Union):
                todo.append(origin)
    return found


def request_models(app: Any) -> set[type[BaseModel]]:
    out: set[type[BaseModel]] = set()
    for ctx in iter_route_contexts(app.routes):
        route = ctx.original_route
        if isinstance(route, APIRoute) and route.body_field is not None:
            out |= _models(route.body_field.field_info.annotation)
    return out


class TestEveryRequestModelIsABody:
    def test_every_body_a_route_takes_is_a_body(self, app: Any) -> None:
        models = request_models(app)

        assert len(models) >= 20  # the walk finds the bodies at all
        assert sorted(m.__name__ for m in models if not issubclass(m, Body)) == []

    def test_models_the_other_doors_validate_are_bodies(self) -> None:
        # Import records and OAuth client metadata are read from raw bodies, not route parameters.
        models = set().union(*(_models(m) for m in (ClientMetadataIn, *RECORDS.values())))

        assert len(models) >= 8
        assert sorted(m.__name__ for m in models if not issubclass(m, Body)) == []
        assert all(m.guard_secrets for m in models if issubclass(m, Body))

    def test_only_the_listed_models_skip_the_secrets_guard(self, app: Any) -> None:
        skipping = {m.__name__ for m in request_models(app) if not m.guard_secrets}  # type: ignore[attr-defined]

        assert skipping <= NOT_STORED_MODELS

    def test_only_the_listed_fields_are_not_stored(self, app: Any) -> None:
        marked = {
            (m, name) for m in request_models(app) for name, f in m.model_fields.items() if NOT_STORED in f.metadata
        }

        assert marked == NOT_STORED_FIELDS


class TestTextRule:
    """NUL and unpaired surrogates made these 500s (PostgreSQL refuses them); now 422 naming the field."""

    @pytest.mark.parametrize(
        ("path", "body", "field"),
        [
            ("/v1/namespaces", {"name": "notes", "description": "a\x00b"}, "description"),
            (NS, {"description": "a\x00b"}, "description"),
            ("/v1/keys", {"name": "ci\x00"}, "name"),
            ("/v1/users", {"email": EMAIL, "password": "long enough pw", "name": "A\x00"}, "name"),
            ("/v1/users", {"email": "a\x00" + EMAIL, "password": "long enough pw"}, "email"),
            ("/v1/users", {"email": EMAIL, "password": "long\x00enough pw"}, "password"),
            (f"{NS}/memories", {"content": "x", "metadata": {"k\x00": 1}}, "metadata"),
            (f"{NS}/entities", {"name": "Ana", "type": "person", "aliases": ["a\x00"]}, "aliases"),
        ],
    )
    async def test_nul_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, path: str, body: dict[str, Any], field: str
    ) -> None:
        method = client.patch if path == NS else client.post

        r = await method(path, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"].startswith(field)

    @pytest.mark.parametrize(
        ("path", "raw", "field"),
        [
            (f"{NS}/memories", '{"content": "x", "key": "k\\ud800"}', "key"),
            ("/v1/keys", '{"name": "ci \\udfff"}', "name"),
            ("/v1/namespaces", '{"name": "notes", "description": "\\ud83d"}', "description"),
        ],
    )
    async def test_lone_surrogate_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, path: str, raw: str, field: str
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(path, content=raw, headers=headers)

        assert problem(r, 422, "validation_error")["field"] == field

    async def test_a_string_past_the_bound_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(
            f"{NS}/memories", json={"content": "x", "metadata": {"note": "y" * 70_000}}, headers=tenant_a.headers
        )

        assert problem(r, 422, "validation_error")["field"] == "metadata"


class TestTimesAreText:
    """A time is ISO 8601 text. Pydantic read a number, or a string of digits, as seconds since 1970:
    `"valid_from": "2015"` (a year) was stored as 1970-01-01T00:33:35Z, without a word."""

    @pytest.mark.parametrize(
        ("path", "body", "field"),
        [
            (f"{NS}/memories", {"content": "Sam moved to Denver", "valid_from": "2015"}, "valid_from"),
            (f"{NS}/memories", {"content": "Sam moved to Denver", "valid_from": 1425168000}, "valid_from"),
            (f"{NS}/memories", {"content": "Sam moved to Denver", "valid_to": "1.5e9"}, "valid_to"),
            (f"{NS}/search", {"query": "Denver", "filters": {"valid_at": 2015}}, "filters.valid_at"),
            (
                f"{NS}/facts",
                {"subject": "Sam", "predicate": "lives_in", "object": "Denver", "valid_from": "2015"},
                "valid_from",
            ),
        ],
    )
    async def test_a_number_is_refused_naming_the_field(
        self, client: httpx.AsyncClient, tenant_a: Tenant, path: str, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(path, json=body, headers=tenant_a.headers)

        refused = problem(r, 422, "validation_error")
        assert refused["field"] == field and "ISO 8601" in refused["detail"]
        listed = await client.get(f"{NS}/memories", headers=tenant_a.headers)
        assert listed.json()["data"] == []  # nothing stored

    @pytest.mark.parametrize("query", ["since=2015", "until=1425168000", "valid_at=2015", "knowledge_at=2015"])
    async def test_a_number_in_a_query_is_refused(
        self, client: httpx.AsyncClient, tenant_a: Tenant, query: str
    ) -> None:
        r = await client.get(f"{NS}/memories?{query}", headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == query.split("=")[0]

    async def test_dates_and_times_in_iso_8601_are_taken(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for given, kept in [
            ("2015-03-01", "2015-03-01T00:00:00Z"),
            ("2015-03-01T10:00:00+01:00", "2015-03-01T09:00:00Z"),
        ]:
            r = await client.post(
                f"{NS}/memories", json={"content": f"At {given}", "valid_from": given}, headers=tenant_a.headers
            )
            assert r.status_code == 201, r.text
            assert r.json()["valid_from"] == kept
        assert (await client.get(f"{NS}/memories?since=2015-01-01", headers=tenant_a.headers)).status_code == 200


class TestSecretsInEveryStoredString:
    """These were stored unchecked; the guard now runs in the models, with today's problem shape."""

    @pytest.mark.parametrize(
        ("path", "body", "field"),
        [
            (f"{NS}/memories", {"content": "seat 4A", "key": SECRET}, "key"),
            (f"{NS}/memories", {"content": "seat 4A", "user_id": SECRET}, "user_id"),
            (f"{NS}/memories", {"content": "seat 4A", "agent_id": SECRET}, "agent_id"),
            (f"{NS}/memories", {"content": "seat 4A", "session_id": SECRET}, "session_id"),
            (
                f"{NS}/memories/batch",
                {"memories": [{"content": "ok"}, {"content": "x", "key": SECRET}]},
                "memories[1].key",
            ),
            (f"{NS}/events", {"session_id": SECRET, "messages": [{"role": "user", "content": "hi"}]}, "session_id"),
            (
                f"{NS}/events",
                {"session_id": "s", "user_id": SECRET, "messages": [{"role": "user", "content": "hi"}]},
                "user_id",
            ),
            ("/v1/keys", {"name": SECRET}, "name"),
            ("/v1/users", {"email": EMAIL, "password": "long enough pw", "name": SECRET}, "name"),
            ("/v1/namespaces", {"name": "notes", "description": SECRET}, "description"),
            (f"{NS}/traces", {"task": "deploy", "user_id": SECRET}, "user_id"),
        ],
    )
    async def test_secret_is_refused_and_nothing_stored(
        self, client: httpx.AsyncClient, tenant_a: Tenant, path: str, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(path, json=body, headers=tenant_a.headers)

        got = problem(r, 422, "secret_detected")
        assert (got["field"], got["kind"]) == (field, "aws_access_key_id")
        assert AWS_ID not in r.text
        listed = (await client.get(f"{NS}/memories", headers=tenant_a.headers)).json()["data"]
        keys = (await client.get("/v1/keys", headers=tenant_a.headers)).json()
        users = (await client.get("/v1/users", headers=tenant_a.headers)).json()["data"]
        assert AWS_ID not in str(listed) + str(keys) + str(users)

    async def test_a_password_is_not_a_refused_secret(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # The password is hashed, never stored: a strong one may look like a token.
        body = {"email": f"pw-{EMAIL}", "password": "password=Xk9#mQ2$vL8pZ4wR"}

        r = await client.post("/v1/users", json=body, headers=tenant_a.headers)

        assert r.status_code == 201, r.text

    async def test_a_search_may_name_a_secret_shape(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(f"{NS}/search", json={"query": f"where did I leave {AWS_ID}"}, headers=tenant_a.headers)

        assert r.status_code == 200, r.text


class TestUnreadableBodies:
    @pytest.mark.parametrize(
        "raw", [b'{"content": "caf\xe9"}', b"[" * 100_000, b'{"content": "\xff\xfe"}'], ids=["latin1", "deep", "ff"]
    )
    async def test_unparseable_json_is_422_problem(
        self, client: httpx.AsyncClient, tenant_a: Tenant, raw: bytes
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(f"{NS}/memories", content=raw, headers=headers)

        assert problem(r, 422, "validation_error")["field"] == "body"

    async def test_a_json_syntax_error_names_the_body_and_where(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        headers = {**tenant_a.headers, "content-type": "application/json"}

        r = await client.post(f"{NS}/memories", content=b'{"content": "x" "type": "fact"}', headers=headers)

        refused = problem(r, 422, "validation_error")
        # It read `[16]: JSON decode error`: a field named by a character position.
        assert refused["field"] == "body"
        assert refused["detail"].startswith("body: not valid JSON at character 16"), refused["detail"]

    async def test_blank_search_query_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post(f"{NS}/search", json={"query": "   "}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "query"


class TestClientMetadata:
    """Dynamic client registration is open to anyone: what it stores is bounded and guarded too."""

    BASE = {"redirect_uris": ["http://127.0.0.1/callback"], "client_name": "Probe"}

    @pytest.mark.parametrize(
        "extra",
        [
            {"contacts": [f"ops{i}@example.com" for i in range(40_000)]},
            {"contacts": ["x" * 200_000]},
            {"client_name": "n" * 10_000},
            {"client_uri": "https://example.com/" + "a" * 100_000},
            {"client_name": SECRET},
            {"contacts": [SECRET]},
            {"policy_uri": "https://app:Xk9mQ2vL8pZ4wR7t@example.com/policy"},
            {"client_name": "Pro\x00be"},
        ],
        ids=[
            "1mb-contacts",
            "long-contact",
            "long-name",
            "long-uri",
            "secret-name",
            "secret-contact",
            "url-pw",
            "nul",
        ],
    )
    async def test_refused(self, client: httpx.AsyncClient, extra: dict[str, Any]) -> None:
        r = await client.post("/oauth/register", json={**self.BASE, **extra})

        assert r.status_code == 400, r.text[:300]
        assert r.json()["error"] == "invalid_client_metadata"
        assert AWS_ID not in r.text and "Xk9mQ2vL8pZ4wR7t" not in r.text

    async def test_lone_surrogate_is_refused(self, client: httpx.AsyncClient) -> None:
        raw = '{"redirect_uris": ["http://127.0.0.1/callback"], "software_id": "\\ud800"}'

        r = await client.post("/oauth/register", content=raw, headers={"content-type": "application/json"})

        assert r.status_code == 400, r.text[:300]
        assert r.json()["error"] == "invalid_client_metadata"

    async def test_ordinary_metadata_is_registered(self, client: httpx.AsyncClient) -> None:
        body = {**self.BASE, "contacts": ["ops@example.com"], "client_uri": "https://example.com"}

        r = await client.post("/oauth/register", json=body)

        assert r.status_code == 201, r.text
        assert r.json()["contacts"] == ["ops@example.com"]


class TestPlainArguments:
    """A facade call's plain arguments (a session id, a namespace name: strings outside any request
    model) are held to the text rule in operations.py, for every door: a NUL in an MCP tool's
    session id reached PostgreSQL and failed as an internal error (tests/mcp/test_fuzz.py found it)."""

    async def test_a_nul_in_a_plain_argument_is_refused_naming_it(self, api: Any, tenant_a: Tenant) -> None:
        with pytest.raises(InvalidInput) as refused:
            await api.get_observations(tenant_a.principal, tenant_a.namespace, "s\x00one")
        assert refused.value.extra["field"] == "session_id"
        assert "NUL" in refused.value.detail

    async def test_a_lone_surrogate_too(self, api: Any, tenant_a: Tenant) -> None:
        with pytest.raises(InvalidInput) as refused:
            await api.get_observations(tenant_a.principal, tenant_a.namespace, session_id="s\ud800")
        assert refused.value.extra["field"] == "session_id"

    async def test_a_namespace_no_namespace_can_be_named_is_refused_as_the_namespace(
        self, api: Any, tenant_a: Tenant
    ) -> None:
        for name in ("de\x00fault", "no spaces", ".hidden"):
            with pytest.raises(InvalidInput) as refused:
                await api.get_observations(tenant_a.principal, name, "s1")
            assert refused.value.extra["field"] == "namespace", name
