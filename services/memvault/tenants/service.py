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
    key, raw = await keys_repo.create(
        s,
        tenant.id,
        name="admin (created with the tenant)",
        scopes=["read", "write", "admin"],
        namespaces=None,
        default_namespace=namespace,
    )
    await audit.record(s, tenant.id, actor, "tenant.create", target_id=str(tenant.id), detail={"name": name})
    return NewTenant(id=tenant.id, name=name, namespace=namespace, key_id=key.id, api_key=raw)


async def by_name(s: AsyncSession, name: str) -> Tenant | None:
    """A tenant people use, by name: never the reserved system tenant."""
    tenant = await repo.by_name(s, name)
    return tenant if tenant is not None and tenant.id != SYSTEM_TENANT_ID else None


async def count(s: AsyncSession) -> int:
    """Tenants that people use: the reserved system tenant (system-scope memories) is not one."""
    return await repo.count_in_use(s)
