from __future__ import annotations

import uuid
from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field


class AuditEntryOut(BaseModel):
    id: int
    at: datetime
    actor: str = Field(description="Who: `key:<id>`, `cli`, `system`, or an OAuth subject.")
    actor_email: str | None = Field(
        default=None, description="The member's email when the actor is a member (`user:<id>`) still in the tenant."
    )
    action: str = Field(description="What, as `<thing>.<verb>`, e.g. `memory.create`, `forget.hard`.")
    namespace: str | None
    namespace_id: uuid.UUID | None
    target_id: str | None
    detail: dict[str, Any] = Field(description="Counts and field names; never memory content.")


class AuditPage(BaseModel):
    data: list[AuditEntryOut]
    next_cursor: str | None
