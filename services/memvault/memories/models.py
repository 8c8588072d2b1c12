from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pgvector.sqlalchemy import Vector
from sqlalchemy import (
    BigInteger,
    Boolean,
    Computed,
    DateTime,
    Float,
    ForeignKeyConstraint,
    Identity,
    Integer,
    Text,
    func,
    text,
)
from sqlalchemy.dialects.postgresql import ARRAY, JSONB, TSVECTOR, UUID
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base

EMBEDDING_DIM = 384


class Memory(Base):
    __tablename__ = "memories"
    __table_args__ = (
        ForeignKeyConstraint(
            ["tenant_id", "namespace_id"], ["namespaces.tenant_id", "namespaces.id"], ondelete="CASCADE"
        ),
    )

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[uuid.UUID] = mapped_column(
        UUID(as_uuid=True), primary_key=True, server_default=text("gen_random_uuid()")
    )
    # NULL for tenant- and system-scope memories, which belong to no one namespace.
    namespace_id: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))

    type: Mapped[str] = mapped_column(Text)
    key: Mapped[str | None] = mapped_column(Text)
    content: Mapped[str] = mapped_column(Text)
    user_id: Mapped[str | None] = mapped_column(Text)
    agent_id: Mapped[str | None] = mapped_column(Text)
    session_id: Mapped[str | None] = mapped_column(Text)
    scope: Mapped[str] = mapped_column(Text, server_default="namespace")
    metadata_: Mapped[dict[str, Any]] = mapped_column("metadata", JSONB, server_default=text("'{}'::jsonb"))
    importance: Mapped[float] = mapped_column(Float, server_default=text("0.5"))
    confidence: Mapped[float] = mapped_column(Float, server_default=text("1.0"))
    state: Mapped[str] = mapped_column(Text, server_default="stable")

    # Valid time (true in the world) and record time (known to us).
    valid_from: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    valid_to: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    recorded_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    superseded_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    superseded_by: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    supersedes: Mapped[uuid.UUID | None] = mapped_column(UUID(as_uuid=True))
    source_event_ids: Mapped[list[uuid.UUID]] = mapped_column(
        ARRAY(UUID(as_uuid=True)), server_default=text("'{}'::uuid[]")
    )

    # Deferred, as in_graph below: only SQL computes with them. Loaded, a vector is a TOAST read
    # (most rows store it out of line) and 384 numbers parsed from text per row, on every get,
    # list page and neighbour (tests/memories/test_reads_leave_vectors.py).
    embedding: Mapped[list[float] | None] = mapped_column(Vector(EMBEDDING_DIM), deferred=True)
    embedding_model: Mapped[str | None] = mapped_column(Text)
    tsv: Mapped[Any] = mapped_column(
        TSVECTOR, Computed("to_tsvector('english', content)", persisted=True), deferred=True
    )
    content_hash: Mapped[str] = mapped_column(Text)
    # Whether the row's vector is in the HNSW graph; set by the database (migration 0036): past a
    # few copies of one text, the next stay out and are searched exactly. Deferred: only SQL reads it.
    in_graph: Mapped[bool] = mapped_column(Boolean, server_default=text("true"), deferred=True)

    # Insertion order (migration 0009): the tiebreak of session order, since a batch shares
    # created_at and ids are random.
    seq: Mapped[int] = mapped_column(BigInteger, Identity())
    access_count: Mapped[int] = mapped_column(Integer, server_default=text("0"))
    last_accessed_at: Mapped[datetime | None] = mapped_column(DateTime(timezone=True))
    created_by: Mapped[str] = mapped_column(Text)
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
    updated_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())


class MemoryHistoryEntry(Base):
    __tablename__ = "memory_history"

    tenant_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True), primary_key=True)
    id: Mapped[int] = mapped_column(BigInteger, Identity(), primary_key=True)
    memory_id: Mapped[uuid.UUID] = mapped_column(UUID(as_uuid=True))
    action: Mapped[str] = mapped_column(Text)
    actor: Mapped[str] = mapped_column(Text)
    at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.clock_timestamp())
    changed_fields: Mapped[list[str]] = mapped_column(ARRAY(Text), server_default=text("'{}'::text[]"))
    snapshot: Mapped[dict[str, Any]] = mapped_column(JSONB)
