"""A page of the list reads a page: each level of the scope chain is read newest first along
``ix_memories_list`` and stops at the page's size, however many memories the namespace holds."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event, text

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from tests.conftest import Tenant
from tests.db.conftest import clone_memory


def scans_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", []):
        found += scans_of(child, relation)
    return found


async def test_a_page_reads_no_more_rows_than_it_shows(api: NamespaceAPI, tenant_a: Tenant) -> None:
    first = await api.store(tenant_a.principal, "default", MemoryIn(content="The zorblax was fed at dawn."))
    await clone_memory(api, first.id, 400, older=True, vector=False)
    async with api._db.owner() as s:
        await s.execute(text("ANALYZE memories"))
    sent: list[tuple[str, Any]] = []

    def capture(_c: object, _cur: object, statement: str, params: Any, _ctx: object, _many: bool) -> None:
        if "FROM memories" in statement and "ORDER BY" in statement:
            sent.append((statement, params))

    engine = api._db.app_engine.sync_engine
    event.listen(engine, "before_cursor_execute", capture)
    try:
        page = await api.list_memories(tenant_a.principal, "default", limit=5)
    finally:
        event.remove(engine, "before_cursor_execute", capture)

    assert len(page.data) == 5 and page.next_cursor is not None
    (statement, params) = sent[-1]
    # Planned with ordered index access only: on a namespace this small PostgreSQL may as well
    # read it all (by a bitmap, or another index) and sort it, cheap here, which says nothing of
    # 100,000 rows, where it must not (loadtests/bench_list.py: 137 -> 7-13 ms p50; CI chose both
    # on 2026-12-06). What the test holds the statement to: given its indexes, a page reads a page.
    # The chain's OR in one statement could not, whatever it was allowed.
    settings = {"enable_seqscan": "off", "enable_bitmapscan": "off", "enable_sort": "off"}
    async with api._db.tenant_tx(tenant_a.id, settings=settings) as tx:
        connection = await tx.session.connection()
        raw = (await connection.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)).scalar_one()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    read = [(n["Node Type"], n.get("Alias"), n["Actual Rows"] * n["Actual Loops"]) for n in scans_of(plan, "memories")]
    # The namespace's 401 rows are not all read and sorted: each level's scan stops at six.
    assert read and all(rows <= 6 for _, _, rows in read), read
