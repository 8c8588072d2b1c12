from __future__ import annotations

import uuid
from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from memvault.fields import Body
from memvault.namespaces.schemas import NAMESPACE_NAME, NamespaceNames
from memvault.principal import SCOPES


class KeyIn(Body):
    model_config = ConfigDict(extra="forbid")

    name: str = Field(default="", max_length=200)
    scopes: list[str] = Field(default_factory=lambda: ["read", "write"], min_length=1)
    namespaces: NamespaceNames = Field(
        default=None, description="Allowed namespaces; omit for every namespace of the tenant."
    )
    default_namespace: str | None = Field(default=None, pattern=NAMESPACE_NAME)

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


class KeyOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    prefix: str
    name: str
    scopes: list[str]
    namespaces: list[str] | None
    default_namespace: str | None
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class KeyCreated(KeyOut):
    key: str = Field(description="The API key. Shown once; store it now.")
