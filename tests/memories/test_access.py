"""Access counts: a search counts each hit without waiting for the write (memories/access.py); the
counts reach the memories within the write interval, at shutdown, or with the next read of one."""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import AsyncIterator
from datetime import datetime

import pytest
from sqlalchemy import text
from sqlalchemy.engine import make_url

from memvault.api import NamespaceAPI
from memvault.db.session import Database
from memvault.db.urls import DatabaseUrls
from memvault.memories import repository as repo
from memvault.memories.access import AccessLog
from memvault.memories.schemas import MemoryIn
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant


async def counts(api: NamespaceAPI, *ids: uuid.UUID) -> dict[uuid.UUID, tuple[int, datetime | None]]:
    """access_count and last_accessed_at as stored, read as the owner."""
    async with api._db.owner() as s:
        rows = await s.execute(
            text("SELECT id, access_count, last_accessed_at FROM memories WHERE id = ANY(:ids)"), {"ids": list(ids)}
        )
        return {r.id: (r.access_count, r.last_accessed_at) for r in rows}


async def stored(api: NamespaceAPI, t: Tenant, *contents: str) -> list[uuid.UUID]:
    out = await api.store_many(t.principal, t.namespace, [MemoryIn(content=c) for c in contents])
    return [m.id for m in out]


@pytest.fixture
async def slow(api: NamespaceAPI) -> AsyncIterator[NamespaceAPI]:
    """A facade over the same database that writes counts only when closed (a 60 s interval)."""
    facade = NamespaceAPI(api._db, api._embedder, api._settings.model_copy(update={"access_write_interval_s": 60}))
    yield facade
    await facade.aclose()


async def test_search_returns_before_the_count_is_written_and_it_lands_within_the_interval(
    api: NamespaceAPI, tenant_a: Tenant
) -> None:
    (zorblax,) = await stored(api, tenant_a, "The zorblax lives under the stairs.")

    out = await api.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="zorblax"))

    assert [r.memory.id for r in out.results] == [zorblax]
    assert out.results[0].memory.access_count == 0  # the hit as it was found
    deadline = asyncio.get_running_loop().time() + 5 * api._settings.access_write_interval_s
    while (await counts(api, zorblax))[zorblax][0] == 0:
        assert asyncio.get_running_loop().time() < deadline, "the access count was never written"
        await asyncio.sleep(0.05)
    count, last = (await counts(api, zorblax))[zorblax]
    assert count == 1 and last is not None


async def test_repeated_hits_are_one_write_that_adds_them_all(slow: NamespaceAPI, tenant_a: Tenant) -> None:
    found, other = await stored(slow, tenant_a, "The zorblax lives under the stairs.", "Tea is served at four.")

    for _ in range(3):
        out = await slow.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="zorblax", limit=1))
        assert [r.memory.id for r in out.results] == [found]
    assert (await counts(slow, found))[found] == (0, None)  # nothing written yet

    searched_until = datetime.now().astimezone()
    await slow.aclose()

    written = await counts(slow, found, other)
    assert written[found][0] == 3
    assert written[found][1] is not None and written[found][1] <= searched_until
    assert written[other] == (0, None)


async def test_reading_a_memory_includes_its_pending_searches(slow: NamespaceAPI, tenant_a: Tenant) -> None:
    (found,) = await stored(slow, tenant_a, "The zorblax lives under the stairs.")
    for _ in range(2):
        await slow.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="zorblax"))

    read = await slow.get_memory(tenant_a.principal, tenant_a.namespace, found)

    assert read.access_count == 3  # two searches and this read, none of them written before it
    await slow.aclose()
    assert (await counts(slow, found))[found][0] == 3  # the searches were not counted twice


async def test_a_read_during_the_write_of_its_count_waits_for_it(
    slow: NamespaceAPI, tenant_a: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    (found,) = await stored(slow, tenant_a, "The zorblax lives under the stairs.")
    await slow.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="zorblax"))
    # The write of the search's count has taken it from the log but not yet committed it.
    gate = asyncio.Event()
    real = repo.count_accesses

    async def held(*args: object, **kwargs: object) -> None:
        await gate.wait()
        await real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(repo, "count_accesses", held)
    writing = asyncio.create_task(slow._accesses.flush())
    await asyncio.sleep(0.05)

    reading = asyncio.create_task(slow.get_memory(tenant_a.principal, tenant_a.namespace, found))
    await asyncio.sleep(0.2)
    assert not reading.done()  # it waits for the write instead of reading around it
    gate.set()
    await writing

    assert (await reading).access_count == 2  # the search and this read
    assert (await counts(slow, found))[found][0] == 2


async def test_a_flush_returns_once_the_write_under_way_is_in(
    api: NamespaceAPI, tenant_a: Tenant, monkeypatch: pytest.MonkeyPatch
) -> None:
    """``flush`` is "everything recorded so far is written" (a test, or an account's usage read
    right after it): when the writer has already taken the batch and is writing it, a flush must
    wait for that write, not return at once with nothing left to write."""
    quick = NamespaceAPI(api._db, api._embedder, api._settings.model_copy(update={"access_write_interval_s": 0.05}))
    gate = asyncio.Event()
    try:
        (found,) = await stored(quick, tenant_a, "The zorblax lives under the stairs.")
        real = repo.count_accesses

        async def held(*args: object, **kwargs: object) -> None:
            await gate.wait()
            await real(*args, **kwargs)  # type: ignore[arg-type]

        monkeypatch.setattr(repo, "count_accesses", held)
        await quick.search(tenant_a.principal, tenant_a.namespace, SearchIn(query="zorblax"))
        deadline = asyncio.get_running_loop().time() + 10
        while quick._accesses.pending:  # the writer takes the batch after its interval
            assert asyncio.get_running_loop().time() < deadline, "the writer never took the batch"
            await asyncio.sleep(0.01)

        flushing = asyncio.create_task(quick._accesses.flush())
        await asyncio.sleep(0.2)
        assert not flushing.done()  # the count is not in yet: the flush waits for it
        gate.set()
        await flushing
        assert (await counts(quick, found))[found][0] == 1
    finally:
        gate.set()  # a failed assertion must not leave the writer held for good
        await quick.aclose()


async def test_a_count_never_reaches_another_tenants_memory(
    slow: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    (theirs,) = await stored(slow, tenant_b, "The zorblax lives under the stairs.")

    # Tenant A's log naming B's memory (an id A could only have guessed): the write runs as A.
    slow._accesses.record(tenant_a.id, [theirs])
    await slow.aclose()

    assert (await counts(slow, theirs))[theirs] == (0, None)


async def test_counts_wait_for_an_unreachable_database_up_to_a_limit(api: NamespaceAPI) -> None:
    nowhere = make_url("postgresql+psycopg://memvault@127.0.0.1:1/memvault")
    db = Database(DatabaseUrls(owner=nowhere, app=nowhere), pooled=False)
    log = AccessLog(db, interval_s=60, max_pending=3)
    tenant = uuid.uuid4()
    try:
        log.record(tenant, [uuid.uuid4(), uuid.uuid4()])
        await log.flush()
        assert log.pending == 2  # kept for the next write

        log.record(tenant, [uuid.uuid4(), uuid.uuid4()])
        await log.aclose()
        assert log.pending == 0  # four would pass the limit of three: dropped, not held forever
    finally:
        await db.dispose()
