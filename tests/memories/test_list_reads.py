"""A page of the list reads a page: each level of the scope chain is read newest first along
``ix_memories_list`` and stops at the page's size, however many memories the namespace holds."""

from __future__ import annotations

import json
from typing import Any

from sqlalchemy import event, text

from memvault.api import NamespaceAPI
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryIn
from tests.conftest import Tenant


def scans_of(plan: dict[str, Any], relation: str) -> list[dict[str, Any]]:
    found = [plan] if plan.get("Relation Name") == relation else []
    for child in plan.get("Plans", []):
        found += scans_of(child, relation)
    return found


async def test_a_page_reads_no_more_rows_than_it_shows(api: NamespaceAPI, tenant_a: Tenant) -> None:
    first = await api.store(tenant_a.principal, "default", MemoryIn(content="The zorblax was fed at dawn."))
    columns = [c.name for c in Memory.__table__.columns if c.computed is None]
    copied = {"id": "gen_random_uuid()", "created_at": "m.created_at - make_interval(secs => g)"}
    async with api._db.owner() as s:  # 400 older copies (no embedding of their own is needed here)
        await s.execute(
            text(
                f"INSERT INTO memories ({', '.join(columns)}) "
                f"SELECT {', '.join(copied.get(c, f'm.{c}') for c in columns)} "
                "FROM memories m, generate_series(1, 400) g WHERE m.id = :id"
            ),
            {"id": first.id},
        )
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
    async with api._db.tenant_tx(tenant_a.id) as tx:
        connection = await tx.session.connection()
        raw = (await connection.exec_driver_sql("EXPLAIN (ANALYZE, FORMAT JSON) " + statement, params)).scalar_one()
    plan = (raw if isinstance(raw, list) else json.loads(raw))[0]["Plan"]
    read = [(n["Node Type"], n.get("Alias"), n["Actual Rows"] * n["Actual Loops"]) for n in scans_of(plan, "memories")]
    # The namespace's 401 rows are not all read and sorted: each level's scan stops at six.
    assert read and all(rows <= 6 for _, _, rows in read), read
