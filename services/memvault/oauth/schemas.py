"""API schemas for tenant users, OAuth clients and grants."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvault.fields import NOT_STORED, Body
from memvault.members.roles import Role
from memvault.metering.schemas import PlanOut, QuotaOut
from memvault.namespaces.schemas import NamespaceNames
from memvault.principal import ACT_AS

OAuthScope = Literal["read", "write"]
# What an OAuth client may be granted: memory access, never administration of the tenant. act_as
# (principal.py) only by an owner or admin, whose role holds it (members/roles.py ROLE_SCOPES).
OAUTH_SCOPES: tuple[str, ...] = ("read", "write", ACT_AS)
# A request naming no scope: acting for others must be asked for by name, never given by default.
DEFAULT_OAUTH_SCOPES: tuple[OAuthScope, ...] = ("read", "write")


class UserIn(Body):
    model_config = ConfigDict(extra="forbid")

    email: str = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
    password: Annotated[str, NOT_STORED] = Field(
        min_length=1, max_length=1024, description="At least 10 characters; stored as Argon2id."
    )
    name: str = Field(default="", max_length=200)
    role: Role | None = Field(
        default=None,
        description="owner, admin, member or viewer (docs/accounts.md). Omitted: from `scopes` (member if they "
        "include write, else viewer). Only an owner makes owners; a namespace-limited key makes members and viewers.",
    )
    scopes: list[OAuthScope] = Field(
        default_factory=lambda: list[OAuthScope](["read", "write"]),
        min_length=1,
        description="Before roles: the most a client may be granted. Ignored when `role` is given.",
    )
    namespaces: NamespaceNames = Field(
        default=None,
        description="The namespaces the user may share with a client. Omitted: those of the creating key "
        "(every namespace of the tenant for an unrestricted key). A namespace-limited key can name only its own.",
    )

    @field_validator("email")
    @classmethod
    def _lower(cls, v: str) -> str:
        return v.strip().lower()


class UserOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    name: str
    role: Role
    scopes: list[str] = Field(
        description="What the role stands for; OAuth clients get at most read, write and (owners and admins) act_as."
    )
    namespaces: list[str] | None
    created_at: datetime
    last_login_at: datetime | None
    disabled_at: datetime | None
    email_verified_at: datetime | None = Field(description="Null: a sign-up not yet verified; it cannot sign in.")


class UserPage(BaseModel):
    data: list[UserOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class ClientOut(BaseModel):
    client_id: str
    client_name: str | None
    kind: Literal["dcr", "cimd"]
    redirect_uris: list[str]
    created_at: datetime


class GrantOut(BaseModel):
    id: uuid.UUID
    user_id: uuid.UUID
    user_email: str
    client_id: str
    client_name: str | None
    scopes: list[str]
    namespaces: list[str]
    created_at: datetime
    last_used_at: datetime | None
    revoked_at: datetime | None


class ConnectedAppOut(GrantOut):
    """A grant as the dashboard's connected apps show it: with where its client sends sign-ins."""

    redirect_uris: list[str] = Field(description="The client's registered redirect URIs.")


class GrantPage(BaseModel):
    data: list[ConnectedAppOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class AccountOut(BaseModel):
    tenant_id: uuid.UUID
    users: int
    clients: list[ClientOut] = Field(description="OAuth clients that hold or held a grant in this tenant.")
    grants: list[GrantOut]
    plan: PlanOut = Field(description="The tenant's plan and its limits (overrides applied).")
    quotas: list[QuotaOut] = Field(description="Each quota's use: used / limit / resets_at.")


MetaText = Annotated[str, Field(max_length=200)]
MetaUri = Annotated[str, Field(max_length=2000)]


class ClientMetadataIn(Body):
    """The RFC 7591 fields a registration or client metadata document may carry that memvault
    stores and shows (the consent page, /v1/account), bounded: anyone may register, so an unbounded
    field is free storage (a 1 MB `contacts` list was accepted). Fields not listed are dropped."""

    model_config = ConfigDict(extra="ignore")

    client_name: MetaText | None = None
    client_uri: MetaUri | None = None
    logo_uri: MetaUri | None = None
    tos_uri: MetaUri | None = None
    policy_uri: MetaUri | None = None
    contacts: list[Annotated[str, Field(max_length=254)]] | None = Field(default=None, max_length=10)
    software_id: MetaText | None = None
    software_version: MetaText | None = None
    scope: MetaText | None = None
    application_type: Annotated[str, Field(max_length=32)] | None = None
