"""MemberOps: a tenant's members (its OAuth users) with roles, and invitations by email.

Managing members needs the admin scope and an unrestricted principal: an owner or admin member,
or an admin key over every namespace (members reach the whole tenant). The owner rules live in
members/rules.py; the members quota of the plan is checked in plans/quotas.py, counting active
members and pending invitations (an invitation holds its place until it is accepted or ends).
"""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from sqlalchemy.exc import IntegrityError

from memvault.errors import Conflict
from memvault.mail import Message
from memvault.members import repository as inv_repo
from memvault.members import rules
from memvault.members.links import INVITE_TYP, InvalidLink, LinkExpired, LinkOps
from memvault.members.roles import ROLE_SCOPES
from memvault.members.schemas import (
    AcceptedOut,
    AcceptIn,
    InvitationIn,
    InvitationOut,
    InvitationPage,
    MemberOut,
    MemberPage,
    MemberPatch,
)
from memvault.oauth import repository as oauth_repo
from memvault.oauth import secrets
from memvault.oauth.errors import UserExists, WeakPassword
from memvault.operations import operation
from memvault.plans.quotas import require_room
from memvault.plans.room import take_room
from memvault.principal import Principal
from memvault.ratelimit import Limit, client_address
from memvault.tenants import repository as tenants_repo

ACCEPT_PATH = "/invitations/accept"


class InvitationUsed(Conflict):
    code = "invitation_used"
    title = "Invitation already used"


class InvitationNotFound(rules.MemberNotFound):
    code = "invitation_not_found"
    title = "Invitation not found"


def check_password(password: str) -> None:
    if len(password) < secrets.MIN_PASSWORD_LENGTH:
        raise WeakPassword(
            f"The password needs at least {secrets.MIN_PASSWORD_LENGTH} characters.", extra={"field": "password"}
        )


class MemberOps(LinkOps):
    @operation("read")
    async def list_members(self, p: Principal, *, limit: int = 50, cursor: str | None = None) -> MemberPage:
        """The tenant's members, newest first, with their roles; follow `next_cursor`."""
        p.require("admin")
        within = None if p.namespaces is None else sorted(p.namespaces)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await oauth_repo.page_users(
                tx.session, p.tenant_id, within=within, limit=limit, cursor=cursor
            )
        return MemberPage(data=[MemberOut.model_validate(r) for r in rows], next_cursor=next_cursor)

    @operation("write")
    async def invite_member(self, p: Principal, body: InvitationIn) -> InvitationOut:
        """Invite someone by email with a role: they get a signed link that works for
        invitation_ttl_s, and become a member when they choose a password with it."""
        p.require_reach("admin", None)
        limits = (await self._plans.of(p.tenant_id)).limits
        expires = datetime.now(UTC) + timedelta(seconds=self._settings.invitation_ttl_s)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            actor = await rules.acting_role(tx.session, p)
            rules.may_assign(p, actor, body.role)
            if await oauth_repo.user_by_email(tx.session, p.tenant_id, body.email) is not None:
                raise UserExists(f"{body.email!r} is already a member.", extra={"field": "email"})
            used = await oauth_repo.count_active_users(tx.session, p.tenant_id)
            used += await inv_repo.count_pending(tx.session, p.tenant_id)
            await take_room(tx, limits, "members", used=used)
            row = await inv_repo.create(
                tx.session, p.tenant_id, email=body.email, role=body.role, invited_by=p.subject, expires_at=expires
            )
            tenant = await tenants_repo.get(tx.session, p.tenant_id)
            assert tenant is not None
            await self._audit(tx, p, "member.invite", target_id=str(row.id), detail={"role": body.role})
            link = await self._sign_link(
                INVITE_TYP,
                ACCEPT_PATH,
                {"tid": str(p.tenant_id), "inv": str(row.id)},
                self._settings.invitation_ttl_s,
            )
            # Sent before the commit: an invitation whose mail failed is not left behind.
            await self._mailer.send(
                Message(
                    to=body.email,
                    subject=f"You are invited to {tenant.name} on memvault",
                    text=(
                        f"You are invited to join {tenant.name} on memvault as {body.role}.\n\n"
                        f"Choose a password to accept:\n{self._endpoint(ACCEPT_PATH)}?token={link}\n\n"
                        f"The link works until {expires:%Y-%m-%d %H:%M} UTC."
                    ),
                )
            )
        return InvitationOut.model_validate(row)

    @operation("read")
    async def list_invitations(
        self, p: Principal, *, pending: bool = True, limit: int = 50, cursor: str | None = None
    ) -> InvitationPage:
        """Invitations newest first (by default only those that may still be accepted)."""
        p.require_reach("admin", None)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await rules.acting_role(tx.session, p)
            rows, next_cursor = await inv_repo.page(
                tx.session, p.tenant_id, pending_only=pending, limit=limit, cursor=cursor
            )
        return InvitationPage(data=[InvitationOut.model_validate(r) for r in rows], next_cursor=next_cursor)

    @operation("write")
    async def revoke_invitation(self, p: Principal, invitation_id: uuid.UUID) -> InvitationOut:
        """End an invitation: its link stops working."""
        p.require_reach("admin", None)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            actor = await rules.acting_role(tx.session, p)
            row = await inv_repo.lock(tx.session, p.tenant_id, invitation_id)
            if row is None:
                raise InvitationNotFound(f"No invitation with id {invitation_id}.")
            rules.may_assign(p, actor, row.role)
            row = await inv_repo.revoke(tx.session, p.tenant_id, invitation_id)
            assert row is not None
            await self._audit(tx, p, "member.invite_revoke", target_id=str(invitation_id))
        return InvitationOut.model_validate(row)

    async def accept_invitation(self, body: AcceptIn, *, address: str | None = None) -> AcceptedOut:
        """Unauthenticated: the link's token is the proof. Makes the invited address a member of
        the inviting tenant (a user of its own there, with this password), verified by the link."""
        limit = Limit("invitation-accept", self._settings.invitation_accept_limit)
        await self._limiter.hit(limit, client_address(address), what="invitation acceptances")
        claims = await self._read_link(body.token, INVITE_TYP, ACCEPT_PATH, ("tid", "inv"))
        try:
            tenant_id, invitation_id = uuid.UUID(str(claims["tid"])), uuid.UUID(str(claims["inv"]))
        except ValueError as exc:
            raise InvalidLink("This link is not valid.") from exc
        check_password(body.password)
        password_hash = await secrets.hash_password(body.password)
        limits = (await self._plans.of(tenant_id)).limits
        try:
            async with self._db.tenant_tx(tenant_id) as tx:
                inv = await inv_repo.lock(tx.session, tenant_id, invitation_id)
                if inv is None:
                    raise InvalidLink("This link is not valid.")
                if inv.accepted_at is not None:
                    raise InvitationUsed("This invitation was already accepted; sign in instead.")
                if inv.revoked_at is not None or inv.expires_at <= datetime.now(UTC):
                    raise LinkExpired("This invitation has ended; ask for a new one.")
                # This invitation held its place among the pending ones; now it becomes a member.
                used = await oauth_repo.count_active_users(tx.session, tenant_id)
                # Not take_room: the invitation announced this place when it took it.
                require_room(limits, "members", used=used)
                user = await oauth_repo.create_user(
                    tx.session,
                    tenant_id,
                    email=inv.email,
                    name=body.name,
                    password_hash=password_hash,
                    role=inv.role,
                    namespaces=None,
                    verified=True,
                )
                await inv_repo.mark_accepted(tx.session, tenant_id, invitation_id, user.id)
                tenant = await tenants_repo.get(tx.session, tenant_id)
                assert tenant is not None
                me = Principal(tenant_id=tenant_id, scopes=frozenset(), subject=f"user:{user.id}")
                await self._audit(tx, me, "member.join", target_id=str(user.id), detail={"role": inv.role})
        except IntegrityError as exc:
            raise UserExists("This address is already a member; sign in instead.") from exc
        return AcceptedOut(organisation=tenant.name, member=MemberOut.model_validate(user))

    @operation("write")
    async def change_member_role(self, p: Principal, user_id: uuid.UUID, body: MemberPatch) -> MemberOut:
        """Give a member another role. Taking scopes away also ends their OAuth grants, so their
        clients' tokens stop now and sign in again with what the new role allows."""
        p.require_reach("admin", None)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            actor = await rules.acting_role(tx.session, p)
            target = await oauth_repo.get_user(tx.session, p.tenant_id, user_id)
            if target is None:
                raise rules.MemberNotFound(f"No member with id {user_id}.")
            rules.may_assign(p, actor, body.role)
            await rules.may_change(tx.session, p, actor, target, body.role)
            before = target.role
            row = await oauth_repo.set_role(tx.session, p.tenant_id, user_id, body.role)
            assert row is not None
            if not set(ROLE_SCOPES[before]) <= set(ROLE_SCOPES[body.role]):
                await oauth_repo.revoke_grants(tx.session, p.tenant_id, user_id=user_id, reason="role_changed")
            await self._audit(tx, p, "member.role", target_id=str(user_id), detail={"from": before, "to": body.role})
        return MemberOut.model_validate(row)

    @operation("write")
    async def remove_member(self, p: Principal, user_id: uuid.UUID) -> MemberOut:
        """Remove a member: they can no longer sign in, and their grants and tokens end now."""
        p.require_reach("admin", None)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            actor = await rules.acting_role(tx.session, p)
            target = await oauth_repo.get_user(tx.session, p.tenant_id, user_id)
            if target is None:
                raise rules.MemberNotFound(f"No member with id {user_id}.")
            await rules.may_change(tx.session, p, actor, target, None)
            out = MemberOut.model_validate(target)
            await oauth_repo.delete_user(tx.session, p.tenant_id, user_id)
            await self._audit(tx, p, "member.remove", target_id=str(user_id), detail={"role": target.role})
        return out
