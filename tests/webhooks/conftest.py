"""What the webhook tests share: subscribing over REST, and reading the outbox as the owner (the
deliveries log over REST does not show payloads)."""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any

import httpx
import psycopg
import pytest
from psycopg.rows import dict_row

from memvault.db.urls import DatabaseUrls
from tests.conftest import Tenant
from tests.db.conftest import conninfo

HOOK_URL = "https://hooks.example.com/in"


@pytest.fixture
async def owner(pg_urls: DatabaseUrls) -> AsyncIterator[psycopg.AsyncConnection[dict[str, Any]]]:
    async with await psycopg.AsyncConnection.connect(
        conninfo(pg_urls.owner), autocommit=True, row_factory=dict_row
    ) as conn:
        yield conn


async def subscribe(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, Any]:
    r = await client.post(
        "/v1/webhooks", json={"url": HOOK_URL, "events": ["memory.created"], **body}, headers=tenant.headers
    )
    assert r.status_code == 201, r.text
    return dict(r.json())


async def deliveries(
    owner: psycopg.AsyncConnection[dict[str, Any]], tenant_id: uuid.UUID, endpoint_id: str | None = None
) -> list[dict[str, Any]]:
    sql = "SELECT * FROM webhook_deliveries WHERE tenant_id = %s"
    params: tuple[Any, ...] = (tenant_id,)
    if endpoint_id is not None:
        sql += " AND endpoint_id = %s"
        params += (uuid.UUID(endpoint_id),)
    cur = await owner.execute(sql + " ORDER BY created_at, id", params)
    return await cur.fetchall()
