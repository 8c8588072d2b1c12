"""OAuth persistence. Tenant tables are always filtered by tenant_id as well as guarded by RLS;
the three lookups that precede knowing the tenant go through SECURITY DEFINER functions."""

from __future__ import annotations

import uuid
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from sqlalchemy import Select, Text, bindparam, delete, func, insert, select, text, tuple_, update
from sqlalchemy.dialects.postgresql import ARRAY as PG_ARRAY
from sqlalchemy.dialects.postgresql import insert as pg_insert
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.db.base import first_time
from memvault.db.pagination import decode_cursor, encode_cursor, newest_first
from memvault.namespaces.models import Namespace
from memvault.oauth.models import AuthorizationCode, OAuthClient, OAuthGrant, OAuthUser, RefreshToken, SigningKey

# ---- clients (global) ---------------------------------------------------------------------


async def get_client(s: AsyncSession, client_id: str) -> OAuthClient | None:
    return await s.get(OAuthClient, client_id)


async def save_client(s: AsyncSession, kind: str, client_id: str, meta: dict[str, Any]) -> OAuthClient:
    """Insert a client, or (a re-fetched metadata document) replace what we knew of it."""
    values = {
        "client_id": client_id,
        "kind": kind,
        "client_name": meta.get("client_name"),
        "redirect_uris": meta["redirect_uris"],
        "grant_types": meta["grant_types"],
        "scope": meta.get("scope"),
        "client_metadata": meta,
        "fetched_at": func.now() if kind == "cimd" else None,
    }
    new = pg_insert(OAuthClient).values(**values)
    stmt = new.on_conflict_do_update(
        index_elements=[OAuthClient.client_id],
        set_={
            c: new.excluded[c]
            for c in ("kind", "client_name", "redirect_uris", "grant_types", "scope", "metadata", "fetched_at")
        },
    ).returning(OAuthClient)
    row = await s.scalar(stmt, execution_options={"populate_existing": True})
    assert row is not None
    return row


async def mark_client_granted(s: AsyncSession, client_id: str) -> None:
    await s.execute(
        update(OAuthClient)
        .where(OAuthClient.client_id == client_id, OAuthClient.granted_at.is_(None))
        .values(granted_at=func.now()),
        execution_options={"synchronize_session": False},
    )


# ---- signing keys (global) ------------------------------------------------------------------


async def signing_keys(s: AsyncSession) -> list[SigningKey]:
    """Every kept key, newest first."""
    return list((await s.scalars(select(SigningKey).order_by(SigningKey.created_at.desc()))).all())


async def rotate_signing_keys(
    s: AsyncSession, *, kid: str, alg: str, private_pem: str, now: datetime, drop_retired_before: datetime
) -> None:
    """Retire every key, add the new one, and drop the keys retired before ``drop_retired_before``."""
    await s.execute(
        update(SigningKey).where(SigningKey.retired_at.is_(None)).values(retired_at=now),
        execution_options={"synchronize_session": False},
    )
    await s.execute(insert(SigningKey).values(kid=kid, alg=alg, private_pem=private_pem))
    await s.execute(
        delete(SigningKey).where(SigningKey.retired_at < drop_retired_before),
        execution_options={"synchronize_session": False},
    )


# ---- users ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class FoundUser:
    tenant_id: uuid.UUID
    id: uuid.UUID
    password_hash: str
    disabled_at: datetime | None
    tenant_name: str
    email_verified: bool


async def find_users_by_email(s: AsyncSession, email: str) -> list[FoundUser]:
    """The address's users in every tenant, oldest first (sign-in does not know the tenant yet)."""
    rows = (await s.execute(text("SELECT * FROM memvault_find_oauth_user(:e)"), {"e": email})).mappings().all()
    return [FoundUser(**row) for row in rows]


async def create_user(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    email: str,
    name: str,
    password_hash: str,
    role: str,
    namespaces: list[str] | None,
    verified: bool = True,
) -> OAuthUser:
    row = await s.scalar(
        insert(OAuthUser)
        .values(
            tenant_id=tenant_id,
            email=email,
            name=name,
            password_hash=password_hash,
            role=role,
            namespaces=namespaces,
            email_verified_at=func.now() if verified else None,
        )
        .returning(OAuthUser)
    )
    assert row is not None
    return row


async def get_user(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> OAuthUser | None:
    return await s.scalar(select(OAuthUser).where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id))


async def user_by_email(s: AsyncSession, tenant_id: uuid.UUID, email: str) -> OAuthUser | None:
    return await s.scalar(select(OAuthUser).where(OAuthUser.tenant_id == tenant_id, OAuthUser.email == email))


async def set_password_hash(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, password_hash: str) -> None:
    await s.execute(
        update(OAuthUser)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id)
        .values(password_hash=password_hash)
    )


async def list_users(s: AsyncSession, tenant_id: uuid.UUID) -> list[OAuthUser]:
    stmt = select(OAuthUser).where(OAuthUser.tenant_id == tenant_id).order_by(OAuthUser.created_at, OAuthUser.id)
    return list((await s.scalars(stmt)).all())


async def page_users(
    s: AsyncSession, tenant_id: uuid.UUID, *, within: list[str] | None, limit: int, cursor: str | None
) -> tuple[list[OAuthUser], str | None]:
    """One page of the tenant's users, newest first (db/pagination.py); with ``within``, only
    users limited to those namespaces (what a namespace-limited key may see)."""
    stmt = select(OAuthUser).where(OAuthUser.tenant_id == tenant_id)
    if within is not None:
        inside = OAuthUser.namespaces.op("<@")(bindparam("within", within, type_=PG_ARRAY(Text)))
        stmt = stmt.where(OAuthUser.namespaces.is_not(None), inside)
    rows, next_cursor = await newest_first(s, stmt, OAuthUser.created_at, OAuthUser.id, limit=limit, cursor=cursor)
    return list(rows), next_cursor


async def count_active_users(s: AsyncSession, tenant_id: uuid.UUID) -> int:
    """Members that count against the plan: every user not disabled."""
    stmt = select(func.count()).where(OAuthUser.tenant_id == tenant_id, OAuthUser.disabled_at.is_(None))
    return int(await s.scalar(stmt) or 0)


async def lock_owners(s: AsyncSession, tenant_id: uuid.UUID) -> list[uuid.UUID]:
    """The active owners, locked until the transaction ends: two owners demoting each other at
    once wait for one another, so the last owner check cannot be raced to zero owners."""
    stmt = (
        select(OAuthUser.id)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.role == "owner", OAuthUser.disabled_at.is_(None))
        .order_by(OAuthUser.id)
        .with_for_update()
    )
    return list((await s.scalars(stmt)).all())


async def set_role(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID, role: str) -> OAuthUser | None:
    stmt = (
        update(OAuthUser)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id)
        .values(role=role)
        .returning(OAuthUser)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def delete_user(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
    """Its grants, codes and refresh tokens go with it (foreign keys ON DELETE CASCADE)."""
    await s.execute(
        delete(OAuthUser).where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id),
        execution_options={"synchronize_session": False},
    )


async def verify_email(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> bool:
    """Mark the user's address verified; False if it already was (or there is no such user), so
    only the first of two concurrent verifications goes on to issue anything."""
    stmt = (
        update(OAuthUser)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id, OAuthUser.email_verified_at.is_(None))
        .values(email_verified_at=func.now())
        .returning(OAuthUser.id)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False}) is not None


async def disable_user(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> OAuthUser | None:
    stmt = (
        update(OAuthUser)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id)
        .values(disabled_at=first_time(OAuthUser.disabled_at))
        .returning(OAuthUser)
    )
    return await s.scalar(stmt, execution_options={"synchronize_session": False, "populate_existing": True})


async def mark_login(s: AsyncSession, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
    await s.execute(
        update(OAuthUser)
        .where(OAuthUser.tenant_id == tenant_id, OAuthUser.id == user_id)
        .values(last_login_at=func.now()),
        execution_options={"synchronize_session": False},
    )


async def spend_ticket(s: AsyncSession, tenant_id: uuid.UUID, ticket_id: str, expires_at: datetime) -> bool:
    """Record a sign-in ticket as answered; False if it already was. Spent tickets past their
    expiry are dropped on the way (they could not be replayed anyway)."""
    await s.execute(
        text("DELETE FROM oauth_spent_tickets WHERE tenant_id = :t AND expires_at < now()"), {"t": tenant_id}
    )
    spent = await s.scalar(
        text(
            "INSERT INTO oauth_spent_tickets (tenant_id, ticket_id, expires_at) VALUES (:t, :j, :e) "
            "ON CONFLICT DO NOTHING RETURNING ticket_id"
        ),
        {"t": tenant_id, "j": ticket_id, "e": expires_at},
    )
    return spent is not None


# ---- authorization codes ---------------------------------------------------------------------


async def insert_code(s: AsyncSession, tenant_id: uuid.UUID, **values: Any) -> None:
    await s.execute(insert(AuthorizationCode).values(tenant_id=tenant_id, **values))


async def code_tenant(s: AsyncSession, code_hash: str) -> uuid.UUID | None:
    return await s.scalar(text("SELECT memvault_find_oauth_code(:h)"), {"h": code_hash})


async def lock_code(s: AsyncSession, tenant_id: uuid.UUID, code_hash: str) -> AuthorizationCode | None:
    stmt = (
        select(AuthorizationCode)
        .where(AuthorizationCode.tenant_id == tenant_id, AuthorizationCode.code_hash == code_hash)
        .with_for_update()
    )
    return await s.scalar(stmt)


# ---- grants and refresh tokens ------------------------------------------------------------------


async def create_grant(s: AsyncSession, tenant_id: uuid.UUID, **values: Any) -> OAuthGrant:
    row = await s.scalar(insert(OAuthGrant).values(tenant_id=tenant_id, **values).returning(OAuthGrant))
    assert row is not None
    return row


async def get_grant(s: AsyncSession, tenant_id: uuid.UUID, grant_id: uuid.UUID) -> OAuthGrant | None:
    return await s.scalar(select(OAuthGrant).where(OAuthGrant.tenant_id == tenant_id, OAuthGrant.id == grant_id))


async def grant_use(s: AsyncSession, tenant_id: uuid.UUID, grant_id: uuid.UUID) -> tuple[bool, datetime | None]:
    """Whether the grant is live (not revoked, its user enabled), and when it was last used."""
    stmt = (
        select(OAuthGrant.last_used_at)
        .join(OAuthUser, (OAuthUser.tenant_id == OAuthGrant.tenant_id) & (OAuthUser.id == OAuthGrant.user_id))
        .where(
            OAuthGrant.tenant_id == tenant_id,
            OAuthGrant.id == grant_id,
            OAuthGrant.revoked_at.is_(None),
            OAuthUser.disabled_at.is_(None),
        )
    )
    found = (await s.execute(stmt)).first()
    return (found is not None, found[0] if found is not None else None)


async def revoke_grants(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    reason: str,
    grant_id: uuid.UUID | None = None,
    user_id: uuid.UUID | None = None,
) -> list[OAuthGrant]:
    """Revoke one grant, or every grant of a user; revoking twice keeps the first time and reason."""
    stmt = update(OAuthGrant).where(OAuthGrant.tenant_id == tenant_id)
    if grant_id is not None:
        stmt = stmt.where(OAuthGrant.id == grant_id)
    if user_id is not None:
        stmt = stmt.where(OAuthGrant.user_id == user_id)
    stmt = stmt.values(
        revoked_at=first_time(OAuthGrant.revoked_at),
        revoked_reason=func.coalesce(OAuthGrant.revoked_reason, reason),
    ).returning(OAuthGrant)
    return list((await s.scalars(stmt, execution_options={"synchronize_session": False})).all())


async def touch_grant(s: AsyncSession, tenant_id: uuid.UUID, grant_id: uuid.UUID) -> None:
    await s.execute(
        update(OAuthGrant)
        .where(OAuthGrant.tenant_id == tenant_id, OAuthGrant.id == grant_id)
        .values(last_used_at=func.now()),
        execution_options={"synchronize_session": False},
    )


async def list_grants(s: AsyncSession, tenant_id: uuid.UUID) -> list[tuple[OAuthGrant, str, OAuthClient]]:
    stmt = (
        _grants_with_client()
        .where(OAuthGrant.tenant_id == tenant_id)
        .order_by(OAuthGrant.created_at.desc(), OAuthGrant.id)
    )
    return [(g, email, c) for g, email, c in (await s.execute(stmt)).all()]


def _grants_with_client() -> Select[OAuthGrant, str, OAuthClient]:
    return (
        select(OAuthGrant, OAuthUser.email, OAuthClient)
        .join(OAuthUser, (OAuthUser.tenant_id == OAuthGrant.tenant_id) & (OAuthUser.id == OAuthGrant.user_id))
        .join(OAuthClient, OAuthClient.client_id == OAuthGrant.client_id)
    )


async def page_grants(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    *,
    within: list[str] | None,
    live: bool,
    limit: int,
    cursor: str | None,
) -> tuple[list[tuple[OAuthGrant, str, OAuthClient]], str | None]:
    """One page of the tenant's grants newest first (db/pagination.py's cursor), each with its
    user's email and its client; with ``within``, only grants inside those namespaces; ``live``:
    only those not revoked."""
    stmt = _grants_with_client().where(OAuthGrant.tenant_id == tenant_id)
    if within is not None:
        stmt = stmt.where(OAuthGrant.namespaces.op("<@")(bindparam("within", within, type_=PG_ARRAY(Text))))
    if live:
        stmt = stmt.where(OAuthGrant.revoked_at.is_(None))
    if cursor:
        at, row_id = decode_cursor(cursor)
        stmt = stmt.where(tuple_(OAuthGrant.created_at, OAuthGrant.id) < tuple_(at, row_id))
    stmt = stmt.order_by(OAuthGrant.created_at.desc(), OAuthGrant.id.desc()).limit(limit + 1)
    rows = [(g, email, c) for g, email, c in (await s.execute(stmt)).all()]
    if len(rows) <= limit:
        return rows, None
    last = rows[limit - 1][0]
    return rows[:limit], encode_cursor(last.created_at, last.id)


async def grant_with_client(
    s: AsyncSession, tenant_id: uuid.UUID, grant_id: uuid.UUID
) -> tuple[OAuthGrant, str, OAuthClient] | None:
    stmt = _grants_with_client().where(OAuthGrant.tenant_id == tenant_id, OAuthGrant.id == grant_id)
    found = (await s.execute(stmt)).first()
    return None if found is None else (found[0], found[1], found[2])


async def insert_refresh(
    s: AsyncSession, tenant_id: uuid.UUID, grant_id: uuid.UUID, token_hash: str, expires_at: datetime
) -> None:
    await s.execute(
        insert(RefreshToken).values(
            tenant_id=tenant_id, grant_id=grant_id, token_hash=token_hash, expires_at=expires_at
        )
    )


async def refresh_tenant(s: AsyncSession, token_hash: str) -> uuid.UUID | None:
    return await s.scalar(text("SELECT memvault_find_refresh_token(:h)"), {"h": token_hash})


async def lock_refresh(s: AsyncSession, tenant_id: uuid.UUID, token_hash: str) -> RefreshToken | None:
    stmt = (
        select(RefreshToken)
        .where(RefreshToken.tenant_id == tenant_id, RefreshToken.token_hash == token_hash)
        .with_for_update()
    )
    return await s.scalar(stmt)


async def mark_refresh_used(s: AsyncSession, tenant_id: uuid.UUID, token_id: uuid.UUID) -> None:
    await s.execute(
        update(RefreshToken)
        .where(RefreshToken.tenant_id == tenant_id, RefreshToken.id == token_id)
        .values(used_at=func.now()),
        execution_options={"synchronize_session": False},
    )


async def namespace_names(s: AsyncSession, tenant_id: uuid.UUID) -> list[str]:
    stmt = select(Namespace.name).where(Namespace.tenant_id == tenant_id).order_by(Namespace.name)
    return list((await s.scalars(stmt)).all())
