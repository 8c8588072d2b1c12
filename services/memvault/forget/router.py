from __future__ import annotations

from fastapi import APIRouter

from memvault.forget.schemas import ForgetIn, ForgetOut
from memvault.gateway.deps import Api, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["forget"])


@router.post("/forget", dependencies=[IDEMPOTENT])
async def forget(ns: NamespaceName, body: ForgetIn, p: WritePrincipal, api: Api) -> ForgetOut:
    """Forget what concerns a user, a session, an entity, or (admin) the whole namespace.
    `hard: false` archives the memories; `hard: true` erases them with every version, their
    history and entity links, and the selected events, sessions and traces. Counts come back;
    the audit log records the forget without the content."""
    return await api.forget(p, ns, body)
