from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Path, Response

from memvault.gateway.deps import AdminPrincipal, Api, ReadPrincipal
from memvault.gateway.idempotency import IDEMPOTENT
from memvault.namespaces.schemas import NAMESPACE_NAME, NamespaceIn, NamespaceOut, NamespacePatch

router = APIRouter(prefix="/v1/namespaces", tags=["namespaces"])

NamespaceName = Annotated[str, Path(pattern=NAMESPACE_NAME, description="Namespace name.")]


@router.post("", status_code=201, dependencies=[IDEMPOTENT])
async def create_namespace(body: NamespaceIn, p: AdminPrincipal, api: Api) -> NamespaceOut:
    """Create a namespace (needs the admin scope)."""
    return await api.create_namespace(p, body)


@router.get("")
async def list_namespaces(p: ReadPrincipal, api: Api) -> list[NamespaceOut]:
    """Namespaces this key can use, with memory counts."""
    return await api.list_namespaces(p)


@router.get("/{ns}")
async def get_namespace(ns: NamespaceName, p: ReadPrincipal, api: Api) -> NamespaceOut:
    return await api.get_namespace(p, ns)


@router.patch("/{ns}", dependencies=[IDEMPOTENT])
async def update_namespace(ns: NamespaceName, body: NamespacePatch, p: AdminPrincipal, api: Api) -> NamespaceOut:
    """Change the description or settings: `search` (default weights and fusion) and `maintenance`
    (periodic jobs). Each settings part given replaces that part; null clears it (admin scope)."""
    return await api.update_namespace(p, ns, body)


@router.delete("/{ns}", status_code=204, dependencies=[IDEMPOTENT])
async def delete_namespace(ns: NamespaceName, p: AdminPrincipal, api: Api) -> Response:
    """Delete a namespace and all of its memories, permanently (needs the admin scope)."""
    await api.delete_namespace(p, ns)
    return Response(status_code=204)
