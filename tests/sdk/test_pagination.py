"""Lists walk every page: the sync page is iterable, the async paginator awaitable and async-iterable."""

from __future__ import annotations

import itertools
from typing import Any

from memvault_sdk import AsyncPage, SyncPage
from tests.sdk.conftest import call, first_page, items


async def test_memories_across_pages(client: Any) -> None:
    made = await call(client.memories.create_many([{"content": f"fact number {i}"} for i in range(7)]))
    page = await first_page(client.memories.list(limit=3))
    assert isinstance(page, SyncPage | AsyncPage)
    assert len(page.data) == 3 and page.has_next_page()

    everything = await items(client.memories.list(limit=3))
    assert sorted(m.id for m in everything) == sorted(m.id for m in made)
    assert len({m.id for m in everything}) == 7

    sizes = []
    if isinstance(page, SyncPage):
        sizes = [len(p.data) for p in page.iter_pages()]
    else:
        sizes = [len(p.data) async for p in page.iter_pages()]
    assert sizes == [3, 3, 1]


async def test_next_page_by_hand(client: Any) -> None:
    await call(client.memories.create_many([{"content": f"note {i}"} for i in range(3)]))
    page = await first_page(client.memories.list(limit=2))
    second = await call(page.get_next_page())
    assert len(second.data) == 1 and not second.has_next_page()
    assert {m.id for m in page.data}.isdisjoint(m.id for m in second.data)


async def test_messages_audit_entities_relations_traces_across_pages(client: Any) -> None:
    await call(client.events.ingest([{"role": "user", "content": f"message {i}"} for i in range(5)], session_id="s"))
    messages = await items(client.sessions.messages("s", limit=2))
    assert [m.content for m in messages] == [f"message {i}" for i in range(5)]

    entities = [await call(client.entities.create(f"Person {i}", type="person")) for i in range(3)]
    assert len(await items(client.entities.list(limit=2))) == 3
    for a, b in itertools.pairwise(entities):
        await call(client.relations.create(a.id, "knows", b.id))
    assert len(await items(client.relations.list(limit=1))) == 2
    for i in range(3):
        await call(client.traces.start(f"task {i}"))
    assert len(await items(client.traces.list(limit=2))) == 3
    for i in range(3):
        await call(client.events.ingest([{"role": "user", "content": "hi"}], session_id=f"other-{i}"))
    assert len(await items(client.sessions.list(limit=2))) == 4
    creates = await items(client.audit.list(action="entity.create", limit=2))
    assert len(creates) == 3
