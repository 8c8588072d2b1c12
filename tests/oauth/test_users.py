"""Tenant users (REST and CLI), the account's clients and grants, and client ID metadata documents."""

from __future__ import annotations

import asyncio
import json
import uuid
from collections.abc import AsyncIterator
from pathlib import Path

import httpx
import pytest
from starlette.applications import Starlette
from starlette.responses import JSONResponse
from starlette.routing import Route

from memvault.db.urls import DatabaseUrls
from tests.cli.test_cli import MEMVAULT, clean_env
from tests.conftest import Tenant
from tests.oauth.conftest import (
    PASSWORD,
    REDIRECT,
    Browser,
    Server,
    User,
    authorization_url,
    exchange,
    mcp_ping,
    obtain_tokens,
    pkce,
    redirect_params,
)
from tests.servers import served


def email() -> str:
    return f"u-{uuid.uuid4().hex[:12]}@example.com"


class TestUsersOverRest:
    async def test_create_list_disable(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        address = email()
        r = await client.post(
            "/v1/users", json={"email": address.upper(), "password": PASSWORD, "name": "Ana"}, headers=tenant_a.headers
        )
        assert r.status_code == 201, r.text
        user = r.json()
        assert user["email"] == address and user["scopes"] == ["read", "write"] and user["disabled_at"] is None
        assert "password" not in json.dumps(user) and "hash" not in json.dumps(user)
        listed = (await client.get("/v1/users", headers=tenant_a.headers)).json()["data"]
        assert [u["email"] for u in listed] == [address]
        r = await client.post(f"/v1/users/{user['id']}/disable", headers=tenant_a.headers)
        assert r.status_code == 200 and r.json()["disabled_at"] is not None

    async def test_bad_input(self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant) -> None:
        address = email()
        ok = await client.post("/v1/users", json={"email": address, "password": PASSWORD}, headers=tenant_a.headers)
        assert ok.status_code == 201
        # Taken in this tenant; another tenant's users are its own business (issue 27 item 10).
        r = await client.post("/v1/users", json={"email": address, "password": PASSWORD}, headers=tenant_a.headers)
        assert r.status_code == 409 and r.json()["code"] == "user_exists"
        r = await client.post("/v1/users", json={"email": address, "password": PASSWORD}, headers=tenant_b.headers)
        assert r.status_code == 201
        r = await client.post("/v1/users", json={"email": email(), "password": "short"}, headers=tenant_a.headers)
        assert r.status_code == 422 and r.json()["code"] == "weak_password"
        r = await client.post(
            "/v1/users", json={"email": email(), "password": PASSWORD, "scopes": ["admin"]}, headers=tenant_a.headers
        )
        assert r.status_code == 422

    async def test_other_tenant_sees_nothing(
        self,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        tenant_b: Tenant,
        oauth_server: Server,
        http: httpx.AsyncClient,
    ) -> None:
        r = await client.post("/v1/users", json={"email": email(), "password": PASSWORD}, headers=tenant_a.headers)
        user = r.json()
        await obtain_tokens(http, oauth_server, User(uuid.UUID(user["id"]), user["email"], tenant_a))
        assert (await client.get("/v1/users", headers=tenant_b.headers)).json()["data"] == []
        r = await client.post(f"/v1/users/{user['id']}/disable", headers=tenant_b.headers)
        assert r.status_code == 404 and r.json()["code"] == "user_not_found"
        account = (await client.get("/v1/account", headers=tenant_b.headers)).json()
        assert account["grants"] == [] and account["clients"] == [] and account["users"] == 0
        grant = (await client.get("/v1/account", headers=tenant_a.headers)).json()["grants"][0]
        r = await client.delete(f"/v1/account/grants/{grant['id']}", headers=tenant_b.headers)
        assert r.status_code == 404 and r.json()["code"] == "grant_not_found"


class TestAccount:
    async def test_lists_clients_and_grants_and_revokes_one(
        self, client: httpx.AsyncClient, tenant_a: Tenant, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        tokens = await obtain_tokens(http, oauth_server, user_a)
        account = (await client.get("/v1/account", headers=tenant_a.headers)).json()
        assert account["users"] == 1
        assert [c["client_id"] for c in account["clients"]] == [tokens.client_id]
        assert account["clients"][0]["client_name"] == "Test Client" and account["clients"][0]["kind"] == "dcr"
        (grant,) = account["grants"]
        assert grant["user_email"] == user_a.email and grant["namespaces"] == ["default"]
        assert grant["scopes"] == ["read", "write"] and grant["revoked_at"] is None

        r = await client.delete(f"/v1/account/grants/{grant['id']}", headers=tenant_a.headers)
        assert r.status_code == 200 and r.json()["revoked_at"] is not None
        assert (await mcp_ping(http, oauth_server, tokens.access_token)).status_code == 401
        audit = (await client.get("/v1/audit", params={"action": "oauth.revoke"}, headers=tenant_a.headers)).json()
        assert [e["target_id"] for e in audit["data"]] == [grant["id"]]

    async def test_needs_admin(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/keys", json={"scopes": ["read", "write"]}, headers=tenant_a.headers)
        headers = {"Authorization": f"Bearer {r.json()['key']}"}
        assert (await client.get("/v1/account", headers=headers)).status_code == 403
        assert (await client.get("/v1/users", headers=headers)).status_code == 403


@pytest.mark.slow  # runs the `memvault` console script
class TestCli:
    async def test_create_user_from_stdin_and_disable(
        self, pg_urls: DatabaseUrls, tenant_a: Tenant, tmp_path: Path, client: httpx.AsyncClient
    ) -> None:
        env = clean_env(MEMVAULT_DATABASE_URL=pg_urls.owner.render_as_string(hide_password=False))

        async def admin(*args: str, stdin: str = "") -> tuple[int, str, str]:
            proc = await asyncio.create_subprocess_exec(
                str(MEMVAULT), "admin", *args, env=env, cwd=tmp_path,
                stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE, stderr=asyncio.subprocess.PIPE,
            )  # fmt: skip
            out, err = await asyncio.wait_for(proc.communicate(stdin.encode()), timeout=120)
            return proc.returncode or 0, out.decode(), err.decode()

        address = email()
        new = ("create-user", "--tenant", tenant_a.name, "--email", address)
        code, out, err = await admin(*new, stdin=PASSWORD + "\n")
        assert code == 0, err
        assert json.loads(out)["email"] == address and PASSWORD not in out
        code, _, err = await admin(*new, stdin=PASSWORD)
        assert code == 1 and "user_exists" in err
        code, out, err = await admin("disable-user", "--tenant", tenant_a.name, "--email", address)
        assert code == 0 and json.loads(out)["disabled_at"], err
        listed = (await client.get("/v1/users", headers=tenant_a.headers)).json()["data"]
        assert [u["email"] for u in listed if u["disabled_at"]] == [address]


@pytest.fixture
async def metadata_host() -> AsyncIterator[tuple[str, dict[str, dict[str, object]]]]:
    """A client's website on loopback, serving client ID metadata documents."""
    docs: dict[str, dict[str, object]] = {}

    async def serve(request):  # type: ignore[no-untyped-def]
        doc = docs.get(request.url.path)
        return JSONResponse(doc) if doc is not None else JSONResponse({}, status_code=404)

    async with served(Starlette(routes=[Route("/{path:path}", serve)])) as url:
        yield url, docs


class TestClientIdMetadataDocuments:
    async def test_url_client_id_signs_in_without_registering(
        self,
        oauth_server: Server,
        http: httpx.AsyncClient,
        user_a: User,
        metadata_host: tuple[str, dict[str, dict[str, object]]],
    ) -> None:
        host, docs = metadata_host
        client_id = f"{host}/oauth/client.json"
        docs["/oauth/client.json"] = {
            "client_id": client_id,
            "client_name": "Metadata Document Client",
            "redirect_uris": [REDIRECT],
            "token_endpoint_auth_method": "none",
        }
        verifier, challenge = pkce()
        url = authorization_url(oauth_server, client_id, challenge)
        page = await Browser(http, user_a).sign_in(url)
        assert "Metadata Document Client" in page.text
        r = await Browser(http, user_a).consent(page, url)
        tokens = await exchange(http, oauth_server, client_id, redirect_params(r)["code"], verifier)
        assert tokens.status_code == 200, tokens.text
        assert (await mcp_ping(http, oauth_server, tokens.json()["access_token"])).status_code == 200

    async def test_a_document_that_does_not_name_itself_is_refused(
        self, oauth_server: Server, http: httpx.AsyncClient, metadata_host: tuple[str, dict[str, dict[str, object]]]
    ) -> None:
        host, docs = metadata_host
        docs["/liar.json"] = {"client_id": "https://someone-else.example/c.json", "redirect_uris": [REDIRECT]}
        r = await http.get(authorization_url(oauth_server, f"{host}/liar.json", pkce()[1]))
        assert r.status_code == 400 and "location" not in r.headers
        r = await http.get(authorization_url(oauth_server, f"{host}/missing.json", pkce()[1]))
        assert r.status_code == 400 and "HTTP 404" in r.text
