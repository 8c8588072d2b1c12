from __future__ import annotations

import uuid
from typing import Annotated

from fastapi import APIRouter, Query

from memvault.gateway.deps import AdminPrincipal, Api
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut, KeyPage, KeyRotateIn

router = APIRouter(prefix="/v1/keys", tags=["keys"])


@router.post("", status_code=201, dependencies=[NOT_IDEMPOTENT])
async def create_key(body: KeyIn, p: AdminPrincipal, api: Api) -> KeyCreated:
    """Create an API key. The `key` field is shown in this response only."""
    return await api.create_key(p, body)


@router.get("")
async def list_keys(
    p: AdminPrincipal,
    api: Api,
    limit: Annotated[int, Query(ge=1, le=200)] = 50,
    cursor: Annotated[str | None, Query(max_length=500)] = None,
) -> KeyPage:
    """The tenant's API keys (never their secrets), newest first; follow `next_cursor` for more."""
    return await api.list_keys(p, limit=limit, cursor=cursor)


# Like creation, not replayable: a replay would have to store the new secret.
@router.post("/{key_id}/rotate", dependencies=[NOT_IDEMPOTENT])
async def rotate_key(key_id: uuid.UUID, p: AdminPrincipal, api: Api, body: KeyRotateIn | None = None) -> KeyCreated:
    """Give the key a new secret, in the `key` field of this response only. The old secret keeps
    working until `previous_expires_at` (`grace_seconds`, default 3600, at most 86400)."""
    return await api.rotate_key(p, key_id, body or KeyRotateIn())


@router.delete("/{key_id}", dependencies=[IDEMPOTENT])
async def revoke_key(key_id: uuid.UUID, p: AdminPrincipal, api: Api) -> KeyOut:
    """Revoke a key; requests with it fail from now on."""
    return await api.revoke_key(p, key_id)
