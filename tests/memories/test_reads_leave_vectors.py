"""What a client is shown of a memory never carries its vector or its word index: a read that
returns memories (get, a list page, a search's hits and their neighbours, a context) leaves the
``embedding`` (1,536 bytes, most rows' stored out of line: a TOAST read each, then the text form
parsed in Python) and the ``tsv`` columns in the database. Only SQL computes with them."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from sqlalchemy import event

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from memvault.retrieval.context import ContextIn
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant

TURNS = [
    "Did you see the heron by the canal this morning?",
    "Yes, it stood on the lock gate for an hour.",
    "We should bring the big lens on Saturday.",
]


@contextmanager
def returned_columns(api: NamespaceAPI) -> Iterator[list[str]]:
    """The names of the columns every statement of the app engine returned, while inside."""
    names: list[str] = []

    def seen(_c: object, cursor: Any, _statement: str, _params: object, _ctx: object, _many: bool) -> None:
        names.extend(d.name for d in cursor.description or ())

    engine = api._db.app_engine.sync_engine
    event.listen(engine, "after_cursor_execute", seen)
    try:
        yield names
    finally:
        event.remove(engine, "after_cursor_execute", seen)


def carried(names: list[str]) -> list[str]:
    return [n for n in names if n in ("embedding", "tsv") or n.endswith(("_embedding", "_tsv"))]


async def test_reads_that_return_memories_return_no_vectors(api: NamespaceAPI, tenant_a: Tenant) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    stored = [await api.store(p, ns, MemoryIn(content=t, type="event", session_id="walk")) for t in TURNS]
    # Turns with no session id: their neighbours are read by the inferred conversation's path.
    for t in TURNS:
        await api.store(p, ns, MemoryIn(content=f"{t} (sent from the phone)", type="event"))

    with returned_columns(api) as names:
        got = await api.get_memory(p, ns, stored[1].id)
        page = await api.list_memories(p, ns, limit=10)
        found = await api.search(p, ns, SearchIn(query="the heron on the lock gate", neighbours=2))
        context = await api.get_context(p, ns, ContextIn(query="heron", session_id="walk"))

    assert got.content == TURNS[1]
    assert len(page.data) == 6
    assert any(r.neighbours for r in found.results), "the neighbours' read ran"
    assert {r.signals.neighbourhood for r in found.results if r.neighbours} >= {"session", "inferred"}
    assert "heron" in context.context
    assert names, "the statements were seen"
    assert carried(names) == []
