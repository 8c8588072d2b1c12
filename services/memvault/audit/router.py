from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query
from pydantic import AfterValidator

from memvault.audit.schemas import AuditPage
from memvault.fields import Instant
from memvault.gateway.deps import AdminPrincipal, Api
from memvault.memories.schemas import no_nul

router = APIRouter(prefix="/v1/audit", tags=["audit"])


@router.get("")
async def list_audit(
    p: AdminPrincipal,
    api: Api,
    namespace: Annotated[str | None, Query(max_length=64), AfterValidator(no_nul)] = None,
    action: Annotated[
        str | None, Query(max_length=100, description="e.g. `memory` or `memory.delete`."), AfterValidator(no_nul)
    ] = None,
    target_id: Annotated[str | None, Query(max_length=200), AfterValidator(no_nul)] = None,
    actor: Annotated[
        str | None,
        Query(max_length=254, description="`key:<id>`, `user:<id>`, `cli`, `system`, or a member's email."),
        AfterValidator(no_nul),
    ] = None,
    since: Instant | None = None,
    until: Annotated[Instant | None, Query(description="Entries before this instant.")] = None,
    limit: Annotated[int, Query(ge=1, le=500)] = 100,
    cursor: Annotated[str | None, Query(max_length=100), AfterValidator(no_nul)] = None,
) -> AuditPage:
    """Every write and delete in the tenant, newest first: who, what, which target, when. Entries
    never hold memory content. A namespace-limited admin key sees its namespaces' entries only."""
    return await api.list_audit(
        p,
        namespace=namespace,
        action=action,
        target_id=target_id,
        actor=actor,
        since=since,
        until=until,
        limit=limit,
        cursor=cursor,
    )
