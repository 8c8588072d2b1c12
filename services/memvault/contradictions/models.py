"""Marks that two memories contradict each other, open until resolved. Created in migration 0025."""

from __future__ import annotations

import uuid
from datetime import datetime

from sqlalchemy import DateTime, ForeignKeyConstraint, Text, func, text
from sqlalchemy.dialects.postgresql import UUID
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base


class Contradiction(Base):
    __tablename__ = "contradictions"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "namespace_id"], ["namespaces.tenant_id", "namespaces.id"], ondelete="CASCADE"
        ),
        ForeignKeyConstraint(["tenant_id", "memory_id"], ["memories.tenant_id", "memories.id"], ondelete="CASCADE"),
        ForeignKeyConstraint(["tenant_id", "other_id"], ["memories.tenant_id", "memories.id"], ondelete="CASCADE"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    namespace_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    other_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    note: Mapped[str | None] = mapped_column(Text)
    state: Mapped[str] = mapped_column(Text, server_default="open")
    resolution: Mapped[str | None] = mapped_column(Text)
    kept_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    resolution_note: Mapped[str | None] = mapped_column(Text)
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    resolved_by: Mapped[str | None] = mapped_column(Text)
    resolved_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
