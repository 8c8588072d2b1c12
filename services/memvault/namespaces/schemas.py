from __future__ import annotations

import re
import uuid
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, field_validator

from memvault.fields import Body
from memvault.maintenance.schemas import OrganizeIn
from memvault.retrieval.schemas import DEFAULT_WEIGHTS, Fusion, check_weights

# URL-safe, so a namespace name can sit in a path without escaping.
NAMESPACE_NAME = r"^[A-Za-z0-9][A-Za-z0-9._-]{0,62}$"


def _namespace_names(v: list[str] | None) -> list[str] | None:
    if v is None:
        return None
    for name in v:
        if not re.fullmatch(NAMESPACE_NAME, name):
            raise ValueError(f"invalid namespace name {name!r}")
    return sorted(set(v))


# The namespaces a key or a user may reach (None: all of the tenant's), checked and without duplicates.
NamespaceNames = Annotated[list[str] | None, AfterValidator(_namespace_names)]


class NamespaceIn(Body):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(pattern=NAMESPACE_NAME, description="Letters, digits, '.', '_' and '-'; up to 63.")
    description: str | None = Field(default=None, max_length=2000)


class SearchSettings(Body):
    """Search defaults of one namespace; a request's own `weights` and `fusion` override them."""

    model_config = ConfigDict(extra="forbid")

    weights: dict[str, float] | None = Field(
        default=None, description=f"Fusion weights over the service defaults {DEFAULT_WEIGHTS}."
    )
    fusion: Fusion | None = Field(default=None, description="`weighted` (default) or `rrf`.")
    session_gap_minutes: float | None = Field(
        default=None,
        ge=0,
        le=7 * 1440,
        description="Events (`type: event`) stored without a `session_id` count as one conversation (for the "
        "context channel and `neighbours`) when they have the same owner and follow each other within this many "
        "minutes; 0: "
        "only session ids make conversations. Default: the server's (30).",
    )

    @field_validator("weights")
    @classmethod
    def _known_weights(cls, v: dict[str, float] | None) -> dict[str, float] | None:
        return check_weights(v)


class MaintenanceSchedule(OrganizeIn):
    """Maintenance that runs by itself on this namespace (docs/workers.md, "Periodic maintenance"):
    the organize request run every ``every_minutes``."""

    every_minutes: int = Field(default=1440, ge=5, le=7 * 1440, description="Time between two runs.")


class NamespaceSettings(Body):
    model_config = ConfigDict(extra="forbid")

    search: SearchSettings | None = None
    maintenance: MaintenanceSchedule | None = Field(
        default=None, description="Periodic maintenance; null: none (organize can still be called)."
    )


class NamespacePatch(Body):
    """Fields left out stay as they are. In `settings`, each part given replaces that part, and
    null clears it."""

    model_config = ConfigDict(extra="forbid")

    description: str | None = Field(default=None, max_length=2000)
    settings: NamespaceSettings | None = None


class NamespaceOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    name: str
    description: str | None
    created_at: datetime
    memory_count: int | None = None
    settings: NamespaceSettings = Field(default_factory=NamespaceSettings)


class NamespaceSummary(BaseModel):
    """A namespace as a listing shows it: its memory figure counted exactly up to a cap and
    estimated beyond it, so a page of them costs the same however much they hold."""

    id: uuid.UUID
    name: str
    description: str | None
    created_at: datetime
    memories: int = Field(description="Memory rows, versions included; an estimate when `estimated`.")
    estimated: bool = Field(description="True when `memories` is the planner's estimate (past the exact-count cap).")
    last_write_at: datetime | None = Field(description="When the newest memory row was written; null if none.")


class NamespaceSummaryPage(BaseModel):
    data: list[NamespaceSummary]
    next_after: str | None = Field(description="Pass as `after` for the next page; null on the last page.")
