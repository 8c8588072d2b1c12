"""Preferences and facts: structured statements stored as keyed memories, so that a later one
about the same thing supersedes the earlier one without the caller inventing keys."""

from __future__ import annotations

import re
from datetime import datetime
from typing import Annotated

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, ValidationInfo, field_validator

from memvault.entities.schemas import RelationOut
from memvault.fields import Body, UnitFloat
from memvault.memories.schemas import MemoryOut, OwnerId, ScopeLevel, Timestamp, _not_blank, no_nul

# A key part: what is left of a name once case, spacing and punctuation are set aside.
_NOT_WORD = re.compile(r"[^0-9a-z]+")


def key_part(text: str) -> str:
    """`Seat Preference` and `seat-preference` name the same thing: `seat_preference`."""
    return _NOT_WORD.sub("_", text.strip().lower()).strip("_") or "_"


def _has_word(v: str) -> str:
    if not _NOT_WORD.sub("", v.lower()):
        raise ValueError("must contain a letter or digit")
    return v


Short = Annotated[
    str,
    Field(min_length=1, max_length=90),
    AfterValidator(no_nul),
    AfterValidator(_not_blank),
    AfterValidator(_has_word),
]
Long = Annotated[str, Field(min_length=1, max_length=2000), AfterValidator(no_nul), AfterValidator(_not_blank)]


class _Owned(Body):
    model_config = ConfigDict(extra="forbid")

    confidence: UnitFloat = Field(default=1.0, description="0..1, how sure the source is.")
    scope: ScopeLevel | None = Field(
        default=None, description="Who sees it; default `user` with user_id, else `session` with session_id."
    )
    user_id: OwnerId = None
    agent_id: OwnerId = None
    session_id: OwnerId = None


class PreferenceIn(_Owned):
    category: Short = Field(description="What the preference is about, e.g. `seating`, `diet`, `editor`.")
    preference: Long = Field(description="The preference itself, e.g. `window seats on long flights`.")
    context: Long | None = Field(default=None, description="When or why it applies.")

    @property
    def key(self) -> str:
        return f"preference:{key_part(self.category)}"

    def sentence(self) -> str:
        text = f"Preference ({self.category.strip()}): {self.preference.strip()}"
        return f"{text} (context: {self.context.strip()})" if self.context else text


class FactIn(_Owned):
    subject: Short = Field(description="Who or what the fact is about, e.g. `Ana`.")
    predicate: Short = Field(description="The property or relation, e.g. `works_at`, `lives in`.")
    object: Long = Field(description="Its value, e.g. `Acme`.")
    valid_from: Timestamp = Field(default=None, description="When it became true; default: unknown.")
    valid_until: Timestamp = Field(default=None, description="When it stopped or stops being true.")

    @field_validator("valid_until")
    @classmethod
    def _after_from(cls, v: datetime | None, info: ValidationInfo) -> datetime | None:
        start = info.data.get("valid_from")
        if v is not None and start is not None and v < start:
            raise ValueError("valid_until must not be before valid_from")
        return v

    @property
    def key(self) -> str:
        return f"fact:{key_part(self.subject)}:{key_part(self.predicate)}"

    @property
    def relation_type(self) -> str | None:
        """The predicate as a relation type (`works at` -> `works_at`), None when it cannot be one."""
        kind = key_part(self.predicate)
        return kind if re.fullmatch(r"[a-z][a-z0-9_]{0,62}", kind) else None

    def sentence(self) -> str:
        return f"{self.subject.strip()} {self.predicate.strip().replace('_', ' ')} {self.object.strip()}"


class FactOut(BaseModel):
    memory: MemoryOut
    relation: RelationOut | None = Field(
        description="The relation recorded between the subject's and the object's entities, when both are "
        "known entities of the namespace (by name or alias, any case)."
    )
