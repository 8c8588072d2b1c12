from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta

from pydantic import AwareDatetime, BaseModel, ConfigDict, Field, field_validator, model_validator

from memvault.fields import Body
from memvault.namespaces.schemas import NAMESPACE_NAME, NamespaceNames
from memvault.principal import SCOPES

# The longest a key may be made to live; a key meant to last for ever has no expiry at all.
MAX_KEY_DAYS = 3650
# How long a rotated-away secret may keep working (issue 23: up to 24 h).
MAX_GRACE_S = 86_400


class KeyIn(Body):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    scopes: list[str] = Field(default_factory=lambda: ["read", "write"], min_length=1)
    namespaces: NamespaceNames = Field(
        default=None, description="Allowed namespaces; omit for every namespace of the tenant."
    )
    default_namespace: str | None = Field(default=None, pattern=NAMESPACE_NAME)
    expires_at: AwareDatetime | None = Field(
        default=None, description=f"When the key stops working (with a time zone); within {MAX_KEY_DAYS} days."
    )
    expires_in_days: int | None = Field(
        default=None, ge=1, le=MAX_KEY_DAYS, description="Instead of `expires_at`: so many days from now."
    )

    @field_validator("scopes")
    @classmethod
    def _known_scopes(cls, v: list[str]) -> list[str]:
        unknown = sorted(set(v) - set(SCOPES))
        if unknown:
            raise ValueError(f"unknown scopes {unknown}; use {list(SCOPES)}")
        return sorted(set(v), key=SCOPES.index)

    @model_validator(mode="after")
    def _default_within_allowed(self) -> KeyIn:
        if self.default_namespace and self.namespaces is not None and self.default_namespace not in self.namespaces:
            raise ValueError("default_namespace must be one of the key's namespaces")
        return self

    @model_validator(mode="after")
    def _expiry_ahead(self) -> KeyIn:
        now = datetime.now(UTC)
        if self.expires_in_days is not None:
            if self.expires_at is not None:
                raise ValueError("give expires_at or expires_in_days, not both")
            self.expires_at = now + timedelta(days=self.expires_in_days)
        elif self.expires_at is not None:
            if self.expires_at <= now:
                raise ValueError("expires_at must be in the future")
            if self.expires_at > now + timedelta(days=MAX_KEY_DAYS):
                raise ValueError(f"expires_at must be within {MAX_KEY_DAYS} days")
        return self


class KeyRotateIn(Body):
    model_config = ConfigDict(extra="forbid")

    grace_seconds: int = Field(
        default=3600,
        ge=0,
        le=MAX_GRACE_S,
        description="How long the current secret keeps working after the rotation (0: stops at once).",
    )


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    prefix: str
    name: str
    scopes: list[str]
    namespaces: list[str] | None
    default_namespace: str | None
    created_at: datetime
    last_used_at: datetime | None = Field(description="Updated at most once a minute.")
    revoked_at: datetime | None
    expires_at: datetime | None
    rotated_at: datetime | None = Field(description="When the secret was last replaced (POST /v1/keys/{id}/rotate).")
    previous_prefix: str | None = Field(description="The replaced secret's prefix.")
    previous_expires_at: datetime | None = Field(description="When the replaced secret stops (or stopped) working.")


class KeyPage(BaseModel):
    data: list[KeyOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class KeyCreated(KeyOut):
    key: str = Field(description="The API key. Shown once; store it now.")
