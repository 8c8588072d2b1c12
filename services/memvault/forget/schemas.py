from __future__ import annotations

import uuid
from typing import ClassVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memvault.fields import Body
from memvault.memories.schemas import OwnerId


class ForgetIn(Body):
    """Exactly one selector: a user, a session, an entity, or the whole namespace."""

    guard_secrets = False  # never stored: it only selects what to read or forget
    # Its user_id is a selector (forget this user), checked against the caller but never filled in.
    binds_user: ClassVar[bool] = False

    model_config = ConfigDict(extra="forbid")

    user_id: OwnerId = None
    session_id: OwnerId = None
    entity_id: uuid.UUID | None = None
    all: bool = Field(default=False, description="Everything in the namespace (the namespace itself stays).")
    hard: bool = Field(
        default=False,
        description="false: archive the memories (reversible, out of search). true: delete them, every version, "
        "their history, the selected events, sessions, traces and entity links, for good.",
    )

    @model_validator(mode="after")
    def _one_selector(self) -> ForgetIn:
        chosen = [n for n in ("user_id", "session_id", "entity_id") if getattr(self, n) is not None]
        if self.all:
            chosen.append("all")
        if len(chosen) != 1:
            raise ValueError("give exactly one of user_id, session_id, entity_id or all: true")
        return self

    @property
    def selector(self) -> str:
        return "all" if self.all else next(n for n in ("user_id", "session_id", "entity_id") if getattr(self, n))


class ForgetOut(BaseModel):
    hard: bool
    selector: str
    memories: int = Field(description="Memories archived (soft) or deleted with all their versions (hard).")
    events: int
    sessions: int
    traces: int
    entities: int
    relations: int
