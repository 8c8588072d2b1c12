"""Reasoning traces: a task, the steps an agent took on it, and how it ended. Procedural memory that
a later agent finds by task and replays. Tables are created in migration 0002."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import Boolean, Computed, DateTime, ForeignKeyConstraint, Integer, Text, func, text
from sqlalchemy.dialects.postgresql import JSONB, TSVECTOR, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base
from memvault.memories.models import EMBEDDING_DIM


class Trace(Base):
    __tablename__ = "traces"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "namespace_id"], ["namespaces.tenant_id", "namespaces.id"], ondelete="CASCADE"
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    namespace_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    task: Mapped[str] = mapped_column(Text)
    status: Mapped[str] = mapped_column(Text, server_default="open")
    outcome: Mapped[str | None] = mapped_column(Text)
    success: Mapped[bool | None] = mapped_column(Boolean)
    user_id: Mapped[str | None] = mapped_column(Text)
    agent_id: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default=text("'{}'::jsonb"))
    embedding: Mapped[list[float] | None] = mapped_column(Vector(EMBEDDING_DIM))
    embedding_model: Mapped[str | None] = mapped_column(Text)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR,
        Computed("to_tsvector('english', task || ' ' || coalesce(outcome, ''))", persisted=True),
    )
    step_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    created_by: Mapped[str] = mapped_column(Text)
    started_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    completed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))


class TraceStep(Base):
    __tablename__ = "trace_steps"
    __table_args__ = (
        ForeignKeyConstraint(["tenant_id", "trace_id"], ["traces.tenant_id", "traces.id"], ondelete="CASCADE"),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    trace_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    seq: Mapped[int] = mapped_column(Integer, primary_key=True)
    thought: Mapped[str | None] = mapped_column(Text)
    action: Mapped[str | None] = mapped_column(Text)
    observation: Mapped[str | None] = mapped_column(Text)
    tool_name: Mapped[str | None] = mapped_column(Text)
    # none_as_null: a step without tool args stores SQL NULL, not the JSON value null.
    tool_args: Mapped[Any] = mapped_column(JSONB(none_as_null=True))
    tool_result: Mapped[Any] = mapped_column(JSONB(none_as_null=True))
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
