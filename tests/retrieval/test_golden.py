"""The SQL a search sends, pinned byte for byte.

Start-up builds every statement shape a default search can take (``NamespaceAPI.warm_search``),
and a search reads its namespace, its candidates and their neighbours with a few more. The text
PostgreSQL receives for each is checked in under ``golden/``: a refactor of retrieval that
changes a plan's input shows up here as a diff to read, not as a slower search found later.

After a change to a statement made on purpose, write the files again and read the diff:

    MEMVAULT_GOLDEN_WRITE=1 python -m pytest tests/retrieval/test_golden.py
"""

from __future__ import annotations

import itertools
import os
import re
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import event

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant

GOLDEN = Path(__file__).parent / "golden"
MARK = re.compile(r"^/\* tenant rows ~1e\d+ \*/ ")
WRITE = os.environ.get("MEMVAULT_GOLDEN_WRITE") == "1"


@contextmanager
def sent(api: NamespaceAPI, keep: Callable[[str], bool]) -> Iterator[list[str]]:
    """The SQL text the app's connections send while the block runs, those ``keep`` accepts."""
    statements: list[str] = []

    def capture(_conn: Any, _cursor: Any, statement: str, _params: Any, _context: Any, _many: bool) -> None:
        # Without the tenant's size (db/planned.py): a test tenant may be among the statistics'
        # most common ones, depending on what the suite stored before.
        statement = MARK.sub("", statement)
        if keep(statement):
            statements.append(statement)

    engine = api._db.app_engine.sync_engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        yield statements
    finally:
        event.remove(engine, "before_cursor_execute", capture)


def check(folder: str, named: list[tuple[str, str]]) -> None:
    """Compare each (name, SQL) with ``golden/<folder>/<name>.sql``, or write them with
    MEMVAULT_GOLDEN_WRITE=1. Every file in the folder must be produced: a shape that is no longer
    built is a change too."""
    where = GOLDEN / folder
    if WRITE:
        where.mkdir(parents=True, exist_ok=True)
        for old in where.glob("*.sql"):
            old.unlink()
        for name, sql in named:
            (where / f"{name}.sql").write_text(sql + "\n")
    expected = sorted(p.stem for p in where.glob("*.sql"))
    assert sorted(name for name, _ in named) == expected
    changed = [name for name, sql in named if (where / f"{name}.sql").read_text() != sql + "\n"]
    assert not changed, f"SQL differs from tests/retrieval/golden/{folder}: {changed}"


def warm_names() -> list[str]:
    """The shapes warm_search builds, in its order: unfiltered, as a user whose scope chain is not
    small, as a user whose chain is small; within each, query words the namespace has or not, an
    intent or not, named entities or not, and the time cue."""
    readers = ("unfiltered", "user", "user-small-chain")
    times = ("no-time", "window", "newest", "oldest")
    return [
        f"{n:02d}-{reader}-{words}-{intent}-{graph}-{time}"
        for n, (reader, words, intent, graph, time) in enumerate(
            (reader, *rest)
            for reader in readers
            for rest in itertools.product(("words", "no-words"), ("no-intent", "intent"), ("no-graph", "graph"), times)
        )
    ]


async def test_the_statements_warmed_at_start_are_unchanged(api: NamespaceAPI) -> None:
    with sent(api, lambda sql: "lex_inner" in sql) as statements:
        ran = await api.warm_search()

    assert ran == len(statements) == 96
    check("warm", list(zip(warm_names(), statements, strict=True)))


def search_statement(sql: str) -> bool:
    """The preamble (the namespace by name), the fused statement and the neighbour lookups: what
    every search sends, and not the term statistics, which a cache may or may not answer."""
    return "lex_inner" in sql or "namespaces.name = " in sql or " AS anchor(" in sql


async def test_a_search_sends_the_statements_it_always_did(api: NamespaceAPI, tenant_a: Tenant) -> None:
    p, ns = tenant_a.principal, tenant_a.namespace
    for content in ("Ada booked the ferry to the harbour", "The lantern festival is in March", "Ada likes pepper"):
        await api.store(p, ns, MemoryIn(content=content, session_id="s1", user_id="ada"))
    requests = {
        "default": SearchIn(query="when is the ferry to the harbour"),
        "neighbours": SearchIn(query="lantern festival", neighbours=1),
        "no-graph-as-user": SearchIn(query="what does Ada like", weights={"graph": 0}, filters={"user_id": "ada"}),
        "weighted-newest": SearchIn(query="the latest about the harbour", fusion="weighted"),
    }
    named: list[tuple[str, str]] = []
    for label, req in requests.items():
        with sent(api, search_statement) as statements:
            out = await api.search(p, ns, req)
        assert out.results
        named += [(f"{label}-{i}", sql) for i, sql in enumerate(statements)]

    check("search", named)
