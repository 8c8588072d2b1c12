"""The members page: invitations by mail (the log mailer), roles changed and members removed by
owners and admins, within the owner rules; nobody else, and never across organisations."""

from __future__ import annotations

import logging
import re
import uuid

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.members.schemas import InvitationIn
from tests.conftest import Tenant
from tests.dashboard.conftest import PASSWORD, Browser, add_member


async def member_id(api: NamespaceAPI, tenant: Tenant, email: str) -> uuid.UUID:
    return (await api.find_user(tenant.principal, email)).id


def mailed_token(caplog: pytest.LogCaptureFixture, address: str) -> str:
    [record] = [r for r in caplog.records if r.name == "memvault.mail" and address in r.getMessage()]
    found = re.search(r"/invitations/accept\?token=(\S+)", record.getMessage())
    assert found, record.getMessage()
    return found.group(1)


class TestInvite:
    async def test_an_invited_viewer_is_listed_mailed_and_joins_without_member_buttons(
        self,
        signed_in: Browser,
        browser: Browser,
        second_browser: Browser,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        caplog: pytest.LogCaptureFixture,
    ) -> None:
        page = await signed_in.get("/dashboard/members")
        assert page.status_code == 200 and 'id="invite"' in page.text and 'id="members"' in page.text
        address = f"viewer-{uuid.uuid4().hex[:8]}@example.com"
        with caplog.at_level(logging.WARNING, logger="memvault.mail"):
            r = await signed_in.post("/dashboard/members/invite", {"email": address, "role": "viewer"})
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/members?done=invited"
        listed = await signed_in.get(r.headers["location"])
        assert 'id="invitations"' in listed.text and address in listed.text and 'id="notice"' in listed.text
        token = mailed_token(caplog, address)

        accepted = await client.post("/v1/invitations/accept", json={"token": token, "password": PASSWORD})
        assert accepted.status_code == 201 and accepted.json()["member"]["role"] == "viewer"
        after = await signed_in.get("/dashboard/members")
        assert f'id="member-{accepted.json()["member"]["id"]}"' in after.text
        assert address not in after.text.split('id="invitations-heading"')[1]  # no longer pending

        await second_browser.sign_in(address)
        home = await second_browser.get("/dashboard")
        assert 'id="nav-members"' not in home.text and 'id="nav-keys"' not in home.text
        refused = await second_browser.get("/dashboard/members")
        assert refused.status_code == 403 and 'id="invite"' not in refused.text
        await second_browser.get("/dashboard")
        r = await second_browser.post("/dashboard/members/invite", {"email": "x@example.com", "role": "owner"})
        assert r.status_code == 403

    async def test_a_bad_address_or_a_member_again_is_shown_beside_the_form(
        self, signed_in: Browser, owner_of_a: str
    ) -> None:
        await signed_in.get("/dashboard/members")
        r = await signed_in.post("/dashboard/members/invite", {"email": "not an address", "role": "member"})
        assert r.status_code == 422 and 'id="form-error"' in r.text and 'value="not an address"' in r.text
        r = await signed_in.post("/dashboard/members/invite", {"email": owner_of_a, "role": "member"})
        assert r.status_code == 409 and "already a member" in r.text

    async def test_a_pending_invitation_can_be_revoked(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        inv = await api.invite_member(tenant_a.principal, InvitationIn(email="later@example.com", role="member"))
        page = await signed_in.get("/dashboard/members")
        assert f'id="revoke-invitation-{inv.id}"' in page.text
        r = await signed_in.post(f"/dashboard/members/invitations/{inv.id}/revoke")
        assert r.status_code == 303
        assert (await api.list_invitations(tenant_a.principal)).data == []
        assert f'id="invitation-{inv.id}"' not in (await signed_in.get("/dashboard/members")).text


class TestRoles:
    async def test_an_owner_changes_a_role_and_removes_a_member(
        self, signed_in: Browser, second_browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        email = await add_member(api, tenant_a, "member")
        uid = await member_id(api, tenant_a, email)
        await second_browser.sign_in(email)
        page = await signed_in.get("/dashboard/members")
        assert f'id="role-{uid}"' in page.text and f'id="remove-{uid}"' in page.text

        r = await signed_in.post(f"/dashboard/members/{uid}/role", {"role": "viewer"})
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/members?done=role"
        assert (await api.find_user(tenant_a.principal, email)).role == "viewer"
        # The change holds at the member's next click.
        assert "(viewer)" in (await second_browser.get("/dashboard")).text

        await signed_in.get("/dashboard/members")
        r = await signed_in.post(f"/dashboard/members/{uid}/remove")
        assert r.status_code == 303 and r.headers["location"] == "/dashboard/members?done=removed"
        assert email not in (await signed_in.get("/dashboard/members")).text
        gone = await second_browser.get("/dashboard")
        assert gone.status_code == 303 and gone.headers["location"].startswith("/dashboard/signin")

    async def test_an_admin_gets_no_owner_controls_and_cannot_touch_owners(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        owner = await member_id(api, tenant_a, owner_of_a)
        other = await member_id(api, tenant_a, await add_member(api, tenant_a, "member"))
        await browser.sign_in(await add_member(api, tenant_a, "admin"))
        page = await browser.get("/dashboard/members")
        assert page.status_code == 200
        assert f'id="role-{owner}"' not in page.text and f'id="remove-{owner}"' not in page.text
        assert f'id="role-{other}"' in page.text and '<option value="owner"' not in page.text
        r = await browser.post(f"/dashboard/members/{owner}/remove")
        assert r.status_code == 403 and "owner_required" in r.text
        await browser.get("/dashboard/members")
        r = await browser.post(f"/dashboard/members/{other}/role", {"role": "owner"})
        assert r.status_code == 403
        await browser.get("/dashboard/members")
        r = await browser.post("/dashboard/members/invite", {"email": "boss@example.com", "role": "owner"})
        assert r.status_code == 403 and 'id="form-error"' in r.text
        assert (await api.find_user(tenant_a.principal, owner_of_a)).role == "owner"

    async def test_the_last_owner_stays(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        me = await member_id(api, tenant_a, owner_of_a)
        await signed_in.get("/dashboard/members")
        r = await signed_in.post(f"/dashboard/members/{me}/role", {"role": "admin"})
        assert r.status_code == 409 and "last_owner" in r.text
        assert (await api.find_user(tenant_a.principal, owner_of_a)).role == "owner"

    @pytest.mark.parametrize("role", ["member", "viewer"])
    async def test_others_see_no_page_and_their_posts_are_refused(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str, role: str
    ) -> None:
        owner = await member_id(api, tenant_a, owner_of_a)
        await browser.sign_in(await add_member(api, tenant_a, role))
        page = await browser.get("/dashboard/members")
        assert page.status_code == 403 and f"remove-{owner}" not in page.text
        await browser.get("/dashboard")
        assert (await browser.post(f"/dashboard/members/{owner}/remove")).status_code == 403
        await browser.get("/dashboard")
        assert (await browser.post(f"/dashboard/members/{owner}/role", {"role": "viewer"})).status_code == 403
        assert (await api.find_user(tenant_a.principal, owner_of_a)).role == "owner"


async def test_another_organisations_members_are_not_found(
    browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    email = await add_member(api, tenant_a, "member")
    theirs = await member_id(api, tenant_a, email)
    inv = await api.invite_member(tenant_a.principal, InvitationIn(email="a-only@example.com", role="member"))
    await browser.sign_in(await add_member(api, tenant_b, "owner"))
    page = await browser.get("/dashboard/members")
    assert email not in page.text and "a-only@example.com" not in page.text
    for path, data in (
        (f"/dashboard/members/{theirs}/role", {"role": "viewer"}),
        (f"/dashboard/members/{theirs}/remove", {}),
        (f"/dashboard/members/invitations/{inv.id}/revoke", {}),
    ):
        r = await browser.post(path, data)
        assert r.status_code == 404, path
        await browser.get("/dashboard/members")
    assert (await api.find_user(tenant_a.principal, email)).role == "member"
    assert [i.id for i in (await api.list_invitations(tenant_a.principal)).data] == [inv.id]


async def test_a_form_without_its_token_is_refused(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    email = await add_member(api, tenant_a, "member")
    uid = await member_id(api, tenant_a, email)
    await signed_in.get("/dashboard/members")
    r = await signed_in.post("/dashboard/members/invite", {"email": "nobody@example.com", "role": "viewer"}, csrf="")
    assert r.status_code == 403 and "csrf_failed" in r.text
    assert (await signed_in.post(f"/dashboard/members/{uid}/remove", csrf="")).status_code == 403
    assert (await api.list_invitations(tenant_a.principal)).data == []
    assert (await api.find_user(tenant_a.principal, email)).role == "member"
