"""The lexical channel ranks by BM25: a rare word the query shares counts for more than a common
one, word frequencies are counted in the caller's namespace only, and the cache of those counts
follows new writes within its lifetime."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from memvault.retrieval.lexical import TermStats, TermStatsCache
from tests.conftest import Tenant
from tests.memories.test_router import BATCH, search, store, store_many

WORDS_ONLY = {"dense": 0, "lexical": 1}


def contents(out: dict) -> list[str]:  # type: ignore[type-arg]
    return [r["memory"]["content"] for r in out["results"]]


class TestBM25:
    async def test_the_rare_shared_word_wins(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        common = [f"Project status note number {i}" for i in range(12)]
        await store_many(client, tenant_a, [*common, "Zephyr is the codename of the new router"])

        out = await search(client, tenant_a, "project zephyr", weights=WORDS_ONLY)

        assert contents(out)[0] == "Zephyr is the codename of the new router"
        lexical = [r["signals"]["channels"]["lexical"]["value"] for r in out["results"]]
        assert lexical[0] > 2 * lexical[1]  # one rare word outweighs one of thirteen common ones

    async def test_shorter_memories_win_at_equal_words(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        short = "Quokka feeding schedule"
        long = "Quokka notes: the enclosure, the keepers, the visitors, the fences, the gates and the feeding schedule"
        await store_many(client, tenant_a, [long, short, "Unrelated line about lunch"])

        out = await search(client, tenant_a, "quokka feeding schedule", weights=WORDS_ONLY)

        assert contents(out)[:2] == [short, long]

    async def test_a_word_every_memory_says_does_not_rank_them_by_length(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # A namespace about one person: every memory names Sam, and no memory says "pets". Sam's
        # name scores near nothing in BM25, but as a share of the best match it counted in full,
        # and the shortest memory that says it came first.
        sam = [
            "Sam lives in Boston and works as a nurse",
            "Sam is allergic to peanuts",
            "Sam adopted a beagle named Rufus",
            "Sam started learning the violin",
            "Sam is vegetarian now",
            "Sam got a second dog, a greyhound called Misty",
            "Sam relocated to Austin, Texas",
        ]
        await store_many(client, tenant_a, sam)

        out = await search(client, tenant_a, "What pets does Sam have?")

        assert set(contents(out)[:2]) == {sam[2], sam[5]}
        lexical = {r["memory"]["content"]: r["signals"]["channels"]["lexical"] for r in out["results"]}
        assert lexical["Sam is vegetarian now"]["rank"] == 1  # BM25 still prefers the shortest

    async def test_a_readers_own_name_is_no_whole_match_among_many_users(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # A namespace of many people, each memory naming its person and owned by them. Read as
        # Sam, every memory the search sees names Sam, yet the word was weighed by the whole
        # namespace, where it is rare: it counted as a strong match, and the shortest memory
        # that says it came first.
        people = ["Ana", "Ben", "Chloe", "Dev", "Emma", "Farid", "Gita", "Hugo", "Ines"]
        lives = [
            "{} lives in Boston and works as a nurse",
            "{} is allergic to peanuts",
            "{} started learning the violin",
            "{} is vegetarian now",
            "{} relocated to Austin, Texas",
            "{} runs every morning before work",
            "{} reads a novel a week",
        ]
        memories = [{"content": line.format(name), "user_id": name.lower()} for name in people for line in lives]
        sam = [
            *(line.format("Sam") for line in lives),
            "Sam adopted a beagle named Rufus",
            "Sam got a second dog, a greyhound called Misty",
        ]
        memories += [{"content": content, "user_id": "sam"} for content in sam]
        r = await client.post(BATCH, json={"memories": memories}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text

        out = await search(client, tenant_a, "What pets does Sam have?", filters={"user_id": "sam"})

        assert set(contents(out)[:2]) == {sam[-2], sam[-1]}
        assert {r["memory"]["user_id"] for r in out["results"]} == {"sam"}

    async def test_another_tenants_words_do_not_change_the_weights(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store_many(client, tenant_a, ["Walrus tank cleaning rota", "Penguin tank cleaning rota"])
        before = await search(client, tenant_a, "walrus penguin tank", weights=WORDS_ONLY)
        # Tenant B makes "walrus" common in its own data: tenant A's weights must not move.
        await store_many(client, tenant_b, [f"Walrus fact {i}" for i in range(20)])

        after = await search(client, tenant_a, "walrus penguin tank", weights=WORDS_ONLY)

        values = [[r["signals"]["channels"]["lexical"]["value"] for r in out["results"]] for out in (before, after)]
        assert values[0] == values[1]
        assert values[0][0] == pytest.approx(values[0][1])  # each shares two of three words, one rare each

    async def test_a_filter_reaches_past_the_best_unfiltered_matches(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # The database returns the best word matches first (four times the 50 candidates when
        # the search has filters). The one preference, long and so the weakest of 251 matches,
        # is not among them, and the filter rejects all that are: then every match is read.
        await store_many(client, tenant_a, [f"Otter note {i}" for i in range(250)])
        liked = "Ana likes the otter enclosure best of all the places she visits at the city zoo on weekends"
        await store(client, tenant_a, liked, type="preference")

        filtered = await search(client, tenant_a, "otter", weights=WORDS_ONLY, filters={"type": ["preference"]})

        assert contents(filtered) == [liked]
        assert filtered["results"][0]["signals"]["lexical_rank"] == 1
        assert filtered["metrics"]["candidates"]["lexical"] == 1


async def otters(client: httpx.AsyncClient, tenant: Tenant, api: object) -> tuple[Any, Any]:
    """Two otter memories in the tenant's default namespace; the database and that namespace."""
    await store_many(client, tenant, ["Otter pool", "Otter slide"])
    ns = await api.get_namespace(await api.authenticate(tenant.key), "default")  # type: ignore[attr-defined]
    return api._db, ns  # type: ignore[attr-defined]


class TestTermStats:
    def test_idf_falls_as_a_word_gets_common(self) -> None:
        stats = TermStats(n=100, avg_len=8.0, df={"rare": 1, "common": 90, "absent": 0})

        assert stats.idf("absent") > stats.idf("rare") > stats.idf("common") > 0

    async def test_counts_are_cached_per_namespace_and_expire(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: object
    ) -> None:
        db, ns = await otters(client, tenant_a, api)
        cache = TermStatsCache(ttl_s=3600)
        async with db.tenant_tx(tenant_a.id) as tx:
            first = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter", "pool"])
        await store_many(client, tenant_a, ["Otter feeding"])
        async with db.tenant_tx(tenant_a.id) as tx:
            cached = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter", "pool"])
            fresh = await TermStatsCache(ttl_s=0).stats(tx.session, tenant_a.id, ns.id, ["otter", "pool"])

        assert first.df == {"otter": 2, "pool": 1} and first.n == 2
        assert cached == first  # within its lifetime
        assert fresh.df == {"otter": 3, "pool": 1} and fresh.n == 3

    async def test_past_their_lifetime_counts_serve_until_counted_again(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: object
    ) -> None:
        db, ns = await otters(client, tenant_a, api)
        cache = TermStatsCache(ttl_s=0)
        async with db.tenant_tx(tenant_a.id) as tx:
            first = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter"])
        await store_many(client, tenant_a, ["Otter feeding"])
        async with db.tenant_tx(tenant_a.id) as tx:
            stale = cache.stale(tenant_a.id, ns.id)
            served = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter"])
            await cache.refresh(tx.session, tenant_a.id, ns.id)
            counted = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter"])

        assert stale and served == first  # no search waits for the namespace to be counted again
        assert counted.n == 3 and counted.df == {"otter": 3}

    async def test_a_search_past_the_lifetime_has_the_counts_renewed_beside_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: Any, monkeypatch: pytest.MonkeyPatch
    ) -> None:
        db, ns = await otters(client, tenant_a, api)
        monkeypatch.setattr(api, "_term_stats", TermStatsCache(ttl_s=0))
        await search(client, tenant_a, "otter")  # the namespace's first search counts it
        await store_many(client, tenant_a, ["Otter feeding"])

        out = await search(client, tenant_a, "otter")
        for _ in range(100):
            if not api._term_refresh:
                break
            await asyncio.sleep(0.02)
        async with db.tenant_tx(tenant_a.id) as tx:
            counted = await api._term_stats.stats(tx.session, tenant_a.id, ns.id, ["otter"])

        assert len(out["results"]) == 3
        assert api._term_refresh == {}
        assert counted.n == 3 and counted.df == {"otter": 3}

    async def test_a_full_cache_starts_over_without_losing_the_words_asked(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: object
    ) -> None:
        db, ns = await otters(client, tenant_a, api)
        cache = TermStatsCache(ttl_s=3600, lexemes=2)
        async with db.tenant_tx(tenant_a.id) as tx:
            await cache.stats(tx.session, tenant_a.id, ns.id, ["otter", "pool"])
            # Two cached, one new: more than the cache holds, so it is cleared on the way.
            again = await cache.stats(tx.session, tenant_a.id, ns.id, ["otter", "pool", "slide"])

        assert again.df == {"otter": 2, "pool": 1, "slide": 1}
