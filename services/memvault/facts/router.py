from __future__ import annotations

from fastapi import APIRouter

from memvault.facts.schemas import FactIn, FactOut, PreferenceIn
from memvault.gateway.deps import Api, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.memories.schemas import MemoryOut
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["memories"])


@router.post("/preferences", status_code=201, dependencies=[IDEMPOTENT])
async def add_preference(ns: NamespaceName, body: PreferenceIn, p: WritePrincipal, api: Api) -> MemoryOut:
    """Store a preference as a `preference` memory keyed `preference:<category>` (the category
    lower-cased, spaces and punctuation as `_`): a later preference of the same category and owner
    supersedes it, and the earlier one stays in its history."""
    return await api.add_preference(p, ns, body)


@router.post("/facts", status_code=201, dependencies=[IDEMPOTENT])
async def add_fact(ns: NamespaceName, body: FactIn, p: WritePrincipal, api: Api) -> FactOut:
    """Store a fact (subject, predicate, object) as a `fact` memory keyed
    `fact:<subject>:<predicate>`, valid from `valid_from` until `valid_until`: a later fact with the
    same subject, predicate and owner supersedes it. When subject and object each name one entity of
    the namespace (by name or alias, any case), the memory is linked to both, and a namespace-wide
    fact also records the relation subject --predicate--> object (`relation`)."""
    return await api.add_fact(p, ns, body)
