"""The SDK's members resource against the real server."""

from __future__ import annotations

import httpx

from memvault_sdk import AsyncMemVault
from tests.conftest import Tenant
from tests.members.conftest import email, invite_and_accept
from tests.members.smtp import SmtpStub
from tests.oauth.conftest import Server


async def test_members_through_the_sdk(
    http: httpx.AsyncClient, mserver: Server, smtp: SmtpStub, tenant_x: Tenant
) -> None:
    made = await invite_and_accept(http, mserver, smtp, tenant_x.headers, tenant_x, "member")
    async with AsyncMemVault(api_key=tenant_x.key, base_url=mserver.base) as client:
        invited = await client.members.invite(email(), role="viewer")
        assert invited.role == "viewer"
        pending = [i.id async for i in client.members.invitations()]
        assert pending == [invited.id]
        revoked = await client.members.revoke_invitation(invited.id)
        assert revoked.revoked_at is not None
        changed = await client.members.set_role(str(made.id), "admin")
        assert changed.role == "admin" and changed.scopes == ["read", "write", "admin", "act_as"]
        assert [m.email async for m in client.members.list(limit=1)] == [made.email]
        removed = await client.members.remove(str(made.id))
        assert removed.email == made.email
        assert [m async for m in client.members.list()] == []
