"""Caps on what a tenant stores (memories, import size), through the REST door: 403
quota_exceeded naming the quota, and nothing of a refused request stored — a batch is all or
nothing, an import is refused before it starts, and concurrent writes cannot pass the cap together."""

from __future__ import annotations

import asyncio
import json

import httpx

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant, make_tenant


async def capped(api: NamespaceAPI, **limits: int) -> Tenant:
    t = await make_tenant(api, "quota")
    await api.set_tenant_plan(t.id, "unlimited", limits)
    return t


async def stored(api: NamespaceAPI, t: Tenant) -> int:
    return sum(n.memory_count or 0 for n in await api.list_namespaces(t.principal))


def memories(t: Tenant) -> str:
    return f"/v1/namespaces/{t.namespace}/memories"


async def test_a_store_past_the_memory_cap_is_refused_and_stores_nothing(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    t = await capped(api, memories=3)
    for i in range(3):
        r = await client.post(memories(t), json={"content": f"fact {i}"}, headers=t.headers)
        assert r.status_code == 201, r.text
    r = await client.post(memories(t), json={"content": "one too many"}, headers=t.headers)
    assert r.status_code == 403
    body = r.json()
    assert (body["code"], body["quota"], body["limit"], body["used"]) == ("quota_exceeded", "memories", 3, 3)
    assert await stored(api, t) == 3


async def test_a_batch_that_does_not_fit_is_refused_whole(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    t = await capped(api, memories=3)
    await client.post(memories(t), json={"content": "first"}, headers=t.headers)
    batch = {"memories": [{"content": f"batch {i}"} for i in range(3)]}
    r = await client.post(f"{memories(t)}/batch", json=batch, headers=t.headers)
    assert r.status_code == 403 and r.json()["used"] == 1, r.text
    assert await stored(api, t) == 1  # not the two that would have fitted
    batch = {"memories": [{"content": f"batch {i}"} for i in range(2)]}
    assert (await client.post(f"{memories(t)}/batch", json=batch, headers=t.headers)).status_code == 201
    assert await stored(api, t) == 3


async def test_concurrent_writes_cannot_pass_the_cap_together(api: NamespaceAPI) -> None:
    t = await capped(api, memories=5)
    p = t.principal

    async def one(i: int) -> bool:
        try:
            await api.store(p, t.namespace, MemoryIn(content=f"racing fact {i}"))
        except Exception as exc:
            assert getattr(exc, "code", None) == "quota_exceeded", exc
            return False
        return True

    results = await asyncio.gather(*(one(i) for i in range(12)))
    assert sum(results) == 5
    assert await stored(api, t) == 5


async def test_an_import_that_does_not_fit_is_refused_before_it_starts(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    t = await capped(api, memories=4)
    for i in range(3):
        await client.post(memories(t), json={"content": f"fact {i}", "user_id": "ana"}, headers=t.headers)
    await client.post(
        f"/v1/namespaces/{t.namespace}/entities", json={"name": "Ana", "type": "person"}, headers=t.headers
    )
    export = await client.get(f"/v1/namespaces/{t.namespace}/export", headers=t.headers)
    assert export.status_code == 200
    await api.create_namespace(t.principal, NamespaceIn(name="restored"))
    r = await client.post("/v1/namespaces/restored/import", content=export.text, headers=t.headers)
    assert r.status_code == 403, r.text
    assert (r.json()["quota"], r.json()["used"]) == ("memories", 3)
    # Nothing of the file: not its memories, not its entity either.
    empty = await client.get("/v1/namespaces/restored/export", headers=t.headers)
    counts = [json.loads(line) for line in empty.text.splitlines()][-1]["counts"]
    assert not any(counts.values()), counts


async def test_an_import_larger_than_the_plan_allows_is_refused(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    t = await capped(api, import_bytes=100)
    body = "\n".join(json.dumps({"kind": "memory", "content": "x" * 80}) for _ in range(3))
    r = await client.post(f"/v1/namespaces/{t.namespace}/import", content=body, headers=t.headers)
    assert r.status_code == 403 and r.json()["quota"] == "import_bytes" and r.json()["limit"] == 100
    assert await stored(api, t) == 0


async def test_another_tenant_is_not_held_by_one_at_its_cap(api: NamespaceAPI, client: httpx.AsyncClient) -> None:
    a = await capped(api, memories=1)
    b = await capped(api, memories=1)
    assert (await client.post(memories(a), json={"content": "a"}, headers=a.headers)).status_code == 201
    assert (await client.post(memories(a), json={"content": "a2"}, headers=a.headers)).status_code == 403
    assert (await client.post(memories(b), json={"content": "b"}, headers=b.headers)).status_code == 201


async def _namespace_with_a_bit_of_everything(client: httpx.AsyncClient, t: Tenant) -> None:
    r = await client.post(
        f"/v1/namespaces/{t.namespace}/entities", json={"name": "Ana", "type": "person"}, headers=t.headers
    )
    assert r.status_code == 201, r.text
    for i in range(12):
        body = {"content": f"Ana's fact number {i}: ünïcode “quotes”", "metadata": {"n": i, "tags": ["a", "b"]}}
        r = await client.post(
            memories(t), json={**body, "entity_ids": [r.json()["id"]]} if i == 0 else body, headers=t.headers
        )
        assert r.status_code == 201, r.text
    mid = r.json()["id"]
    r = await client.patch(f"{memories(t)}/{mid}", json={"content": "Ana's fact, edited"}, headers=t.headers)
    assert r.status_code == 200, r.text


async def test_an_export_larger_than_the_plan_allows_is_refused_before_the_first_byte(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    t = await make_tenant(api, "quota")
    await _namespace_with_a_bit_of_everything(client, t)
    whole = await client.get(f"/v1/namespaces/{t.namespace}/export", headers=t.headers)
    assert whole.status_code == 200
    size = len(whole.content)

    await api.set_tenant_plan(t.id, "unlimited", {"export_bytes": int(size * 1.05)})
    fits = await client.get(f"/v1/namespaces/{t.namespace}/export", headers=t.headers)
    assert fits.status_code == 200 and len(fits.content) == size  # the whole file, not a cut-off one

    await api.set_tenant_plan(t.id, "unlimited", {"export_bytes": int(size * 0.95)})
    r = await client.get(f"/v1/namespaces/{t.namespace}/export", headers=t.headers)
    assert r.status_code == 403, r.text
    assert (r.json()["code"], r.json()["quota"], r.json()["limit"]) == (
        "quota_exceeded",
        "export_bytes",
        int(size * 0.95),
    )
    # With vectors the same namespace weighs far more: a plan that fits the text does not fit them.
    await api.set_tenant_plan(t.id, "unlimited", {"export_bytes": int(size * 1.05)})
    r = await client.get(f"/v1/namespaces/{t.namespace}/export?embeddings=true", headers=t.headers)
    assert r.status_code == 403 and r.json()["quota"] == "export_bytes", r.text


async def test_the_export_size_the_database_weighs_is_the_file_s_within_a_few_percent(
    api: NamespaceAPI, client: httpx.AsyncClient
) -> None:
    from memvault.portability import repository as repo
    from memvault.portability.service import COLUMNS

    t = await make_tenant(api, "quota")
    await _namespace_with_a_bit_of_everything(client, t)
    for embeddings in (False, True):
        export = await client.get(
            f"/v1/namespaces/{t.namespace}/export?embeddings={str(embeddings).lower()}", headers=t.headers
        )
        lines = export.content.splitlines(keepends=True)
        records = sum(len(line) for line in lines[1:-1])  # the estimate leaves out header and end
        async with api._db.tenant_tx(t.id) as tx:
            ns = await api._namespace(tx, t.principal, t.namespace)
            weighed = await repo.export_size(tx.session, t.id, ns.id, COLUMNS, embeddings=embeddings)
        assert records <= weighed <= records * 1.05, (embeddings, records, weighed)
