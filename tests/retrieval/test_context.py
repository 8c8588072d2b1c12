"""The context channel: a memory's session neighbours matching the query count for it. An answer
that shares no word with the question asked later is found through the turn before it, the
neighbours brought in obey the search's own visibility rules, and they come from the caller's
tenant only. Session order holds for a conversation written in one batch."""

from __future__ import annotations

from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.retrieval.hybrid import hybrid_search
from memvault.retrieval.plan import SearchPlan
from tests.conftest import Tenant
from tests.memories.test_router import BATCH, MEMORIES, search, store, store_many

PICNIC = [
    "Mel: what did your sister bring to the picnic on Sunday?",
    "Caro: a lemon cake, she baked it herself",
    "Mel: sounds lovely, see you at work",
]
DISTRACTORS = [
    "Caro: my sister moved to Porto last year",
    "The picnic blanket is in the car boot",
    "Sunday brunch is at the corner cafe",
]
QUESTION = "What did Caro's sister bring to the picnic?"


async def conversation(client: httpx.AsyncClient, tenant: Tenant, session: str, texts: list[str]) -> list[str]:
    """One batch, as a conversation importer writes it: the turns share their write time."""
    body = {"memories": [{"content": t, "type": "event", "session_id": session} for t in texts]}
    r = await client.post(BATCH, json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return [m["id"] for m in r.json()["memories"]]


def rank_of(out: dict[str, Any], memory_id: str) -> int | None:
    found = [r["memory"]["id"] for r in out["results"]]
    return found.index(memory_id) if memory_id in found else None


class TestContextChannel:
    async def test_the_answer_is_found_through_the_question_before_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        question, answer, _ = await conversation(client, tenant_a, "s1", PICNIC)
        await store_many(client, tenant_a, DISTRACTORS)

        with_context = await search(client, tenant_a, QUESTION)
        without = await search(client, tenant_a, QUESTION, weights={"context": 0})

        assert rank_of(with_context, question) == 0
        assert rank_of(with_context, answer) == 1
        assert rank_of(without, answer) > 1
        hit = with_context["results"][1]["signals"]["channels"]["context"]
        assert hit["value"] > 0 and hit["rank"] is not None
        assert with_context["metrics"]["weights"]["context"] == 1.0
        assert "context" not in without["metrics"]["weights"]
        assert all("context" not in r["signals"]["channels"] for r in without["results"])

    async def test_at_a_tie_the_match_goes_before_the_neighbour_it_lends_to(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # Words alone, rank fusion: each question is first on words, each answer first on
        # context (its question's match), and the priors cannot tell them apart.
        exchanges = [(f"Mel: what did sister {i} bring to the picnic?", f"Caro: cake number {i}") for i in range(4)]
        questions = [(await conversation(client, tenant_a, f"s{i}", list(pair)))[0] for i, pair in enumerate(exchanges)]

        out = await search(client, tenant_a, "picnic", fusion="rrf", weights={"dense": 0})

        assert len(out["results"]) == 8
        assert {r["memory"]["id"] for r in out["results"][:4]} == set(questions)
        assert len({r["score"] for r in out["results"]}) == 1  # a tie, broken by the memory's own match

    async def test_a_forgotten_neighbour_no_longer_counts(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        question, answer, _ = await conversation(client, tenant_a, "s1", PICNIC)
        await store_many(client, tenant_a, DISTRACTORS)
        r = await client.delete(f"{MEMORIES}/{question}", headers=tenant_a.headers)
        assert r.status_code == 204, r.text

        out = await search(client, tenant_a, QUESTION)

        assert rank_of(out, question) is None
        assert rank_of(out, answer) > 0
        context = {r["memory"]["id"]: r["signals"]["channels"]["context"] for r in out["results"]}
        # The answer's one visible neighbour is the closing turn, which matches little.
        assert context[answer]["value"] < 0.5

    async def test_a_neighbour_that_no_channel_found_is_brought_in(
        self, client: httpx.AsyncClient, tenant_a: Tenant, api: NamespaceAPI
    ) -> None:
        question, answer, _ = await conversation(client, tenant_a, "s1", PICNIC)
        await store_many(client, tenant_a, DISTRACTORS)
        ns = await api.get_namespace(await api.authenticate(tenant_a.key), "default")

        # One candidate per channel, words only: the question turn, nothing else.
        async with api._db.tenant_tx(tenant_a.id) as tx:  # type: ignore[attr-defined]
            plan = SearchPlan(
                tenant_id=tenant_a.id,
                namespace_id=ns.id,
                query="sister picnic Sunday",
                query_vector=None,
                model_id="none",
                filters=None,
                limit=10,
                candidates=1,
                weights={"context": 0.5},
                fusion="weighted",
            )
            out = await hybrid_search(tx.session, plan)

        assert [str(h.memory.id) for h in out.hits] == [question, answer]
        assert out.candidates == {"dense": 0, "lexical": 1, "context": 1}
        brought = out.hits[1]
        assert brought.score == pytest.approx(0.5 / 1.5, abs=1e-6)
        assert brought.lexical_rank is None and brought.dense_rank is None
        assert brought.channels["context"] == (1, 1.0)  # its neighbour is the best match there is

    async def test_no_context_without_neighbours(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store_many(client, tenant_a, DISTRACTORS)

        out = await search(client, tenant_a, QUESTION)

        assert "context" not in out["metrics"]["weights"]
        assert "context" not in out["metrics"]["candidates"]
        assert out["results"][0]["score"] > 0.99  # the best in every channel that had a say


class TestSessionOrder:
    async def test_a_batch_keeps_its_order(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        turns = [f"Turn {n}: the quibbleflax story goes on" for n in range(12)]
        ids = await conversation(client, tenant_a, "s1", turns)

        out = await search(client, tenant_a, "Turn 6 quibbleflax", neighbours=2, limit=12)

        by_id = {r["memory"]["id"]: r for r in out["results"]}
        assert [m["id"] for m in by_id[ids[6]]["neighbours"]] == [ids[4], ids[5], ids[7], ids[8]]
        assert [m["id"] for m in by_id[ids[0]]["neighbours"]] == [ids[1], ids[2]]


class TestIsolation:
    async def test_another_tenants_turns_are_not_neighbours(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        # The same session id in both tenants, written in turn: by session order alone, tenant A's
        # question would sit right before tenant B's answer.
        await conversation(client, tenant_a, "s1", PICNIC[:1])
        (answer,) = await conversation(client, tenant_b, "s1", PICNIC[1:2])
        await store(client, tenant_b, "Sunday brunch is at the corner cafe")

        out = await search(client, tenant_b, QUESTION, neighbours=3)

        assert all("picnic" not in r["memory"]["content"] for r in out["results"])
        assert "context" not in out["metrics"]["candidates"]
        assert all("context" not in r["signals"]["channels"] for r in out["results"])
        assert next(r for r in out["results"] if r["memory"]["id"] == answer)["neighbours"] == []
