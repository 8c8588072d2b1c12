from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import ARRAY, DateTime, ForeignKey, Text, func, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base


class ApiKey(Base):
    __tablename__ = "api_keys"

    tenant_id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), ForeignKey("tenants.id", ondelete="CASCADE"), primary_key=True
    )
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    # Not secret: the first characters of the key, shown in listings and used to find the row.
    prefix: Mapped[str] = mapped_column(Text, unique=True)
    secret_hash: Mapped[str] = mapped_column(Text)
    name: Mapped[str] = mapped_column(Text, server_default="")
    scopes: Mapped[list[str]] = mapped_column(ARRAY(Text))
    namespaces: Mapped[list[str] | None] = mapped_column(ARRAY(Text))
    default_namespace: Mapped[str | None] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    last_used_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    revoked_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    rotated_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    # The secret a rotation replaced, accepted until previous_expires_at (the grace period).
    previous_prefix: Mapped[str | None] = mapped_column(Text, unique=True)
    previous_secret_hash: Mapped[str | None] = mapped_column(Text)
    previous_expires_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
