from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import DateTime, Text, func
from sqlalchemy.dialects.postgresql import JSONB
from sqlalchemy.orm import Mapped, mapped_column

from memvault.db.base import Base


class Plan(Base):
    """A named plan; its limits are PlanLimits as JSON (plans/limits.py). Global, not tenant data:
    every tenant may read every plan, only the operator writes them."""

    __tablename__ = "plans"

    name: Mapped[str] = mapped_column(Text, primary_key=True)
    description: Mapped[str] = mapped_column(Text, server_default="")
    limits: Mapped[dict[str, Any]] = mapped_column(JSONB, server_default="{}")
    created_at: Mapped[datetime] = mapped_column(DateTime(timezone=True), server_default=func.now())
