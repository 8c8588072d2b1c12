"""AccountOps: tenant users who sign in to MCP clients, and the tenant's view of which clients
they let in (grants), with revocation. REST and the CLI call these.

Admin scope throughout, and each act passes Principal.require_reach: a namespace-limited admin key
makes users limited to its namespaces, and sees, disables and revokes only users and grants that
lie within them. Otherwise such a key could make a user, sign in as it and consent to any namespace.
"""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy.exc import IntegrityError

from memvault.members import repository as invitations
from memvault.members import rules
from memvault.members.roles import role_of_scopes
from memvault.metering.service import UsageOps
from memvault.oauth import repository as repo
from memvault.oauth import secrets
from memvault.oauth.errors import GrantNotFound, UserExists, UserNotFound, WeakPassword
from memvault.oauth.models import OAuthClient
from memvault.oauth.schemas import (
    AccountOut,
    ClientOut,
    ConnectedAppOut,
    GrantOut,
    GrantPage,
    UserIn,
    UserOut,
    UserPage,
)
from memvault.operations import operation
from memvault.plans.room import take_room
from memvault.principal import Principal
from memvault.websessions import repository as websessions


class AccountOps(UsageOps):
    @operation("write")
    async def create_user(self, p: Principal, body: UserIn) -> UserOut:
        """Create a tenant user who can sign in to MCP clients with email and password."""
        # Omitted namespaces mean "as far as the creating key reaches", never further.
        namespaces = body.namespaces if body.namespaces is not None else _sorted(p.namespaces)
        p.require_reach("admin", namespaces)
        role = body.role or role_of_scopes(body.scopes)
        if len(body.password) < secrets.MIN_PASSWORD_LENGTH:
            raise WeakPassword(
                f"The password needs at least {secrets.MIN_PASSWORD_LENGTH} characters.", extra={"field": "password"}
            )
        limits = (await self._plans.of(p.tenant_id)).limits
        password_hash = await secrets.hash_password(body.password)
        try:
            async with self._db.tenant_tx(p.tenant_id) as tx:
                rules.may_assign(p, await rules.acting_role(tx.session, p), role)
                used = await repo.count_active_users(tx.session, p.tenant_id)
                used += await invitations.count_pending(tx.session, p.tenant_id)
                await take_room(tx, limits, "members", used=used)
                row = await repo.create_user(
                    tx.session,
                    p.tenant_id,
                    email=body.email,
                    name=body.name,
                    password_hash=password_hash,
                    role=role,
                    namespaces=namespaces,
                )
                await self._audit(tx, p, "user.create", target_id=str(row.id), detail={"role": role})
        except IntegrityError as exc:
            # Unique per tenant: this says nothing about other tenants' users.
            raise UserExists(
                f"A user with email {body.email!r} already exists in this account.", extra={"field": "email"}
            ) from exc
        return UserOut.model_validate(row)

    @operation("write")
    async def set_user_password(self, p: Principal, email: str, password: str) -> UserOut:
        """Give a user a new password, for one who lost theirs (the bootstrap owner's is printed
        only once). Their dashboard sessions and the grants of their MCP clients end; the owner
        rules of member changes apply (only an owner sets an owner's password)."""
        if len(password) < secrets.MIN_PASSWORD_LENGTH:
            raise WeakPassword(
                f"The password needs at least {secrets.MIN_PASSWORD_LENGTH} characters.", extra={"field": "password"}
            )
        password_hash = await secrets.hash_password(password)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            actor = await rules.acting_role(tx.session, p)
            row = await repo.user_by_email(tx.session, p.tenant_id, email.strip().lower())
            if row is None or not p.covers(row.namespaces):
                raise UserNotFound(f"No user with email {email!r}.")
            await rules.may_change(tx.session, p, actor, row, row.role)
            out = UserOut.model_validate(row)  # the update below expires the loaded row
            await repo.set_password_hash(tx.session, p.tenant_id, row.id, password_hash)
            await websessions.end_all_of(tx.session, p.tenant_id, row.id)
            # A password is reset because it was lost or leaked: every MCP client signed in with the
            # old one signs in again too (its tokens fail on their next request).
            revoked = await repo.revoke_grants(tx.session, p.tenant_id, user_id=row.id, reason="password_reset")
            await self._audit(tx, p, "user.password", target_id=str(out.id), detail={"grants": len(revoked)})
        return out

    @operation("read")
    async def list_users(self, p: Principal, *, limit: int = 50, cursor: str | None = None) -> UserPage:
        """The tenant's users newest first (never their password hashes); follow `next_cursor`."""
        p.require("admin")
        within = _sorted(p.namespaces)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await repo.page_users(
                tx.session, p.tenant_id, within=within, limit=limit, cursor=cursor
            )
        return UserPage(data=[UserOut.model_validate(r) for r in rows], next_cursor=next_cursor)

    @operation("read")
    async def find_user(self, p: Principal, email: str) -> UserOut:
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await repo.user_by_email(tx.session, p.tenant_id, email.strip().lower())
        if row is None or not p.covers(row.namespaces):
            raise UserNotFound(f"No user with email {email!r}.")
        return UserOut.model_validate(row)

    @operation("write")
    async def disable_user(self, p: Principal, user_id: uuid.UUID) -> UserOut:
        """Disable a user: no more sign-ins, and every grant they gave ends now (their clients'
        tokens stop working on the next request)."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            target = await repo.get_user(tx.session, p.tenant_id, user_id)
            if target is None:
                raise UserNotFound(f"No user with id {user_id}.")
            if target.disabled_at is None:
                # Disabling is a removal as far as owners go: never the last one.
                await rules.may_change(tx.session, p, await rules.acting_role(tx.session, p), target, None)
            row = await repo.disable_user(tx.session, p.tenant_id, user_id)
            assert row is not None
            # Raised inside the transaction, so the disabling rolls back.
            p.require_reach("admin", row.namespaces)
            revoked = await repo.revoke_grants(tx.session, p.tenant_id, user_id=user_id, reason="user_disabled")
            await self._audit(
                tx,
                p,
                "user.disable",
                target_id=str(user_id),
                detail={"grants": len(revoked)},
            )
        return UserOut.model_validate(row)

    @operation("read")
    async def get_account(self, p: Principal) -> AccountOut:
        """The tenant's account: its plan, limits and each quota's use, its users, the clients they
        signed in to, and the grants."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = [r for r in await repo.list_grants(tx.session, p.tenant_id) if p.covers(r[0].namespaces)]
            users = [u for u in await repo.list_users(tx.session, p.tenant_id) if p.covers(u.namespaces)]
        seen: dict[str, ClientOut] = {}
        for _, _, c in rows:
            seen.setdefault(
                c.client_id,
                ClientOut(
                    client_id=c.client_id,
                    client_name=c.client_name,
                    kind=c.kind,  # type: ignore[arg-type]
                    redirect_uris=c.redirect_uris,
                    created_at=c.created_at,
                ),
            )
        plan = await self.account_plan(p)
        return AccountOut(
            tenant_id=p.tenant_id,
            users=len(users),
            clients=list(seen.values()),
            grants=[_grant_out(g, email, c) for g, email, c in rows],
            plan=plan.plan,
            quotas=plan.quotas,
        )

    @operation("read")
    async def list_grants(
        self, p: Principal, *, live: bool = True, limit: int = 50, cursor: str | None = None
    ) -> GrantPage:
        """The tenant's OAuth grants (its connected apps) newest first, each with its member, client
        and the client's redirect URIs; ``live``: only those not revoked. Follow `next_cursor`."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows, next_cursor = await repo.page_grants(
                tx.session, p.tenant_id, within=_sorted(p.namespaces), live=live, limit=limit, cursor=cursor
            )
        data = [
            ConnectedAppOut(**_grant_out(g, email, c).model_dump(), redirect_uris=c.redirect_uris)
            for g, email, c in rows
        ]
        return GrantPage(data=data, next_cursor=next_cursor)

    @operation("write")
    async def revoke_grant(self, p: Principal, grant_id: uuid.UUID) -> GrantOut:
        """Revoke one grant: the client's refresh token and access tokens stop working now."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            revoked = await repo.revoke_grants(tx.session, p.tenant_id, grant_id=grant_id, reason="revoked_by_admin")
            if not revoked:
                raise GrantNotFound(f"No grant with id {grant_id}.")
            # Raised inside the transaction, so the revocation rolls back.
            p.require_reach("admin", revoked[0].namespaces)
            await self._audit(tx, p, "oauth.revoke", target_id=str(grant_id))
            row = await repo.grant_with_client(tx.session, p.tenant_id, grant_id)
        assert row is not None
        return _grant_out(*row)


def _sorted(namespaces: frozenset[str] | None) -> list[str] | None:
    return None if namespaces is None else sorted(namespaces)


def _grant_out(g: Any, email: str, c: OAuthClient) -> GrantOut:
    return GrantOut(
        id=g.id,
        user_id=g.user_id,
        user_email=email,
        client_id=g.client_id,
        client_name=c.client_name,
        scopes=g.scopes,
        namespaces=g.namespaces,
        created_at=g.created_at,
        last_used_at=g.last_used_at,
        revoked_at=g.revoked_at,
    )
