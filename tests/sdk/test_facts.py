"""The SDK's preferences, facts and contradictions against the real server, sync and async."""

from __future__ import annotations

from typing import Any

from memvault_sdk.types import Contradiction, Fact, Memory
from tests.sdk.conftest import call, items


class TestFactsAndContradictions:
    async def test_fact_preference_mark_search_resolve(self, client: Any) -> None:
        pref = await call(client.memories.add_preference("seating", "window seats", user_id="ana", confidence=0.9))
        assert isinstance(pref, Memory) and (pref.key, pref.confidence) == ("preference:seating", 0.9)
        ana = await call(client.entities.create("Ana", type="person"))
        acme = await call(client.entities.create("Acme", type="organization"))

        fact = await call(client.memories.add_fact("Ana", "works_at", "Acme"))
        assert isinstance(fact, Fact) and fact.memory.key == "fact:ana:works_at"
        assert fact.relation is not None and (fact.relation.source_id, fact.relation.target_id) == (ana.id, acme.id)
        other = await call(client.memories.create("Ana works at Globex"))

        mark = await call(client.contradictions.mark(fact.memory.id, other.id, note="which employer?"))
        assert isinstance(mark, Contradiction) and mark.state == "open"
        found = await call(client.search("where does Ana work?"))
        assert {r.memory.id: r.contradicted_by for r in found.results}[other.id] == [fact.memory.id]
        assert [c.id for c in await items(client.contradictions.list(state="open"))] == [mark.id]

        done = await call(
            client.contradictions.resolve("keep_one", memory_id=other.id, other_id=fact.memory.id, keep_id=other.id)
        )
        assert (done.state, done.kept_id) == ("resolved", other.id)
        assert (await call(client.memories.get(fact.memory.id))).state == "archived"
