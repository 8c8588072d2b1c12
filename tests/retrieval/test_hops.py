"""The entity hop (``SearchIn.hops``, retrieval/hops.py) as a client sees it: a question's second
piece of evidence, which shares no words with the question but an entity with its first, is found
through that entity; the hop is off unless asked for; it reads under the search's own rules (no
other tenant's memories, no other user's private ones); hub entities are no bridge."""

from __future__ import annotations

from typing import Any

import httpx

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryFilters
from memvault.principal import Principal
from memvault.retrieval.schemas import SearchIn
from tests.conftest import Tenant
from tests.memories.test_router import BATCH, search, store
from tests.retrieval.test_search import entity

QUESTION = "In which city is the company Ana works for?"
# Each outranks the headquarters memory on the question's words or meaning (checked by the
# first assertion of each test): without the hop it stays below the cut.
DISTRACTORS = [
    "Ana lives in a small flat in Madrid",
    "Ana thinks the city is too noisy at night",
    "Ben's company moved its office to Berlin last year",
    "Mia works for a bakery in Porto",
]
LIMIT = 4


def ids(out: dict[str, Any]) -> list[str]:
    return [r["memory"]["id"] for r in out["results"]]


async def company_story(client: httpx.AsyncClient, tenant: Tenant, **hq_fields: Any) -> tuple[str, str, str]:
    """Ana works at Acme; Acme's headquarters are in Lyon (stored with ``hq_fields``); distractors.
    Returns (the works-at memory's id, the headquarters memory's id, Acme's id)."""
    ana = await entity(client, tenant, "Ana")
    acme = await entity(client, tenant, "Acme", type="organization")
    works = await store(client, tenant, "Ana works as an engineer at Acme", entity_ids=[ana, acme])
    hq = await store(
        client, tenant, "Acme's headquarters are on the banks of the Rhone in Lyon", entity_ids=[acme], **hq_fields
    )
    for text in DISTRACTORS:
        await store(client, tenant, text, entity_ids=[ana] if text.startswith("Ana") else [])
    return works["id"], hq["id"], acme


class TestEntityHop:
    async def test_the_second_evidence_is_reached_through_the_shared_entity(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        works, hq, acme = await company_story(client, tenant_a)

        plain = await search(client, tenant_a, QUESTION, limit=LIMIT)
        assert works in ids(plain)
        assert hq not in ids(plain), "the test needs the headquarters below the cut without the hop"

        out = await search(client, tenant_a, QUESTION, limit=LIMIT, hops=True)

        found = ids(out)
        assert len(found) == LIMIT
        assert hq in found
        # Below the hit that led to it, and explained.
        assert found.index(works) < found.index(hq)
        hopped = out["results"][found.index(hq)]
        assert hopped["signals"]["hop"] == {"from_memory": works, "entity_id": acme, "entity": "Acme"}
        assert hopped["signals"]["dense_rank"] is None and hopped["signals"]["lexical_rank"] is None
        assert hopped["score"] < out["results"][found.index(works)]["score"]
        assert out["metrics"]["stages"]["hops"] == "ran"
        assert "hops" in out["metrics"]["timings_ms"]
        # First-stage hits carry no hop signal.
        assert "hop" not in out["results"][found.index(works)]["signals"]

    async def test_off_unless_asked(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        _, hq, _ = await company_story(client, tenant_a)

        for body in ({}, {"hops": False}):
            out = await search(client, tenant_a, QUESTION, limit=LIMIT, **body)

            assert hq not in ids(out)
            assert "hops" not in out["metrics"]["stages"]
            assert "hops" not in out["metrics"]["timings_ms"]
            assert all("hop" not in r["signals"] for r in out["results"])

    async def test_the_query_s_own_entities_and_hubs_are_no_bridge(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # Ana is named by the question (the graph channel ranks her memories already) and Acme
        # is linked to more memories than a bridge may have: nothing to hop through.
        works, hq, acme = await company_story(client, tenant_a)
        r = await client.post(
            BATCH,
            json={"memories": [{"content": f"Acme newsletter number {i}", "entity_ids": [acme]} for i in range(50)]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text

        out = await search(client, tenant_a, QUESTION, limit=LIMIT, hops=True)

        assert works in ids(out)
        assert hq not in ids(out)
        assert out["metrics"]["stages"]["hops"] == "skipped"

    async def test_a_bridge_is_judged_by_its_own_links_not_the_tenants(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # Many links in the tenant, all to another entity: Acme (two links) is still a bridge.
        works, hq, _ = await company_story(client, tenant_a)
        other = await entity(client, tenant_a, "Globex", type="organization")
        r = await client.post(
            BATCH,
            json={"memories": [{"content": f"Globex memo number {i}", "entity_ids": [other]} for i in range(60)]},
            headers=tenant_a.headers,
        )
        assert r.status_code == 201, r.text

        out = await search(client, tenant_a, QUESTION, limit=LIMIT, hops=True)

        assert works in ids(out)
        assert hq in ids(out)
        assert out["metrics"]["stages"]["hops"] == "ran"

    async def test_another_tenants_memories_are_never_reached(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        # Tenant B holds the whole story; tenant A only its first half, under the same names.
        _, theirs, _ = await company_story(client, tenant_b)
        ana = await entity(client, tenant_a, "Ana")
        acme = await entity(client, tenant_a, "Acme", type="organization")
        works = await store(client, tenant_a, "Ana works as an engineer at Acme", entity_ids=[ana, acme])

        out = await search(client, tenant_a, QUESTION, limit=LIMIT, hops=True)

        assert ids(out) == [works["id"]]
        assert theirs not in ids(out)
        assert out["metrics"]["stages"]["hops"] == "skipped"

    async def test_another_members_private_memories_are_never_reached(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        # The headquarters memory is Bob's own (user scope), linked to the shared entity Acme.
        works, hq, _ = await company_story(client, tenant_a, scope="user", user_id="bob")
        ns = tenant_a.namespace

        def member(user: str) -> Principal:
            return Principal(tenant_id=tenant_a.id, scopes=frozenset({"read"}), subject=f"user:{user}", user_id=user)

        def request(**fields: Any) -> SearchIn:
            return SearchIn(query=QUESTION, limit=LIMIT, hops=True, **fields)

        # Signed in as Alice: the search reads as her (acting.py), and so does the hop.
        alice = await api.search(member("alice"), ns, request())
        assert works in [str(r.memory.id) for r in alice.results]
        assert hq not in [str(r.memory.id) for r in alice.results]
        assert alice.metrics.stages["hops"] == "skipped"
        # An API key reading as Alice: the same.
        as_alice = await api.search(tenant_a.principal, ns, request(filters=MemoryFilters(user_id="alice")))
        assert hq not in [str(r.memory.id) for r in as_alice.results]
        # Bob reaches his own.
        bob = await api.search(member("bob"), ns, request())
        reached = [r for r in bob.results if str(r.memory.id) == hq]
        assert reached and reached[0].signals.hop is not None
        assert str(reached[0].signals.hop.from_memory) == works
