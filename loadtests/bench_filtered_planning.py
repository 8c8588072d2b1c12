"""What PostgreSQL spends planning and running a filtered search's statement, from this checkout.

A filtered search (a user's, a session's, any `filters`) is planned on every call: its plan must
see the filter values (docs/architecture.md, "filtered search"). This stores LoCoMo conversations
with each turn's speaker as its `user_id`, searches each question as one of the speakers, keeps
the statements the server sent, and runs each again under `EXPLAIN (ANALYZE, TIMING OFF,
SUMMARY)` in the search's own transaction settings. Compare two trees by running it from each,
alternating (the machine's load moves both figures):

    HF_HUB_OFFLINE=1 PYTHONPATH=services .venv/bin/python loadtests/bench_filtered_planning.py --label main
    cd <other checkout> && HF_HUB_OFFLINE=1 PYTHONPATH=services <venv>/bin/python \\
        loadtests/bench_filtered_planning.py --label other

LoCoMo is read in place (../shared/datasets; `--data` elsewhere), never copied.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import statistics
import uuid
from pathlib import Path
from typing import Any

from harness import DEFAULT_DATA, embedded_app, turns_of

# Statements this long are the search's; the preamble's and the writes' are a few hundred bytes.
SEARCH_STATEMENT_CHARS = 4000


async def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA)
    parser.add_argument("--conversations", type=int, default=2)
    parser.add_argument("--questions", type=int, default=30)
    parser.add_argument("--rounds", type=int, default=3, help="EXPLAIN runs of each statement")
    parser.add_argument("--label", default="this tree")
    args = parser.parse_args()

    from sqlalchemy import event

    from memvault.db.session import set_local
    from memvault.memories.schemas import MemoryFilters, MemoryIn
    from memvault.namespaces.schemas import NamespaceIn
    from memvault.principal import Principal
    from memvault.retrieval.schemas import SearchIn
    from memvault.retrieval.sql.settings import search_settings

    data = json.loads(args.data.read_text())[: args.conversations]
    async with embedded_app() as stack:
        api = stack.api
        tenant = await api.create_tenant(f"plan-{uuid.uuid4().hex[:6]}")
        p = Principal.system(tenant.id, subject="bench")
        for conv in data:
            await api.create_namespace(p, NamespaceIn(name=conv["sample_id"]))
            turns = [MemoryIn(**t, user_id=t["content"].split(":")[0]) for t in turns_of(conv)]
            for i in range(0, len(turns), 200):
                await api.store_many(p, conv["sample_id"], turns[i : i + 200])

        sent: list[tuple[str, Any]] = []

        def keep(conn: Any, cursor: Any, statement: str, parameters: Any, context: Any, executemany: bool) -> None:
            if len(statement) > SEARCH_STATEMENT_CHARS:
                sent.append((statement, parameters))

        conv = data[0]
        filters = MemoryFilters(user_id=turns_of(conv)[0]["content"].split(":")[0])
        questions = [q["question"] for q in conv["qa"] if q.get("category") in (1, 2, 3, 4)][: args.questions]
        engine = api._db.app_engine.sync_engine
        event.listen(engine, "before_cursor_execute", keep)
        try:
            for q in questions:
                await api.search(p, conv["sample_id"], SearchIn(query=q, limit=10, filters=filters))
        finally:
            event.remove(engine, "before_cursor_execute", keep)

        planning: list[float] = []
        execution: list[float] = []
        for _ in range(args.rounds):
            for statement, parameters in sent:
                async with api._db.tenant_tx(tenant.id) as tx:
                    await set_local(tx.session, search_settings(filters, 50))
                    conn = await tx.session.connection()
                    explain = "EXPLAIN (ANALYZE, TIMING OFF, SUMMARY, FORMAT JSON) " + statement
                    out = (await conn.exec_driver_sql(explain, parameters)).scalar()
                    plan = (out if isinstance(out, list) else json.loads(out))[0]
                    planning.append(plan["Planning Time"])
                    execution.append(plan["Execution Time"])
    print(
        f"| {args.label} | {statistics.median(planning):.2f} | {statistics.median(execution):.2f} | "
        f"{len(sent)} statements x {args.rounds} |"
    )


if __name__ == "__main__":
    asyncio.run(main())
