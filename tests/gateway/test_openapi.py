"""What /openapi.json promises about authentication and errors, against what the app answers.
(tests/gateway/test_schemathesis.py checks every operation with generated requests; these pin
the declarations themselves.)"""

from __future__ import annotations

import re
from typing import Any

import httpx
import jsonschema

from tests.conftest import Tenant

PROBLEM = "application/problem+json"
# The only /v1 operations that take no key: making an organisation, and joining one by a mailed link.
NO_CREDENTIAL = {
    ("POST", "/v1/signup"),
    ("POST", "/v1/signup/verify"),
    ("POST", "/v1/signup/resend"),
    ("POST", "/v1/invitations/accept"),
    # The status page's history: the service's own state, public like the page.
    ("GET", "/v1/status/history"),
}


async def _spec(client: httpx.AsyncClient) -> dict[str, Any]:
    r = await client.get("/openapi.json")
    assert r.status_code == 200
    return r.json()


def _operations(spec: dict[str, Any]) -> list[tuple[str, str, dict[str, Any]]]:
    return [(m.upper(), p, op) for p, ops in spec["paths"].items() for m, op in ops.items()]


def _declared(spec: dict[str, Any], path: str, method: str, status: int) -> dict[str, Any]:
    """The JSON schema an operation declares for a status, with the document's components, ready
    for jsonschema."""
    response = spec["paths"][path][method]["responses"][str(status)]
    assert list(response["content"]) == [PROBLEM]
    return {**response["content"][PROBLEM]["schema"], "components": spec["components"]}


class TestSecurity:
    async def test_the_bearer_scheme_is_declared(self, client: httpx.AsyncClient) -> None:
        schemes = (await _spec(client))["components"]["securitySchemes"]
        assert schemes["apiKey"]["type"] == "http"
        assert schemes["apiKey"]["scheme"] == "bearer"

    async def test_every_v1_operation_but_status_and_sign_up_needs_a_key_with_its_scope(
        self, client: httpx.AsyncClient
    ) -> None:
        spec = await _spec(client)
        for method, path, op in _operations(spec):
            if path == "/v1/status":
                # A key is optional there: it adds the caller's tenant to the answer.
                assert op["security"] == [{}, {"apiKey": []}]
                continue
            if (method, path) in NO_CREDENTIAL:
                assert op["security"] == [], (method, path)
                continue
            [requirement] = op["security"]
            [scopes] = requirement.values()
            assert len(scopes) == 1 and scopes[0] in {"read", "write", "admin"}, (method, path, op["security"])
        ops = {(m, p): op for m, p, op in _operations(spec)}
        assert ops[("POST", "/v1/namespaces/{ns}/memories")]["security"] == [{"apiKey": ["write"]}]
        assert ops[("POST", "/v1/namespaces/{ns}/search")]["security"] == [{"apiKey": ["read"]}]
        assert ops[("POST", "/v1/keys")]["security"] == [{"apiKey": ["admin"]}]

    async def test_a_declared_scope_is_the_one_enforced(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # A read-only key is refused (403) where the description says "write" and served where it says "read".
        r = await client.post("/v1/keys", json={"name": "reader", "scopes": ["read"]}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        reader = {"Authorization": f"Bearer {r.json()['key']}"}
        ns = f"/v1/namespaces/{tenant_a.namespace}"
        assert (await client.post(f"{ns}/memories", json={"content": "x"}, headers=reader)).status_code == 403
        assert (await client.post(f"{ns}/search", json={"query": "x"}, headers=reader)).status_code == 200

    async def test_every_operation_that_declares_a_key_refuses_a_request_without_one(
        self, client: httpx.AsyncClient
    ) -> None:
        ids = {"ns": "default"}
        for method, path, op in _operations(await _spec(client)):
            if {} in op["security"] or (method, path) in NO_CREDENTIAL:
                continue
            url = re.sub(r"\{(\w+)\}", lambda m: ids.get(m.group(1), "00000000-0000-0000-0000-000000000000"), path)
            r = await client.request(method, url, json={} if "requestBody" in op else None)
            assert r.status_code == 401, (method, path, r.status_code)
            assert r.json()["code"] == "missing_credentials"


class TestProblems:
    async def test_fastapis_validation_error_shape_is_not_described(self, client: httpx.AsyncClient) -> None:
        spec = await _spec(client)
        assert "HTTPValidationError" not in spec["components"]["schemas"]
        assert "HTTPValidationError" not in str(spec["paths"])

    async def test_every_error_status_is_problem_json(self, client: httpx.AsyncClient) -> None:
        for method, path, op in _operations(await _spec(client)):
            errors = {s: r for s, r in op["responses"].items() if int(s) >= 400}
            assert "503" in errors, (method, path)
            for status, response in errors.items():
                assert list(response["content"]) == [PROBLEM], (method, path, status)
                assert response["content"][PROBLEM]["schema"] == {"$ref": "#/components/schemas/Problem"}

    async def test_the_real_422_matches_what_is_declared(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        spec = await _spec(client)
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories", json={"content": ""}, headers=tenant_a.headers
        )
        assert r.status_code == 422
        assert r.headers["content-type"] == PROBLEM
        jsonschema.validate(r.json(), _declared(spec, "/v1/namespaces/{ns}/memories", "post", 422))
        assert r.json()["code"] == "validation_error" and r.json()["field"] == "content"

    async def test_the_real_401_403_404_409_match_what_is_declared(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        spec = await _spec(client)
        ns = tenant_a.namespace
        r = await client.get(f"/v1/namespaces/{ns}/memories")
        assert r.status_code == 401
        jsonschema.validate(r.json(), _declared(spec, "/v1/namespaces/{ns}/memories", "get", 401))
        r = await client.get("/v1/namespaces/nope/memories", headers=tenant_a.headers)
        assert r.status_code == 404
        jsonschema.validate(r.json(), _declared(spec, "/v1/namespaces/{ns}/memories", "get", 404))
        r = await client.post("/v1/namespaces", json={"name": ns}, headers=tenant_a.headers)
        assert r.status_code == 409
        jsonschema.validate(r.json(), _declared(spec, "/v1/namespaces", "post", 409))
        r = await client.get("/v1/audit", params={"namespace": "nope"}, headers=tenant_a.headers)
        assert r.status_code == 404
        jsonschema.validate(r.json(), _declared(spec, "/v1/audit", "get", 404))

    async def test_read_routes_do_not_promise_conflicts(self, client: httpx.AsyncClient) -> None:
        ops = {(m, p): op for m, p, op in _operations(await _spec(client))}
        assert "409" not in ops[("POST", "/v1/namespaces/{ns}/search")]["responses"]
        assert "409" not in ops[("GET", "/v1/namespaces/{ns}/memories")]["responses"]
        assert "413" in ops[("POST", "/v1/namespaces/{ns}/import")]["responses"]
