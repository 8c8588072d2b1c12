"""The transaction-local settings a search runs with."""

from __future__ import annotations

from memvault.memories.schemas import MemoryFilters


def hnsw_settings(candidates: int) -> dict[str, str]:
    """The transaction-local HNSW settings a search for ``candidates`` nearest rows runs with."""
    return {
        # pgvector 0.8: keep scanning the HNSW graph until enough rows pass the filters, instead of
        # returning fewer than asked when the tenant's rows are a small part of the index.
        "hnsw.iterative_scan": "relaxed_order",
        "hnsw.ef_search": str(max(64, candidates)),
    }


def plan_cache_mode(filters: MemoryFilters | None) -> str:
    """How PostgreSQL plans a search transaction's statements. An unfiltered search reads the rows
    whose best access path depends on the tenant's size (the nearest vectors, the word matches)
    through functions that plan each call for their tenant (migrations 0011, 0013); the rest of its
    statement reaches rows by key, so one plan per connection serves every tenant and the search
    skips planning. Filters go inside the nearest-vector scan, whose plan must see their values."""
    return "force_generic_plan" if (filters or MemoryFilters()) == MemoryFilters() else "force_custom_plan"


# PostgreSQL's default of 4 prices a random page read as a spinning disk's. A search reaches its
# candidates by key in data served from memory, and priced at 4 those lookups lost to reading a
# small tenant's rows whole, each paying the row-level security check (migration 0015).
RANDOM_PAGE_COST = "1.1"


def search_settings(filters: MemoryFilters | None, candidates: int) -> dict[str, str]:
    """The transaction-local settings a search runs with, made when its transaction opens."""
    return {
        "plan_cache_mode": plan_cache_mode(filters),
        "random_page_cost": RANDOM_PAGE_COST,
        **hnsw_settings(candidates),
    }
