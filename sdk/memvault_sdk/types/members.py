"""Members of the organisation, their roles, and invitations."""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from memvault_sdk.types._model import Model, Params

Role = Literal["owner", "admin", "member", "viewer"]


class Member(Model):
    id: str
    email: str
    name: str
    role: Role
    scopes: list[str]
    namespaces: list[str] | None = None
    created_at: datetime
    last_login_at: datetime | None = None
    disabled_at: datetime | None = None
    email_verified_at: datetime | None = None


class InvitationCreate(Params):
    email: str
    role: Role | None = None


class RoleChange(Params):
    role: Role


class Invitation(Model):
    id: str
    email: str
    role: Role
    invited_by: str
    created_at: datetime
    expires_at: datetime
    accepted_at: datetime | None = None
    revoked_at: datetime | None = None
