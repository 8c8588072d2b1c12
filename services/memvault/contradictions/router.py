from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from memvault.contradictions.schemas import (
    ContradictionIn,
    ContradictionOut,
    ContradictionPage,
    ContradictionState,
    PairResolutionIn,
    ResolutionIn,
)
from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["contradictions"])


@router.post("/contradictions", status_code=201, dependencies=[IDEMPOTENT])
async def mark_contradiction(ns: NamespaceName, body: ContradictionIn, p: WritePrincipal, api: Api) -> ContradictionOut:
    """Mark two memories as contradicting each other. Until resolved, each search hit of one lists
    the other in `contradicted_by`. Marking a pair that is already open returns its mark."""
    return await api.mark_contradiction(p, ns, body)


@router.get("/contradictions")
async def list_contradictions(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    state: Annotated[ContradictionState | None, Query(description="`open` or `resolved`; default both.")] = None,
    memory_id: Annotated[uuid.UUID | None, Query(description="Marks naming this memory on either side.")] = None,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> ContradictionPage:
    """Contradictions marked in this namespace, newest first; follow `next_cursor` for more."""
    return await api.list_contradictions(p, ns, state=state, memory_id=memory_id, limit=limit, cursor=cursor)


@router.post("/contradictions/resolve", dependencies=[IDEMPOTENT])
async def resolve_contradiction_by_pair(
    ns: NamespaceName, body: PairResolutionIn, p: WritePrincipal, api: Api
) -> ContradictionOut:
    """Resolve the open contradiction named by `contradiction_id` or by its two memories
    (`memory_id`, `other_id`, either order). `keep_one` keeps `keep_id` and archives the other
    memory; `keep_both` and `note` change no memory."""
    return await api.resolve_contradiction(p, ns, body)


@router.post("/contradictions/{contradiction_id}/resolve", dependencies=[IDEMPOTENT])
async def resolve_contradiction(
    ns: NamespaceName, contradiction_id: uuid.UUID, body: ResolutionIn, p: WritePrincipal, api: Api
) -> ContradictionOut:
    """Resolve a contradiction: `keep_one` keeps `keep_id` and archives the other memory;
    `keep_both` and `note` change no memory. Resolving it again the same way returns it."""
    named = PairResolutionIn(contradiction_id=contradiction_id, **body.model_dump(exclude_unset=True))
    return await api.resolve_contradiction(p, ns, named)
