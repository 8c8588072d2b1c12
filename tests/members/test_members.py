"""Members and roles over HTTP: invitations by mail, roles mapped onto OAuth scopes, the owner
rules, the members quota, and one tenant's admin never reaching another's members."""

from __future__ import annotations

import asyncio
import base64
import json

import httpx
import pytest

from memvault.errors import Forbidden
from memvault.members.links import INVITE_TYP
from memvault.members.rules import OwnerRequired
from memvault.members.schemas import InvitationIn, MemberPatch
from memvault.members.service import ACCEPT_PATH
from memvault.principal import Principal
from tests.conftest import Tenant
from tests.members.conftest import email, invite_and_accept, sign_up, submit
from tests.members.smtp import SmtpStub
from tests.oauth.conftest import PASSWORD, Server, mcp_ping, obtain_tokens


def _h(t: Tenant) -> dict[str, str]:
    return t.headers


class TestInvitations:
    async def test_invited_members_sign_in_with_the_scopes_of_their_role(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
    ) -> None:
        member = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "member")
        viewer = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "viewer")
        admin = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "admin")
        [mail] = smtp.to(member.email)
        assert tenant_x.name in mail.subject and "as member" in mail.text
        for user, scope in ((member, "read write"), (viewer, "read"), (admin, "read write")):
            tokens = await obtain_tokens(http, mserver, user)
            assert tokens.body["scope"] == scope, user
            assert (await mcp_ping(http, mserver, tokens.access_token)).status_code == 200
        listed = (await http.get(f"{mserver.base}/v1/members", headers=_h(tenant_x))).json()["data"]
        roles = {m["email"]: (m["role"], m["scopes"]) for m in listed}
        assert roles == {
            member.email: ("member", ["read", "write"]),
            viewer.email: ("viewer", ["read"]),
            admin.email: ("admin", ["read", "write", "admin", "act_as"]),
        }

    async def test_the_html_page_accepts(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
    ) -> None:
        address = email()
        r = await http.post(f"{mserver.base}/v1/members/invitations", json={"email": address}, headers=_h(tenant_x))
        assert r.status_code == 201 and r.json()["role"] == "member"
        link = smtp.to(address)[-1].link(ACCEPT_PATH)
        page = await http.get(link)
        assert page.status_code == 200 and 'action="/invitations/accept"' in page.text
        token = link.split("?token=", 1)[1]
        done = await submit(http, link, {"token": token, "password": PASSWORD})
        assert done.status_code == 201 and tenant_x.name in done.text

    async def test_a_link_works_once_and_not_after_it_ends(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
    ) -> None:
        base = mserver.base
        address = email()
        inv = (await http.post(f"{base}/v1/members/invitations", json={"email": address}, headers=_h(tenant_x))).json()
        token = smtp.to(address)[-1].token(ACCEPT_PATH)
        weak = await http.post(f"{base}/v1/invitations/accept", json={"token": token, "password": "short"})
        assert weak.status_code == 422 and weak.json()["code"] == "weak_password"
        ok = await http.post(f"{base}/v1/invitations/accept", json={"token": token, "password": PASSWORD})
        assert ok.status_code == 201
        again = await http.post(f"{base}/v1/invitations/accept", json={"token": token, "password": PASSWORD})
        assert again.status_code == 409 and again.json()["code"] == "invitation_used"
        pending = (await http.get(f"{base}/v1/members/invitations", headers=_h(tenant_x))).json()["data"]
        assert inv["id"] not in [i["id"] for i in pending]

        # Revoked: the link ends.
        other = email()
        inv = (await http.post(f"{base}/v1/members/invitations", json={"email": other}, headers=_h(tenant_x))).json()
        token = smtp.to(other)[-1].token(ACCEPT_PATH)
        assert (
            await http.delete(f"{base}/v1/members/invitations/{inv['id']}", headers=_h(tenant_x))
        ).status_code == 200
        r = await http.post(f"{base}/v1/invitations/accept", json={"token": token, "password": PASSWORD})
        assert r.status_code == 410 and r.json()["code"] == "link_expired"

        # Expired: refused by the signature's expiry.
        stale = await mserver.api._sign_link(INVITE_TYP, ACCEPT_PATH, {"tid": str(tenant_x.id), "inv": inv["id"]}, -120)
        r = await http.post(f"{base}/v1/invitations/accept", json={"token": stale, "password": PASSWORD})
        assert r.status_code == 410 and r.json()["code"] == "link_expired"

    async def test_an_existing_member_cannot_be_invited_twice(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
    ) -> None:
        member = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "member")
        r = await http.post(
            f"{mserver.base}/v1/members/invitations", json={"email": member.email}, headers=_h(tenant_x)
        )
        assert r.status_code == 409 and r.json()["code"] == "user_exists"

    async def test_the_members_quota_counts_pending_invitations(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
    ) -> None:
        org = await sign_up(http, mserver, smtp)  # the free plan: 3 members, the owner is one
        base = mserver.base
        for _ in range(2):
            r = await http.post(f"{base}/v1/members/invitations", json={"email": email()}, headers=org.headers)
            assert r.status_code == 201, r.text
        sent = len(smtp.messages)
        address = email()
        r = await http.post(f"{base}/v1/members/invitations", json={"email": address}, headers=org.headers)
        assert r.status_code == 403
        assert r.json()["code"] == "quota_exceeded" and r.json()["quota"] == "members" and r.json()["used"] == 3
        assert len(smtp.messages) == sent
        pending = (await http.get(f"{base}/v1/members/invitations", headers=org.headers)).json()["data"]
        assert address not in [i["email"] for i in pending] and len(pending) == 2
        r = await http.post(f"{base}/v1/users", json={"email": email(), "password": PASSWORD}, headers=org.headers)
        assert r.status_code == 403 and r.json()["code"] == "quota_exceeded"


class TestOwners:
    async def test_the_last_owner_stays(self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub) -> None:
        org = await sign_up(http, mserver, smtp)
        base, owner = mserver.base, org.owner.id
        r = await http.patch(f"{base}/v1/members/{owner}", json={"role": "admin"}, headers=org.headers)
        assert r.status_code == 409 and r.json()["code"] == "last_owner"
        r = await http.delete(f"{base}/v1/members/{owner}", headers=org.headers)
        assert r.status_code == 409 and r.json()["code"] == "last_owner"
        r = await http.post(f"{base}/v1/users/{owner}/disable", headers=org.headers)
        assert r.status_code == 409 and r.json()["code"] == "last_owner"
        # With a second owner, the first may step down.
        second = await invite_and_accept(http, mserver, smtp, org.headers, org.owner.tenant, "owner")
        r = await http.patch(f"{base}/v1/members/{owner}", json={"role": "admin"}, headers=org.headers)
        assert r.status_code == 200 and r.json()["role"] == "admin"
        r = await http.delete(f"{base}/v1/members/{second.id}", headers=org.headers)
        assert r.status_code == 409 and r.json()["code"] == "last_owner"

    async def test_an_admin_member_cannot_make_or_unmake_owners(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
    ) -> None:
        """As the dashboard will act: a signed-in admin member's own role decides."""
        org = await sign_up(http, mserver, smtp)
        tenant = org.owner.tenant
        admin = await invite_and_accept(http, mserver, smtp, org.headers, tenant, "admin")
        member = await invite_and_accept(http, mserver, smtp, org.headers, tenant, "member")
        as_admin = Principal(tenant_id=tenant.id, scopes=frozenset({"admin"}), subject=f"user:{admin.id}")
        api = mserver.api
        for attempt in (
            api.invite_member(as_admin, InvitationIn(email=email(), role="owner")),
            api.change_member_role(as_admin, member.id, MemberPatch(role="owner")),
            api.change_member_role(as_admin, org.owner.id, MemberPatch(role="viewer")),
            api.remove_member(as_admin, org.owner.id),
        ):
            with pytest.raises(OwnerRequired):
                await attempt
        # What an admin may do: manage members below owner.
        out = await api.change_member_role(as_admin, member.id, MemberPatch(role="viewer"))
        assert out.role == "viewer"
        # A viewer's session (were it to carry the admin scope) manages nothing.
        as_viewer = Principal(tenant_id=tenant.id, scopes=frozenset({"admin"}), subject=f"user:{out.id}")
        for call in (
            api.list_invitations(as_viewer),
            api.change_member_role(as_viewer, admin.id, MemberPatch(role="viewer")),
        ):
            with pytest.raises(Forbidden):
                await call

    async def test_a_demotion_ends_the_members_tokens(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
    ) -> None:
        member = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "member")
        tokens = await obtain_tokens(http, mserver, member)
        assert (await mcp_ping(http, mserver, tokens.access_token)).status_code == 200
        r = await http.patch(f"{mserver.base}/v1/members/{member.id}", json={"role": "viewer"}, headers=_h(tenant_x))
        assert r.status_code == 200 and r.json()["scopes"] == ["read"]
        assert (await mcp_ping(http, mserver, tokens.access_token)).status_code == 401
        assert (await obtain_tokens(http, mserver, member)).body["scope"] == "read"
        # Removed: no sign-in at all.
        assert (await http.delete(f"{mserver.base}/v1/members/{member.id}", headers=_h(tenant_x))).status_code == 200
        listed = (await http.get(f"{mserver.base}/v1/members", headers=_h(tenant_x))).json()["data"]
        assert member.email not in [m["email"] for m in listed]


class TestAcrossTenants:
    async def test_an_admin_of_one_tenant_never_reaches_anothers_members(
        self, http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant, tenant_y: Tenant
    ) -> None:
        base = mserver.base
        theirs = await invite_and_accept(http, mserver, smtp, _h(tenant_y), tenant_y, "member")
        address = email()
        inv = (await http.post(f"{base}/v1/members/invitations", json={"email": address}, headers=_h(tenant_y))).json()
        token = smtp.to(address)[-1].token(ACCEPT_PATH)

        listed = (await http.get(f"{base}/v1/members", headers=_h(tenant_x))).json()["data"]
        assert theirs.email not in [m["email"] for m in listed]
        assert (await http.get(f"{base}/v1/members/invitations", headers=_h(tenant_x))).json()["data"] == []
        r = await http.patch(f"{base}/v1/members/{theirs.id}", json={"role": "admin"}, headers=_h(tenant_x))
        assert r.status_code == 404 and r.json()["code"] == "member_not_found"
        r = await http.delete(f"{base}/v1/members/{theirs.id}", headers=_h(tenant_x))
        assert r.status_code == 404 and r.json()["code"] == "member_not_found"
        r = await http.delete(f"{base}/v1/members/invitations/{inv['id']}", headers=_h(tenant_x))
        assert r.status_code == 404 and r.json()["code"] == "invitation_not_found"

        # Y's invitation cannot be turned into one for X: the tenant is inside the signature.
        head, claims, sig = token.split(".")
        body = json.loads(base64.urlsafe_b64decode(claims + "=" * (-len(claims) % 4)))
        body["tid"] = str(tenant_x.id)
        swapped = base64.urlsafe_b64encode(json.dumps(body).encode()).decode().rstrip("=")
        r = await http.post(
            f"{base}/v1/invitations/accept", json={"token": f"{head}.{swapped}.{sig}", "password": PASSWORD}
        )
        assert r.status_code == 400 and r.json()["code"] == "invalid_link"
        # Nor does naming Y's invitation in a link X's server signed for X.
        forged = await mserver.api._sign_link(INVITE_TYP, ACCEPT_PATH, {"tid": str(tenant_x.id), "inv": inv["id"]}, 60)
        r = await http.post(f"{base}/v1/invitations/accept", json={"token": forged, "password": PASSWORD})
        assert r.status_code == 400 and r.json()["code"] == "invalid_link"
        listed = (await http.get(f"{base}/v1/members", headers=_h(tenant_x))).json()["data"]
        assert address not in [m["email"] for m in listed]
        # Y's own link still works, into Y.
        r = await http.post(f"{base}/v1/invitations/accept", json={"token": token, "password": PASSWORD})
        assert r.status_code == 201 and r.json()["organisation"] == tenant_y.name


async def test_users_and_members_are_paginated(
    http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
) -> None:
    made = [await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "viewer") for _ in range(3)]
    for path in ("/v1/users", "/v1/members"):
        seen, cursor = [], None
        while True:
            params = {"limit": 2, **({"cursor": cursor} if cursor else {})}
            page = (await http.get(f"{mserver.base}{path}", params=params, headers=_h(tenant_x))).json()
            assert len(page["data"]) <= 2
            seen += [u["email"] for u in page["data"]]
            if not (cursor := page["next_cursor"]):
                break
        assert seen == [u.email for u in reversed(made)]
    r = await http.get(f"{mserver.base}/v1/members", params={"cursor": "nonsense"}, headers=_h(tenant_x))
    assert r.status_code == 422


async def test_two_owners_stepping_down_at_once_leave_one(
    http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub
) -> None:
    """The owners are locked while the last-owner rule is checked, so two demotions at the same
    moment cannot both pass."""
    org = await sign_up(http, mserver, smtp)
    second = await invite_and_accept(http, mserver, smtp, org.headers, org.owner.tenant, "owner")
    answers = await asyncio.gather(
        *(
            http.patch(f"{mserver.base}/v1/members/{who}", json={"role": "admin"}, headers=org.headers)
            for who in (org.owner.id, second.id)
        )
    )
    assert sorted(r.status_code for r in answers) == [200, 409]
    listed = (await http.get(f"{mserver.base}/v1/members", headers=org.headers)).json()["data"]
    assert [m["role"] for m in listed].count("owner") == 1


async def test_a_failed_invitation_mail_keeps_nothing(
    http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
) -> None:
    smtp.refuse = True
    address = email()
    r = await http.post(f"{mserver.base}/v1/members/invitations", json={"email": address}, headers=_h(tenant_x))
    assert r.status_code == 503 and r.json()["code"] == "mail_unavailable"
    pending = (await http.get(f"{mserver.base}/v1/members/invitations", headers=_h(tenant_x))).json()["data"]
    assert pending == []


async def test_a_namespace_limited_key_cannot_manage_members(
    http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
) -> None:
    member = await invite_and_accept(http, mserver, smtp, _h(tenant_x), tenant_x, "member")
    made = await http.post(
        f"{mserver.base}/v1/keys",
        json={"name": "limited", "scopes": ["admin"], "namespaces": [tenant_x.namespace]},
        headers=_h(tenant_x),
    )
    limited = {"Authorization": f"Bearer {made.json()['key']}"}
    r = await http.post(f"{mserver.base}/v1/members/invitations", json={"email": email()}, headers=limited)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    r = await http.patch(f"{mserver.base}/v1/members/{member.id}", json={"role": "admin"}, headers=limited)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
    # Nor can it make an admin through /v1/users.
    body = {"email": email(), "password": PASSWORD, "role": "admin", "namespaces": [tenant_x.namespace]}
    r = await http.post(f"{mserver.base}/v1/users", json=body, headers=limited)
    assert r.status_code == 403 and r.json()["code"] == "forbidden"
