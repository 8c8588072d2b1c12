"""OAuth tables (migration 0005). Clients and signing keys are global; the rest belong to a tenant."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from sqlalchemy import ARRAY, Computed, DateTime, ForeignKey, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base

# The generated column's expression, as migration 0028 wrote it (members/roles.py ROLE_SCOPES in SQL).
SCOPES_OF_ROLE = (
    "CASE role WHEN 'viewer' THEN ARRAY['read']::text[] WHEN 'member' THEN ARRAY['read', 'write']::text[] "
    "ELSE ARRAY['read', 'write', 'admin', 'act_as']::text[] END"
)


class OAuthClient(Base):
    __tablename__ = "oauth_clients"

    client_id: Mapped[str] = mapped_column(Text, primary_key=True)
    kind: Mapped[str] = mapped_column(Text)
    client_name: Mapped[str | None] = mapped_column(Text)
    redirect_uris: Mapped[list[str]] = mapped_column(ARRAY(Text))
    grant_types: Mapped[list[str]] = mapped_column(ARRAY(Text))
    scope: Mapped[str | None] = mapped_column(Text)
    # `metadata` is taken by SQLAlchemy's declarative base.
    client_metadata: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default=text("'{}'::jsonb"))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    fetched_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # When a user first let this client in; until then its requests' errors are not redirected.
    granted_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class SigningKey(Base):
    __tablename__ = "oauth_signing_keys"

    kid: Mapped[str] = mapped_column(Text, primary_key=True)
    alg: Mapped[str] = mapped_column(Text)
    private_pem: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    retired_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class OAuthUser(Base):
    __tablename__ = "oauth_users"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    # Unique per tenant (migration 0020): one address may be a user of several tenants.
    email: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text, server_default="")
    password_hash: Mapped[str] = mapped_column(Text)
    # owner, admin, member or viewer (members/roles.py); scopes follow from it (migrations 0023, 0028).
    role: Mapped[str] = mapped_column(Text, server_default="member")
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text), Computed(SCOPES_OF_ROLE, persisted=True))
    # What the user may consent to share; None: every namespace of the tenant.
    namespaces: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_login_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    disabled_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # Null until a self-serve owner follows the link mailed at sign-up; such a user cannot sign in.
    email_verified_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class OAuthGrant(Base):
    """A user's consent for one client, and the family of refresh tokens issued under it."""

    __tablename__ = "oauth_grants"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    client_id: Mapped[str] = mapped_column(Text)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    namespaces: Mapped[list[str]] = mapped_column(ARRAY(Text))
    resource: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_reason: Mapped[str | None] = mapped_column(Text)


class AuthorizationCode(Base):
    __tablename__ = "oauth_codes"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    code_hash: Mapped[str] = mapped_column(Text, primary_key=True)
    user_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    client_id: Mapped[str] = mapped_column(Text)
    redirect_uri: Mapped[str] = mapped_column(Text)
    code_challenge: Mapped[str] = mapped_column(Text)
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    namespaces: Mapped[list[str]] = mapped_column(ARRAY(Text))
    resource: Mapped[str] = mapped_column(Text)
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    grant_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))


class RefreshToken(Base):
    __tablename__ = "oauth_refresh_tokens"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    grant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    token_hash: Mapped[str] = mapped_column(Text, unique=True)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    expires_at: Mapped[datetime] = mapped_column(DateTime(timezone=True))
    used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
