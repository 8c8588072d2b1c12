from __future__ import annotations

from fastapi import APIRouter, Response

from memvault.gateway.deps import Api, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.maintenance.schemas import OrganizeIn, OrganizeOut
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["maintenance"])


@router.post("/organize", status_code=202, dependencies=[IDEMPOTENT])
async def organize(ns: NamespaceName, body: OrganizeIn, p: WritePrincipal, api: Api, response: Response) -> OrganizeOut:
    """Queue maintenance of the namespace: `dedup` (merge duplicates and paraphrases), `promote`
    (reinforced tentative memories become stable), `decay` (archive memories unused for long) and
    `reembed` (vectors of an older embedding model), run in the given order within `budget_ms`.

    Answers 202 with the job (its URL in `Location`); once finished, the job's `result` has what
    each step did."""
    out = await api.organize(p, ns, body)
    response.headers["Location"] = f"/v1/jobs/{out.job_id}"
    return out
