"""The API keys page: a key made there works on REST until it is revoked there, its secret is shown
once, and only owners and admins of the key's own organisation, within their namespaces, can act."""

from __future__ import annotations

import re
import uuid

import httpx

from memvault.api import NamespaceAPI
from memvault.keys.schemas import KeyIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member

_SECRET = re.compile(r'<code id="new-secret">(mv_[A-Za-z0-9]+)</code>')


def secret_in(html: str) -> str:
    found = _SECRET.search(html)
    assert found, "the page shows no new secret"
    return found.group(1)


async def create(browser: Browser, **fields: object) -> httpx.Response:
    await browser.get("/dashboard/keys")
    data = {"name": "backend", "scopes": ["read", "write"], "namespaces": "", "expires_in_days": "", **fields}
    return await browser.post("/dashboard/keys", data)


async def rest(client: httpx.AsyncClient, key: str) -> int:
    r = await client.get("/v1/namespaces", headers={"Authorization": f"Bearer {key}"})
    return r.status_code


async def key_id(api: NamespaceAPI, tenant: Tenant, name: str) -> uuid.UUID:
    [found] = [k for k in (await api.list_keys(tenant.principal)).data if k.name == name]
    return found.id


class TestCreateUseRevoke:
    async def test_a_key_made_on_the_page_works_on_rest_until_revoked_there(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await create(signed_in, name="made on the page")
        assert r.status_code == 200 and 'id="copy-secret"' in r.text and 'data-copy="new-secret"' in r.text
        secret = secret_in(r.text)
        assert await rest(client, secret) == 200

        kid = await key_id(api, tenant_a, "made on the page")
        listing = await signed_in.get("/dashboard/keys")
        assert f'id="key-{kid}"' in listing.text and f'id="revoke-{kid}"' in listing.text
        assert f'id="rotate-{kid}"' in listing.text and 'id="keys"' in listing.text

        r = await signed_in.post(f"/dashboard/keys/{kid}/revoke")
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/keys?done=revoked"
        assert await rest(client, secret) == 401
        after = await signed_in.get(r.headers["location"])
        assert 'id="notice"' in after.text and "revoked" in after.text
        assert f'id="revoke-{kid}"' not in after.text and f'id="rotate-{kid}"' not in after.text

    async def test_the_form_sets_scopes_namespaces_and_expiry(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await create(signed_in, name="reader", scopes=["read"], namespaces=tenant_a.namespace, expires_in_days="30")
        assert r.status_code == 200
        secret = secret_in(r.text)
        [made] = [k for k in (await api.list_keys(tenant_a.principal)).data if k.name == "reader"]
        assert made.scopes == ["read"] and made.namespaces == [tenant_a.namespace]
        assert made.expires_at is not None and made.expires_at > made.created_at
        body = {"content": "not allowed to write"}
        w = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/memories", json=body, headers={"Authorization": f"Bearer {secret}"}
        )
        assert w.status_code == 403

    async def test_a_form_the_facade_refuses_is_shown_again_with_the_reason(self, signed_in: Browser) -> None:
        r = await create(signed_in, name="keep this name", scopes=[])
        assert r.status_code == 422 and 'id="form-error"' in r.text
        assert 'value="keep this name"' in r.text and "new-secret" not in r.text
        r = await create(signed_in, expires_in_days="soon")
        assert r.status_code == 422 and "expires_in_days" in r.text


class TestTheSecretIsShownOnce:
    async def test_only_the_answer_to_the_form_carries_it(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await create(signed_in, name="once")
        secret = secret_in(r.text)
        # Not a redirect (no URL holds it), and never kept by a cache.
        assert "location" not in r.headers and r.headers["cache-control"] == "no-store"
        assert r.text.count(secret) == 1
        for path in ("/dashboard/keys", "/dashboard", "/dashboard/keys?done=revoked"):
            page = await signed_in.get(path)
            assert secret not in page.text and secret[:20] not in page.text

    async def test_rotating_shows_the_new_secret_once_and_the_old_one_keeps_its_grace(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        old = secret_in((await create(signed_in, name="rotated")).text)
        kid = await key_id(api, tenant_a, "rotated")
        await signed_in.get("/dashboard/keys")
        r = await signed_in.post(f"/dashboard/keys/{kid}/rotate")
        assert r.status_code == 200 and r.headers["cache-control"] == "no-store"
        new = secret_in(r.text)
        assert new != old and 'id="grace"' in r.text
        assert await rest(client, new) == 200 and await rest(client, old) == 200  # within the hour's grace
        listing = await signed_in.get("/dashboard/keys")
        assert new not in listing.text and "old secret" in listing.text


class TestWhoMay:
    async def test_a_viewer_sees_no_key_buttons_and_its_posts_are_refused(
        self, browser: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        made = await api.create_key(tenant_a.principal, KeyIn(name="theirs"))
        await browser.sign_in(await add_member(api, tenant_a, "viewer"))
        home = await browser.get("/dashboard")
        assert 'id="nav-keys"' not in home.text
        page = await browser.get("/dashboard/keys")
        assert page.status_code == 403
        assert "create-key" not in page.text and f"revoke-{made.id}" not in page.text
        await browser.get("/dashboard")
        before = len((await api.list_keys(tenant_a.principal)).data)
        r = await browser.post("/dashboard/keys", {"name": "sneaky", "scopes": ["admin"]})
        assert r.status_code == 403
        assert len((await api.list_keys(tenant_a.principal)).data) == before
        await browser.get("/dashboard")
        assert (await browser.post(f"/dashboard/keys/{made.id}/revoke")).status_code == 403
        await browser.get("/dashboard")
        assert (await browser.post(f"/dashboard/keys/{made.id}/rotate")).status_code == 403
        assert await rest(client, made.key) == 200

    async def test_an_admin_limited_to_a_namespace_cannot_mint_beyond_it(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        email = await add_member(api, tenant_a, "admin", namespaces=[tenant_a.namespace])
        await browser.sign_in(email)
        page = await browser.get("/dashboard/keys")
        assert page.status_code == 200 and f'value="{tenant_a.namespace}"' in page.text  # the default
        for beyond in ("", "elsewhere", f"{tenant_a.namespace}, elsewhere"):
            r = await create(browser, name="too wide", namespaces=beyond)
            assert r.status_code == 403 and 'id="form-error"' in r.text and "new-secret" not in r.text
        assert "too wide" not in [k.name for k in (await api.list_keys(tenant_a.principal)).data]
        r = await create(browser, name="inside", namespaces=tenant_a.namespace)
        assert r.status_code == 200 and secret_in(r.text)

    async def test_another_organisations_key_is_not_found(
        self,
        browser: Browser,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        tenant_b: Tenant,
    ) -> None:
        theirs = await api.create_key(tenant_a.principal, KeyIn(name="a's"))
        await browser.sign_in(await add_member(api, tenant_b, "owner"))
        page = await browser.get("/dashboard/keys")
        assert str(theirs.id) not in page.text
        for action in ("revoke", "rotate"):
            r = await browser.post(f"/dashboard/keys/{theirs.id}/{action}")
            assert r.status_code == 404 and "api_key_not_found" in r.text
            await browser.get("/dashboard/keys")
        assert await rest(client, theirs.key) == 200

    async def test_a_form_without_its_token_is_refused(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        made = await api.create_key(tenant_a.principal, KeyIn(name="kept"))
        await signed_in.get("/dashboard/keys")
        r = await signed_in.post("/dashboard/keys", {"name": "no token", "scopes": ["read"]}, csrf="")
        assert r.status_code == 403 and "csrf_failed" in r.text
        r = await signed_in.post(f"/dashboard/keys/{made.id}/revoke", csrf="")
        assert r.status_code == 403
        assert "no token" not in [k.name for k in (await api.list_keys(tenant_a.principal)).data]
        assert await rest(client, made.key) == 200


async def test_the_list_is_paged(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    for n in range(50):
        await api.create_key(tenant_a.principal, KeyIn(name=f"k{n:02d}"))
    first = await signed_in.get("/dashboard/keys")
    assert first.text.count('<tr id="key-') == 50
    found = re.search(r'href="(/dashboard/keys\?cursor=[^"]+)" id="keys-next"', first.text)
    assert found
    second = await signed_in.get(found.group(1).replace("&amp;", "&"))
    assert second.text.count('<tr id="key-') == 1  # the tenant's own first key
    assert 'id="keys-next"' not in second.text and 'id="keys-first"' in second.text
