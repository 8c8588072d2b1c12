from __future__ import annotations

import uuid

from fastapi import APIRouter

from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.post("", status_code=201, dependencies=[NOT_IDEMPOTENT])
async def create_key(body: KeyIn, p: AdminPrincipal, api: Api) -> KeyCreated:
    """Create an API key. The `key` field is shown in this response only."""
    return await api.create_key(p, body)


@router.get("")
async def list_keys(p: AdminPrincipal, api: Api) -> list[KeyOut]:
    """The tenant's API keys (never their secrets)."""
    return await api.list_keys(p)


@router.delete("/{key_id}", dependencies=[IDEMPOTENT])
async def revoke_key(key_id: uuid.UUID, p: AdminPrincipal, api: Api) -> KeyOut:
    """Revoke a key; requests with it fail from now on."""
    return await api.revoke_key(p, key_id)
