"""Namespaces, API keys, the audit log, forget, import and status."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from pydantic import Field

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.account import Plan, Quota

Scope = Literal["read", "write", "admin"]


class NamespaceCreate(Params):
    name: str
    description: str | None = None


class SearchSettings(Model):
    """A namespace's search defaults; a search's own ``weights`` and ``fusion`` override them."""

    weights: dict[str, float] | None = None
    fusion: str | None = None
    # Minutes within which an owner's session-less events count as one conversation; 0: off.
    session_gap_minutes: float | None = None


class MaintenanceSchedule(Model):
    """Maintenance the server runs by itself on the namespace: these ``jobs`` (reembed, dedup,
    promote, decay) within ``budget_ms``, every ``every_minutes``."""

    jobs: list[str] | None = None
    budget_ms: int | None = None
    every_minutes: int | None = None


class NamespaceSettings(Model):
    search: SearchSettings | None = None
    maintenance: MaintenanceSchedule | None = None


class Namespace(Model):
    id: str
    name: str
    description: str | None = None
    created_at: datetime
    memory_count: int | None = None
    settings: NamespaceSettings = Field(default_factory=NamespaceSettings)


class KeyCreate(Params):
    name: str | None = None
    scopes: list[Scope] | None = None
    namespaces: list[str] | None = None
    default_namespace: str | None = None
    expires_at: datetime | None = None
    expires_in_days: int | None = None


class KeyRotate(Params):
    grace_seconds: int | None = None


class ApiKey(Model):
    id: str
    prefix: str
    name: str
    scopes: list[str]
    namespaces: list[str] | None = None
    default_namespace: str | None = None
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None
    expires_at: datetime | None = None
    rotated_at: datetime | None = None
    previous_prefix: str | None = None
    previous_expires_at: datetime | None = None


class ApiKeyCreated(ApiKey):
    key: str = Field(description="The API key itself; shown once.")


class AuditEntry(Model):
    id: int
    at: datetime
    actor: str
    # The member's email when the actor is a member (`user:<id>`).
    actor_email: str | None = None
    action: str
    namespace: str | None = None
    namespace_id: str | None = None
    target_id: str | None = None
    detail: dict[str, Any] = Field(default_factory=dict)


class ForgetParams(Params):
    user_id: str | None = None
    session_id: str | None = None
    entity_id: str | None = None
    all: bool | None = None
    hard: bool | None = None


class ForgetResult(Model):
    hard: bool
    selector: str
    memories: int
    events: int
    sessions: int
    traces: int
    entities: int
    relations: int


# One line of an export file: ``kind`` ("header", "entity", ..., "end") and that kind's fields, in
# the server's restore format (docs/api.md, Export), which ``import_`` takes back as it is.
ExportRecord = dict[str, Any]


class ImportResult(Model):
    imported: dict[str, int]


class DatabaseStatus(Model):
    ok: bool
    embedded: bool | None = None


class RedisStatus(Model):
    configured: bool
    ok: bool | None = None


class PrincipalSummary(Model):
    tenant_id: str
    subject: str
    scopes: list[str]
    namespaces: list[str]
    memories: int


class Status(Model):
    status: str
    version: str
    database: DatabaseStatus
    redis: RedisStatus
    embedding_model: str
    jobs: str | None = None
    principal: PrincipalSummary | None = Field(default=None, description="Present when called with a key.")


class AccountClient(Model):
    client_id: str
    client_name: str | None = None
    kind: str
    redirect_uris: list[str]
    created_at: datetime


class AccountGrant(Model):
    id: str
    user_id: str
    user_email: str
    client_id: str
    client_name: str | None = None
    scopes: list[str]
    namespaces: list[str]
    created_at: datetime
    last_used_at: datetime | None = None
    revoked_at: datetime | None = None


class Account(Model):
    """The account: its plan and each quota's use, how many users, which clients hold grants,
    and the grants."""

    tenant_id: str
    users: int
    clients: list[AccountClient]
    grants: list[AccountGrant]
    plan: Plan
    quotas: list[Quota]
