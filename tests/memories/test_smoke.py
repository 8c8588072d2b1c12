from __future__ import annotations

import httpx

from tests.conftest import Tenant


async def test_store_then_find_by_meaning(client: httpx.AsyncClient, tenant_a: Tenant) -> None:
    r = await client.post(
        "/v1/namespaces/default/memories",
        json={"content": "The user prefers dark roast coffee", "type": "preference"},
        headers=tenant_a.headers,
    )
    assert r.status_code == 201, r.text
    r = await client.post(
        "/v1/namespaces/default/search", json={"query": "favourite hot drink"}, headers=tenant_a.headers
    )
    assert r.status_code == 200, r.text
    assert r.json()["results"][0]["memory"]["content"] == "The user prefers dark roast coffee"
