"""API schemas for sign-up, members and invitations."""

from __future__ import annotations

import uuid
from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvault.fields import NOT_STORED, Body
from memvault.members.roles import Role
from memvault.namespaces.schemas import NAMESPACE_NAME
from memvault.oauth.schemas import UserOut, UserPage

EMAIL = Field(min_length=3, max_length=254, pattern=r"^[^@\s]+@[^@\s]+$")
PASSWORD = Field(min_length=1, max_length=1024, description="At least 10 characters; stored as Argon2id.")
# Members are tenant users: the same shape, with their role.
MemberOut = UserOut
MemberPage = UserPage


def _lower(v: str) -> str:
    return v.strip().lower()


class SignupIn(Body):
    model_config = ConfigDict(extra="forbid")

    email: str = EMAIL
    password: Annotated[str, NOT_STORED] = PASSWORD
    organisation: str = Field(
        min_length=2,
        max_length=100,
        pattern=r"^[^\x00-\x1f\x7f]+$",
        description="The organisation's name (unique on this server): the account the owner signs in to.",
    )
    namespace: str = Field(default="default", pattern=NAMESPACE_NAME, description="The first namespace.")

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return _lower(v)

    @field_validator("organisation")
    @classmethod
    def _strip(cls, v: str) -> str:
        return v.strip()


class SignupOut(BaseModel):
    organisation: str
    namespace: str
    email: str
    verification: str = Field(description="`sent`: a link went to the address; it works for signup_verify_ttl_s.")


class TokenIn(Body):
    model_config = ConfigDict(extra="forbid")
    guard_secrets = False  # a signed link, checked and never stored

    token: str = Field(min_length=1, max_length=4096)


class VerifiedOut(BaseModel):
    organisation: str
    tenant_id: uuid.UUID
    namespace: str | None
    email: str
    already_verified: bool = Field(description="True: verified before; no new key is issued.")
    key_id: uuid.UUID | None
    api_key: str | None = Field(description="The organisation's first admin key, shown in this answer only.")


class ResendIn(Body):
    model_config = ConfigDict(extra="forbid")

    email: str = EMAIL

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return _lower(v)


class ResendOut(BaseModel):
    detail: str = "If this address has sign-ups still to verify, a new link was mailed for each."


class InvitationIn(Body):
    model_config = ConfigDict(extra="forbid")

    email: str = EMAIL
    role: Role = Field(default="member", description="Only an owner invites owners.")

    @field_validator("email")
    @classmethod
    def _email(cls, v: str) -> str:
        return _lower(v)


class InvitationOut(BaseModel):
    model_config = ConfigDict(from_attributes=True)

    id: uuid.UUID
    email: str
    role: Role
    invited_by: str
    created_at: datetime
    expires_at: datetime
    accepted_at: datetime | None
    revoked_at: datetime | None


class InvitationPage(BaseModel):
    data: list[InvitationOut]
    next_cursor: str | None = Field(description="Pass as `cursor` for the next page; null on the last page.")


class AcceptIn(Body):
    model_config = ConfigDict(extra="forbid")

    token: Annotated[str, NOT_STORED] = Field(min_length=1, max_length=4096)
    password: Annotated[str, NOT_STORED] = PASSWORD
    name: str = Field(default="", max_length=200)


class AcceptedOut(BaseModel):
    organisation: str
    member: MemberOut


class MemberPatch(Body):
    model_config = ConfigDict(extra="forbid")

    role: Role
