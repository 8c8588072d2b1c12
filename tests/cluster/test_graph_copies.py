"""Copies of one text past the cap stay out of the HNSW graph on Citus too (migration 0036): the
trigger counts in the shard it fires on, whose graph is the one that matters, and the search's
nearest rows (the shard-local memvault_nearest_keyed, and the filtered read) find them exactly."""

from __future__ import annotations

import uuid
from typing import Any

import pytest

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.db.conftest import clone_memory
from tests.memories.test_access import stored
from tests.retrieval.test_graph_copies import (
    GRAPH_COPIES,
    READS,
    SHAPES,
    copies_of,
    dense_ranks,
    in_graph,
    short_scan,
)


@pytest.mark.parametrize("shape", SHAPES)
async def test_copies_past_the_cap_stay_out_of_a_shards_graph_and_are_found(
    citus_api: NamespaceAPI, citus_a: Tenant, shape: str
) -> None:
    text_ = f"The onboarding checklist {uuid.uuid4().hex[:6]} is done"
    (first, _) = await stored(citus_api, citus_a, text_, "The user drinks green tea")
    await clone_memory(citus_api, first, GRAPH_COPIES + 2)

    copies = await copies_of(citus_api, first)
    assert sorted(await in_graph(citus_api, copies), reverse=True) == [True] * GRAPH_COPIES + [False] * 3
    ranks = await dense_ranks(citus_api, citus_a, "is the onboarding checklist done?", SHAPES[shape])
    assert {rank for memory_id, rank in ranks.items() if memory_id in copies} >= {1}
    assert len(ranks) == 5  # copies in and out of the graph, and the tea


@READS
async def test_a_shards_graph_scan_that_gives_up_short_reads_the_tenants_rows_exactly(
    citus_api: NamespaceAPI, citus_a: Tenant, citus_b: Tenant, read: Any
) -> None:
    """Migration 0037 on Citus: the shard-local function and the routed statement read the
    tenant's shard exactly when its graph scan comes back short (here: after one element)."""
    await short_scan(citus_api, citus_a, citus_b, read)
