"""The operator's paths: everything done as the database's owner role, which bypasses row-level
security. Migrating, creating a tenant (by the operator, or a self-serve sign-up: none exists yet
to scope the transaction to), finding a tenant by name for the CLI and the stdio bridge, and the
three sweeps that list ids across tenants (orphaned jobs, due maintenance, due webhook
deliveries), and the VACUUM after a
hard forget. Nothing else opens an owner session or connection.

Each function here reads or writes as little as it can: cross-tenant reads return ids only, and
the work on them then runs inside each tenant's own RLS-bound transaction.
"""

from __future__ import annotations

import secrets
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memvault.config import Settings
from memvault.db import migrate
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.forget import repository as forget_repo
from memvault.jobs import repository as jobs_repo
from memvault.maintenance import repository as maintenance_repo
from memvault.oauth.secrets import hash_password
from memvault.plans import repository as plans_repo
from memvault.plans.limits import PlanLimits
from memvault.principal import SYSTEM_TENANT_ID
from memvault.runtime import database_urls
from memvault.tenants import repository as tenants_repo
from memvault.tenants import service as tenants
from memvault.tenants.models import Tenant
from memvault.webhooks.delivery import repository as webhooks_repo


def prepare_database(settings: Settings) -> DatabaseUrls:
    """Find or start the database and migrate it to the newest revision, as the owner."""
    urls = database_urls(settings)
    migrate.upgrade(urls.owner, settings.app_role, allow_login=urls.embedded)
    return urls


def current_revision(urls: DatabaseUrls) -> str | None:
    return migrate.current_revision(urls.owner)


async def create_tenant(
    db: Database, name: str, *, namespace: str = "default", actor: str = "operator", plan: str = "unlimited"
) -> tenants.NewTenant:
    """A tenant with one namespace and an admin key (shown once)."""
    async with db.owner() as s:
        return await tenants.create(s, name, namespace=namespace, actor=actor, plan=plan)


async def create_organisation(
    db: Database,
    name: str,
    *,
    namespace: str,
    plan: str,
    owner_email: str,
    owner_password_hash: str,
    then: Callable[[tenants.NewOrganisation], Awaitable[None]],
) -> tenants.NewOrganisation:
    """Self-serve sign-up: a tenant, its first namespace and its unverified owner. ``then`` (the
    verification mail) runs before the commit, so a sign-up whose mail fails leaves nothing."""
    async with db.owner() as s:
        org = await tenants.create_organisation(
            s, name, namespace=namespace, plan=plan, owner_email=owner_email, owner_password_hash=owner_password_hash
        )
        await then(org)
        return org


@dataclass(frozen=True)
class Bootstrapped:
    """What the first start made; the key and the password exist nowhere else (only hashes are kept)."""

    tenant: tenants.NewTenant
    owner_email: str
    owner_password: str


async def bootstrap(db: Database, settings: Settings) -> Bootstrapped | None:
    """Create the first tenant, its `default` namespace, an admin key and an owner with a random
    password when there is no tenant yet: one transaction, so a failed start leaves nothing half made."""
    async with db.owner() as s:
        if await tenants.count_at_first_start(s) > 0:
            return None
        created = await tenants.create(s, settings.bootstrap_tenant, actor="bootstrap")
        # 144 random bits: nobody types this once it is pasted into a password manager.
        password = secrets.token_urlsafe(18)
        email = settings.bootstrap_email.strip().lower()
        password_hash = await hash_password(password)
        await tenants.add_owner(s, created.id, email=email, password_hash=password_hash, actor="bootstrap")
    return Bootstrapped(tenant=created, owner_email=email, owner_password=password)


class TenantProtected(InvalidInput):
    code = "tenant_protected"
    title = "Tenant cannot be deleted"


async def delete_tenant(db: Database, name: str) -> dict[str, int] | None:
    """Delete a tenant and everything it holds, in one transaction (rows deleted per table), or
    None when no tenant has that name. The reserved system tenant is refused."""
    async with db.owner() as s:
        tenant = await tenants_repo.by_name(s, name)
        if tenant is None:
            return None
        if tenant.id == SYSTEM_TENANT_ID:
            raise TenantProtected("the system tenant holds the memories every tenant shares")
        return await tenants_repo.delete_everything(s, tenant.id)


async def purge_unverified_signups(db: Database, created_before: datetime) -> list[str]:
    """Delete the organisations signed up before ``created_before`` whose owner never verified
    the address: their names are free for a real sign-up again. Names deleted."""
    async with db.owner() as s:
        stale = await tenants_repo.never_verified(s, created_before)
        for tenant in stale:
            await tenants_repo.delete_everything(s, tenant.id)
    return [t.name for t in stale]


async def vacuum_erased(db: Database) -> None:
    """Drop a hard forget's erased rows from the tables' indexes now, not at the next autovacuum.
    As the owner (the app role owns no table) and outside any transaction, as VACUUM requires."""
    async with db.owner_engine.connect() as conn:
        await forget_repo.vacuum(await conn.execution_options(isolation_level="AUTOCOMMIT"))


async def find_tenant(db: Database, name: str) -> Tenant | None:
    """A tenant by name, for the operator's tools that act as it (the CLI, the stdio bridge)."""
    async with db.owner() as s:
        return await tenants.by_name(s, name)


async def orphaned_jobs(db: Database, *, quiet_before: datetime) -> list[tuple[uuid.UUID, uuid.UUID, str]]:
    """(tenant, job, kind) of the jobs no runner holds, across tenants (jobs.repository.orphans)."""
    async with db.owner() as s:
        return await jobs_repo.orphans(s, quiet_before=quiet_before)


async def queued_jobs_by_kind(db: Database) -> dict[str, int]:
    """How many jobs wait to run, by kind, over every tenant: counts only, for /metrics."""
    async with db.owner() as s:
        return await jobs_repo.queued_by_kind(s)


async def due_maintenance(db: Database, now: datetime, *, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant, namespace) of the namespaces whose periodic maintenance is due, across tenants."""
    async with db.owner() as s:
        return await maintenance_repo.due_schedules(s, now, limit=limit)


async def due_webhook_deliveries(db: Database, *, per_tenant: int, limit: int) -> list[tuple[uuid.UUID, uuid.UUID]]:
    """(tenant, delivery) of the webhook deliveries due now, across tenants, round-robin by tenant."""
    async with db.owner() as s:
        return await webhooks_repo.due(s, per_tenant=per_tenant, limit=limit)


async def save_plan(db: Database, name: str, limits: PlanLimits, description: str = "") -> None:
    """Create a plan or replace its limits (plans are global: no tenant may write one)."""
    async with db.owner() as s:
        await plans_repo.upsert(s, name, limits, description)


async def list_plans(db: Database) -> list[tuple[str, str, PlanLimits]]:
    """Every plan: (name, description, limits), by name."""
    async with db.owner() as s:
        return [(p.name, p.description, PlanLimits.parse(p.limits)) for p in await plans_repo.all_plans(s)]


async def set_tenant_plan(
    db: Database, tenant_id: uuid.UUID, plan: str, overrides: dict[str, Any] | None = None
) -> None:
    """Put a tenant on a plan, and replace its overrides when given ({}: none)."""
    if overrides is not None:
        PlanLimits.parse(overrides, where="overrides")
    async with db.owner() as s:
        if await plans_repo.by_name(s, plan) is None:
            raise InvalidInput(f"no plan named {plan!r}", extra={"field": "plan"})
        await plans_repo.set_tenant_plan(s, tenant_id, plan, overrides)


class OperatorOps(FacadeBase):
    async def create_tenant(
        self, name: str, *, namespace: str = "default", plan: str = "unlimited"
    ) -> tenants.NewTenant:
        """Create a tenant with one namespace and an admin key (shown once). Operator only: the
        CLI calls it, no front door does."""
        return await create_tenant(self._db, name, namespace=namespace, plan=plan)

    async def set_tenant_plan(self, tenant_id: uuid.UUID, plan: str, overrides: dict[str, Any] | None = None) -> None:
        await set_tenant_plan(self._db, tenant_id, plan, overrides)
        # This process sees the change at once; other replicas within the plan book's few seconds.
        self._plans.forget(tenant_id)

    async def save_plan(self, name: str, limits: PlanLimits, description: str = "") -> None:
        await save_plan(self._db, name, limits, description)

    async def list_plans(self) -> list[tuple[str, str, PlanLimits]]:
        return await list_plans(self._db)
