from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

# URL-safe, so a namespace name can sit in a path without escaping.
NAMESPACE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


class NamespaceIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAMESPACE_NAME, description="Letters, digits, '.', '_' and '-'; up to 63.")
    description: str | None = Field(default=None, max_length=2000)


class NamespaceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    description: str | None
    created_at: datetime
    memory_count: int | None = None
