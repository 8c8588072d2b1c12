"""Creating a tenant: operator work, done on an owner session (memvault/operator.py) because no
tenant exists yet."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.audit import repository as audit
from memvault.db.session import set_local
from memvault.errors import Conflict, InvalidInput
from memvault.keys import repository as keys_repo
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.schemas import NAMESPACE_NAME
from memvault.oauth import repository as oauth_repo
from memvault.plans import repository as plans_repo
from memvault.principal import SYSTEM_TENANT_ID
from memvault.tenants import repository as repo
from memvault.tenants.models import Tenant


class TenantExists(Conflict):
    code = "tenant_exists"
    title = "Tenant exists"


@dataclass(frozen=True)
class NewTenant:
    id: uuid.UUID
    name: str
    namespace: str
    key_id: uuid.UUID
    api_key: str


async def create(
    s: AsyncSession, name: str, *, namespace: str = "default", actor: str = "operator", plan: str = "unlimited"
) -> NewTenant:
    tenant = await _create_bare(s, name, namespace=namespace, actor=actor, plan=plan)
    key, raw = await keys_repo.create(
        s,
        tenant.id,
        name="admin (created with the tenant)",
        scopes=["read", "write", "admin"],
        namespaces=None,
        default_namespace=namespace,
    )
    return NewTenant(id=tenant.id, name=name, namespace=namespace, key_id=key.id, api_key=raw)


@dataclass(frozen=True)
class NewOrganisation:
    id: uuid.UUID
    name: str
    namespace: str
    owner_id: uuid.UUID
    owner_email: str


async def create_organisation(
    s: AsyncSession, name: str, *, namespace: str, plan: str, owner_email: str, owner_password_hash: str
) -> NewOrganisation:
    """A self-serve tenant: its namespace and an unverified owner, and no API key yet (one is
    issued when the owner verifies the address, members/signup.py)."""
    tenant = await _create_bare(s, name, namespace=namespace, actor="signup", plan=plan)
    owner = await oauth_repo.create_user(
        s,
        tenant.id,
        email=owner_email,
        name="",
        password_hash=owner_password_hash,
        role="owner",
        namespaces=None,
        verified=False,
    )
    return NewOrganisation(id=tenant.id, name=name, namespace=namespace, owner_id=owner.id, owner_email=owner_email)


async def add_owner(s: AsyncSession, tenant_id: uuid.UUID, *, email: str, password_hash: str, actor: str) -> uuid.UUID:
    """A verified owner made by the operator (the bootstrap owner): the operator chose the address,
    so no mail verifies it."""
    owner = await oauth_repo.create_user(
        s, tenant_id, email=email, name="", password_hash=password_hash, role="owner", namespaces=None
    )
    await audit.record(s, tenant_id, actor, "user.create", target_id=str(owner.id), detail={"role": "owner"})
    return owner.id


async def _create_bare(s: AsyncSession, name: str, *, namespace: str, actor: str, plan: str) -> Tenant:
    # The same rule as POST /v1/namespaces: a name that cannot sit in a URL path is unreachable.
    if not re.fullmatch(NAMESPACE_NAME, namespace):
        raise InvalidInput(
            f"invalid namespace name {namespace!r}: letters, digits, '.', '_' and '-', up to 63",
            extra={"field": "namespace"},
        )
    if await repo.by_name(s, name) is not None:
        raise TenantExists(f"tenant {name!r} already exists")
    if await plans_repo.by_name(s, plan) is None:
        raise InvalidInput(f"no plan named {plan!r}", extra={"field": "plan"})
    tenant = await repo.insert(s, name, plan)
    # Later statements of this transaction run as the tenant too, should the session be the app role.
    await set_local(s, {"app.tenant_id": str(tenant.id)})
    ns = await ns_repo.create(s, tenant.id, namespace, "Created with the tenant.")
    assert ns is not None
    await audit.record(s, tenant.id, actor, "tenant.create", target_id=str(tenant.id), detail={"name": name})
    return tenant


async def by_name(s: AsyncSession, name: str) -> Tenant | None:
    """A tenant people use, by name: never the reserved system tenant."""
    tenant = await repo.by_name(s, name)
    return tenant if tenant is not None and tenant.id != SYSTEM_TENANT_ID else None


async def count(s: AsyncSession) -> int:
    """Tenants that people use: the reserved system tenant (system-scope memories) is not one."""
    return await repo.count_in_use(s)


async def count_at_first_start(s: AsyncSession) -> int:
    """``count``, after waiting for any other process's first start to commit (the lock is held
    until this transaction ends): two api replicas on an empty database make one first tenant."""
    await repo.hold_first_start(s)
    return await repo.count_in_use(s)
