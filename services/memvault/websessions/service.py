"""WebSessionOps: signing a tenant user in to the dashboard, and the Principal each page acts as.

The password check is the MCP sign-in's own (SignInOps.check_password: Argon2id, the per-address
and per-account limits, verified and enabled users only). A session acts with the user's role's
scopes and namespace allow-list and is bound to the user like an OAuth grant (principal.py
bind_user): a member's explorer shows what that member may read, nothing more. Both are read
afresh on every page, so a changed role or a disabled user takes effect at the next click.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

from memvault.errors import Unauthenticated
from memvault.oauth import repository as users
from memvault.oauth.signin import SignInOps
from memvault.principal import Principal
from memvault.tenants import repository as tenants
from memvault.websessions import repository as repo

# Sliding expiry is written at most this often: a page view is not a write each time.
TOUCH_EVERY = timedelta(minutes=5)


class SignInRequired(Unauthenticated):
    code = "sign_in_required"
    title = "Sign in"


@dataclass(frozen=True)
class SignedIn:
    """The signed-in person behind a dashboard request."""

    principal: Principal
    session_id: uuid.UUID
    user_id: uuid.UUID
    email: str
    name: str
    role: str
    tenant_name: str
    # The token every form of this session carries (web/csrf.py): derived from the cookie's secret,
    # which another site can neither read nor guess.
    csrf: str


def _hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def csrf_of(token: str) -> str:
    return hmac.new(token.encode(), b"memvault dashboard form", hashlib.sha256).hexdigest()


class WebSessionOps(SignInOps):
    async def open_web_session(
        self,
        email: str,
        password: str,
        *,
        address: str | None = None,
        user_agent: str | None = None,
        account: str | None = None,
    ) -> str:
        """Check the password and start a session; the cookie's token, shown only here."""
        found = await self.check_password(email, password, address=address, account=account)
        token = secrets.token_urlsafe(32)
        expires_at = datetime.now(UTC) + timedelta(seconds=self._settings.web_session_idle_s)
        async with self._db.tenant_tx(found.tenant_id) as tx:
            await users.mark_login(tx.session, found.tenant_id, found.id)
            await repo.create(
                tx.session,
                found.tenant_id,
                user_id=found.id,
                token_hash=_hash(token),
                expires_at=expires_at,
                address=address,
                user_agent=(user_agent or "")[:300] or None,
            )
        return token

    async def web_session(self, token: str | None) -> SignedIn:
        """The person a session cookie stands for, or SignInRequired (none, ended, expired, or the
        user disabled or removed since)."""
        if not token:
            raise SignInRequired("Sign in to open the dashboard.")
        async with self._db.unscoped() as s:
            found = await repo.find(s, _hash(token))
        if found is None:
            raise SignInRequired("Your sign-in has ended: sign in again.")
        now = datetime.now(UTC)
        async with self._db.tenant_tx(found.tenant_id) as tx:
            user = await users.get_user(tx.session, found.tenant_id, found.user_id)
            tenant = await tenants.get(tx.session, found.tenant_id)
            row = await repo.get(tx.session, found.tenant_id, found.id)
            if user is None or user.disabled_at is not None or tenant is None or row is None:
                raise SignInRequired("This account is no longer active here: sign in again.")
            if now - row.last_seen_at > TOUCH_EVERY:
                latest = row.created_at + timedelta(seconds=self._settings.web_session_max_s)
                idle = now + timedelta(seconds=self._settings.web_session_idle_s)
                await repo.touch(tx.session, found.tenant_id, found.id, expires_at=min(idle, latest))
        principal = Principal(
            tenant_id=found.tenant_id,
            scopes=frozenset(user.scopes),
            subject=f"user:{user.id}",
            namespaces=frozenset(user.namespaces) if user.namespaces is not None else None,
            user_id=str(user.id),
        )
        return SignedIn(
            principal=principal,
            session_id=found.id,
            user_id=user.id,
            email=user.email,
            name=user.name,
            role=user.role,
            tenant_name=tenant.name,
            csrf=csrf_of(token),
        )

    async def end_web_session(self, token: str | None) -> None:
        """Sign out: the session stops working at once, wherever its cookie was copied to."""
        if not token:
            return
        async with self._db.unscoped() as s:
            found = await repo.find(s, _hash(token))
        if found is None:
            return
        async with self._db.tenant_tx(found.tenant_id) as tx:
            await repo.end(tx.session, found.tenant_id, found.id)
