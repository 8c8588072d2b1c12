from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import StreamingResponse
from pydantic import BaseModel, Field

from memvault.errors import InvalidInput
from memvault.gateway.deps import Api, ReadPrincipal, WritePrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.router import NamespaceName

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["export"])

NDJSON = "application/x-ndjson"


class ImportOut(BaseModel):
    imported: dict[str, int] = Field(description="Records restored per kind.")


@router.get("/export", response_class=StreamingResponse, responses={200: {"content": {NDJSON: {}}}})
async def export_namespace(
    ns: NamespaceName,
    p: ReadPrincipal,
    api: Api,
    embeddings: Annotated[bool, Query(description="Include each memory's and trace's vector.")] = False,
) -> StreamingResponse:
    """Stream the namespace as JSON Lines: a header, entities, relations, sessions, events, memories
    (with history and entity links), traces (with steps), and an `end` record with the counts."""
    lines = await api.export_namespace(p, ns, embeddings=embeddings)
    return StreamingResponse(
        lines,
        media_type=NDJSON,
        headers={"Content-Disposition": f'attachment; filename="memvault-{ns}.jsonl"'},
    )


@router.post("/import", dependencies=[IDEMPOTENT])
async def import_namespace(ns: NamespaceName, request: Request, p: WritePrincipal, api: Api) -> ImportOut:
    """Restore an export (the JSON Lines body) into this namespace: all or nothing, under new ids,
    every text through the secrets guard. Vectors in the file are reused when the same model made
    them; otherwise the content is embedded again."""
    raw = await request.body()
    try:
        body = raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidInput("the body must be UTF-8 JSON Lines") from exc
    return ImportOut(imported=await api.import_namespace(p, ns, body.splitlines()))
