"""Copies of one text in the HNSW graph (migration 0036): pgvector's neighbour selection lets
hundreds of rows of one vector hold only each other in their neighbour lists, so a memory stored
near them is reached by no index scan, and a search entering them finds no way out. Past a few
copies per text, rows stay out of the graph and every nearest-neighbour read takes them exactly.

Each search here runs both ways: unfiltered (``memvault_nearest_keyed``) and filtered (the nearest
rows read inside the search statement)."""

from __future__ import annotations

import json
import uuid
from typing import Any

import pytest
from pgvector.sqlalchemy import Vector
from sqlalchemy import cast, select, text
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.api import NamespaceAPI
from memvault.memories.models import Memory
from memvault.memories.schemas import MemoryFilters
from memvault.retrieval.schemas import SearchIn
from memvault.retrieval.sql.candidates import dense_inner
from tests.conftest import Tenant
from tests.db.conftest import clone_memory
from tests.memories.test_access import stored

GRAPH_COPIES = 8  # migration 0036
SHAPES = {"unfiltered": None, "filtered": MemoryFilters(state=["tentative", "stable"])}


async def in_graph(api: NamespaceAPI, ids: list[uuid.UUID]) -> list[bool]:
    async with api._db.owner() as s:
        found = await s.execute(text("SELECT id, in_graph FROM memories WHERE id = ANY(:ids)"), {"ids": ids})
        rows = dict(found.all())
    return [rows[i] for i in ids]


async def copies_of(api: NamespaceAPI, memory_id: uuid.UUID) -> list[uuid.UUID]:
    """The rows of the memory's tenant with its text (clones share its created_at and seq: in no
    particular order)."""
    async with api._db.owner() as s:
        rows = await s.execute(
            text(
                # Joined on the tenant as well: on Citus a join within one shard.
                "SELECT c.id FROM memories c JOIN memories m ON c.tenant_id = m.tenant_id "
                "AND c.content_hash = m.content_hash WHERE m.id = :id"
            ),
            {"id": memory_id},
        )
        return [r for (r,) in rows]


async def dense_ranks(api: NamespaceAPI, t: Tenant, query: str, filters: Any) -> dict[uuid.UUID, int | None]:
    out = await api.search(t.principal, t.namespace, SearchIn(query=query, limit=5, filters=filters))
    return {r.memory.id: r.signals.dense_rank for r in out.results}


async def test_copies_past_the_cap_stay_out_of_the_graph(api: NamespaceAPI, tenant_b: Tenant) -> None:
    text_ = f"The onboarding checklist {uuid.uuid4()} is done"
    (first,) = await stored(api, tenant_b, text_)
    await clone_memory(api, first, 2 * GRAPH_COPIES)  # one INSERT: each row counts those before it

    flags = await in_graph(api, await copies_of(api, first))

    assert sorted(flags, reverse=True) == [True] * GRAPH_COPIES + [False] * (GRAPH_COPIES + 1)
    assert await in_graph(api, [first]) == [True]  # stored first, counted first


@pytest.mark.parametrize("shape", SHAPES)
async def test_a_copy_out_of_the_graph_is_found_by_meaning(
    api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, shape: str
) -> None:
    text_ = f"Priya keeps the spare key {uuid.uuid4().hex[:6]} under the blue flowerpot"
    (theirs,) = await stored(api, tenant_b, text_)
    await clone_memory(api, theirs, GRAPH_COPIES)
    mine = await stored(api, tenant_a, text_, "The user drinks green tea")

    assert await in_graph(api, mine) == [False, True]  # another tenant's copies filled the graph's share
    ranks = await dense_ranks(api, tenant_a, "where is the spare key hidden?", SHAPES[shape])
    assert ranks[mine[0]] == 1


@pytest.mark.parametrize("shape", SHAPES)
async def test_another_tenants_copies_do_not_blind_a_large_tenants_search(
    api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, shape: str
) -> None:
    """A thousand rows of one text in another tenant; a tenant large enough that its nearest rows
    come from the HNSW index. On the old schema its dense channel found nothing at all for a query
    near that text: not its own memory, not any of its 4,000 others."""
    crowd_text = f"Priya's ferry {uuid.uuid4().hex[:4]} to Hydra leaves on Friday"
    (crowd,) = await stored(api, tenant_b, crowd_text)
    await clone_memory(api, crowd, 999)
    monday, tea = await stored(api, tenant_a, crowd_text.replace("Friday", "Monday"), "The user drinks green tea")
    async with api._db.owner() as s:
        # 4,000 more memories of tenant A with vectors of their own (random: fast to make).
        columns = [
            c
            for (c,) in await s.execute(
                text(
                    "SELECT column_name FROM information_schema.columns WHERE table_name = 'memories' "
                    "AND is_generated = 'NEVER' AND column_name NOT IN ('id', 'embedding', 'content_hash')"
                )
            )
        ]
        await s.execute(
            text(
                f"INSERT INTO memories (id, embedding, content_hash, {', '.join(columns)}) "
                "SELECT gen_random_uuid(), "
                "(SELECT array_agg(random() - 0.5 + 0 * g + 0 * d)::vector FROM generate_series(1, 384) d), "
                f"md5(g::text || m.id::text), {', '.join('m.' + c for c in columns)} "
                "FROM memories m, generate_series(1, 4000) g WHERE m.id = :id"
            ),
            {"id": tea},
        )
        await s.execute(text("ANALYZE memories"))
        plan = "\n".join(
            r
            for (r,) in await s.execute(
                text(
                    "EXPLAIN SELECT id FROM memories WHERE tenant_id = :t AND in_graph "
                    "AND embedding IS NOT NULL ORDER BY embedding <=> (SELECT embedding FROM memories "
                    "WHERE id = :m) LIMIT 50"
                ),
                {"t": tenant_a.id, "m": monday},
            )
        )
    assert "ix_memories_embedding" in plan  # the index, not an exact read of the tenant's rows

    ranks = await dense_ranks(api, tenant_a, "When does Priya's ferry to Hydra leave?", SHAPES[shape])

    assert ranks.get(monday) == 1


async def by_function(s: AsyncSession, t: Tenant, namespace: uuid.UUID, vector: str, model: str) -> list[uuid.UUID]:
    found = await s.execute(
        text("SELECT id FROM memvault_nearest_keyed(:ns, CAST(:v AS vector), :model, 10)"),
        {"ns": namespace, "v": vector, "model": model},
    )
    return [r for (r,) in found]


async def by_statement(s: AsyncSession, t: Tenant, namespace: uuid.UUID, vector: str, model: str) -> list[uuid.UUID]:
    """The filtered search's nearest read (its conditions here: the namespace's live rows)."""
    where = [Memory.tenant_id == t.id, Memory.namespace_id == namespace, Memory.superseded_at.is_(None)]
    inner = dense_inner(Memory, where, cast(json.loads(vector), Vector), model, 10)
    return [r for (r,) in await s.execute(select(inner.c.id).order_by(inner.c.dist))]


READS = pytest.mark.parametrize("read", [by_function, by_statement], ids=["function", "statement"])


async def short_scan(api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, read: Any) -> list[uuid.UUID]:
    """Tenant A's nearest rows to another tenant's copy of a question, by ``read``, from an HNSW
    scan that stops after one element; asserted to be A's two memories, nearest first."""
    asked = f"Priya's ferry {uuid.uuid4().hex[:4]} to Hydra leaves on Friday"
    await stored(api, tenant_b, asked)
    mine = await stored(api, tenant_a, asked.replace("Friday", "Monday"), "The user drinks green tea")
    async with api._db.owner() as s:
        model, namespace = (
            await s.execute(text("SELECT embedding_model, namespace_id FROM memories WHERE id = :id"), {"id": mine[0]})
        ).one()
        theirs = (await s.execute(text("SELECT embedding::text FROM memories WHERE content = :c"), {"c": asked})).one()
        # SET LOCAL, not set_config(): on Citus only SET LOCAL reaches the shard's node.
        for name, value in {
            "app.tenant_id": str(tenant_a.id),
            # The index's order rather than the tenant's rows sorted: the plan of a large tenant.
            "enable_sort": "off",
            "hnsw.iterative_scan": "off",
            "hnsw.ef_search": "1",
        }.items():
            await s.execute(text(f"SET LOCAL {name} = '{value}'"))
        ids = await read(s, tenant_a, namespace, theirs[0], model)
    assert ids == mine  # the Monday line first, then the tea
    return ids


@READS
async def test_a_graph_scan_that_gives_up_short_reads_the_tenants_rows_exactly(
    api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, read: Any
) -> None:
    """The HNSW scan stops after ``hnsw.max_scan_tuples`` index tuples (and what it saw on the
    way); a tenant whose rows lie beyond that many other rows nearer the query got no dense
    candidate at all (migration 0037). Here the scan stops after one element, another tenant's
    copy of the query's own text: a graph too small to hold 20,000 nearer rows cannot show it."""
    await short_scan(api, tenant_a, tenant_b, read)
