"""Inferred conversations (issue 30): turns stored with no session id, by the same owner close in
time, are each other's neighbours for the context channel and ``neighbours``; other owners' and
other namespaces' never are, and memories with a session id keep their session."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from tests.conftest import Tenant
from tests.memories.test_router import BATCH, MEMORIES, search
from tests.retrieval.test_context import DISTRACTORS, PICNIC, QUESTION, rank_of

DAY = datetime(2026, 5, 8, 13, 56, tzinfo=UTC)


async def turns(client: httpx.AsyncClient, tenant: Tenant, texts: list[str], **fields: Any) -> list[str]:
    """One batch of turns with no session id, as a client that sends only text writes them."""
    body = {"memories": [{"content": t, "type": "event", **fields} for t in texts]}
    r = await client.post(BATCH, json=body, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return [m["id"] for m in r.json()["memories"]]


async def one_by_one(client: httpx.AsyncClient, tenant: Tenant, texts: list[str], at: list[datetime]) -> list[str]:
    """Turns written one request each, at the given valid times (a live chat client)."""
    out = []
    for text, when in zip(texts, at, strict=True):
        r = await client.post(
            MEMORIES, json={"content": text, "type": "event", "valid_from": when.isoformat()}, headers=tenant.headers
        )
        assert r.status_code == 201, r.text
        out.append(r.json()["id"])
    return out


async def distractors(client: httpx.AsyncClient, tenant: Tenant) -> None:
    # A week earlier: a conversation of their own, not the picnic's.
    await turns(client, tenant, DISTRACTORS, valid_from=(DAY - timedelta(days=7)).isoformat())


async def set_gap(client: httpx.AsyncClient, tenant: Tenant, minutes: float | None) -> None:
    r = await client.patch(
        f"/v1/namespaces/{tenant.namespace}",
        json={"settings": {"search": {"session_gap_minutes": minutes}}},
        headers=tenant.headers,
    )
    assert r.status_code == 200, r.text


def result(out: dict[str, Any], memory_id: str) -> dict[str, Any]:
    return next(r for r in out["results"] if r["memory"]["id"] == memory_id)


def neighbour_ids(out: dict[str, Any], memory_id: str) -> list[str]:
    return [m["id"] for m in result(out, memory_id)["neighbours"]]


class TestInferredConversation:
    async def test_a_text_only_answer_is_found_through_the_turn_before_it(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        question, answer, closing = await turns(client, tenant_a, PICNIC, valid_from=DAY.isoformat())
        await distractors(client, tenant_a)

        inferred = await search(client, tenant_a, QUESTION, neighbours=1)
        await set_gap(client, tenant_a, 0)
        off = await search(client, tenant_a, QUESTION, neighbours=1)

        assert rank_of(inferred, question) == 0
        assert rank_of(inferred, answer) == 1
        assert rank_of(off, answer) > 1
        hit = result(inferred, answer)["signals"]
        assert hit["channels"]["context"]["value"] > 0
        assert hit["neighbourhood"] == "inferred"
        assert neighbour_ids(inferred, answer) == [question, closing]
        # Off: session-less memories have no neighbours at all, as before issue 30.
        assert neighbour_ids(off, answer) == []
        assert result(off, answer)["signals"]["neighbourhood"] is None

    async def test_turns_written_one_by_one_group_until_a_pause_longer_than_the_gap(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        # The default gap is 30 minutes: two turns minutes apart, then the next two hours later.
        at = [DAY, DAY + timedelta(minutes=4), DAY + timedelta(hours=2), DAY + timedelta(hours=2, minutes=1)]
        texts = [
            "Mel: what did your sister bring to the picnic on Sunday?",
            "Caro: a lemon cake, she baked it herself",
            "Mel: did the plumber fix the kitchen tap?",
            "Caro: yes, on Tuesday",
        ]
        first, second, third, fourth = await one_by_one(client, tenant_a, texts, at)

        out = await search(client, tenant_a, "lemon cake plumber kitchen tap", neighbours=2, limit=4)

        assert neighbour_ids(out, second) == [first]
        assert neighbour_ids(out, third) == [fourth]
        await set_gap(client, tenant_a, 180)
        wider = await search(client, tenant_a, "lemon cake plumber kitchen tap", neighbours=2, limit=4)
        assert neighbour_ids(wider, second) == [first, third, fourth]

    async def test_other_owners_turns_never_join(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # The same moment, each turn another owner's: two users' private memories, an agent's, and
        # the namespace's own; none is the others' neighbour.
        when = DAY.isoformat()
        (question,) = await turns(client, tenant_a, [PICNIC[0]], user_id="mel", valid_from=when)
        (answer,) = await turns(client, tenant_a, [PICNIC[1]], user_id="caro", valid_from=when)
        (by_agent,) = await turns(client, tenant_a, [PICNIC[1]], user_id="mel", agent_id="bot", valid_from=when)
        (shared,) = await turns(client, tenant_a, [PICNIC[1]], valid_from=when)
        await distractors(client, tenant_a)

        out = await search(client, tenant_a, QUESTION, neighbours=2, limit=10)

        for memory_id in (question, answer, by_agent, shared):
            assert neighbour_ids(out, memory_id) == []
            assert result(out, memory_id)["signals"]["channels"]["context"]["value"] is None
        # Read as Mel: Caro's turn is not there to be anyone's neighbour.
        mine = await search(client, tenant_a, QUESTION, neighbours=2, filters={"user_id": "mel"})
        assert rank_of(mine, answer) is None

    async def test_a_users_turns_group_with_their_own(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        question, answer, closing = await turns(client, tenant_a, PICNIC, user_id="caro", valid_from=DAY.isoformat())
        await turns(client, tenant_a, PICNIC, user_id="mel", valid_from=DAY.isoformat())
        await distractors(client, tenant_a)

        out = await search(client, tenant_a, QUESTION, neighbours=1, filters={"user_id": "caro"})

        assert rank_of(out, answer) is not None
        assert neighbour_ids(out, answer) == [question, closing]

    async def test_other_namespaces_turns_never_join(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces", json={"name": "elsewhere"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        (question,) = await turns(client, tenant_a, [PICNIC[0]], valid_from=DAY.isoformat())
        body = {"memories": [{"content": PICNIC[1], "type": "event", "valid_from": DAY.isoformat()}]}
        r = await client.post("/v1/namespaces/elsewhere/memories/batch", json=body, headers=tenant_a.headers)
        assert r.status_code == 201, r.text

        out = await search(client, tenant_a, QUESTION, neighbours=2)

        assert neighbour_ids(out, question) == []
        assert "context" not in out["metrics"]["weights"]

    async def test_a_session_keeps_its_own_neighbours(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        when = DAY.isoformat()
        question, answer, closing = await turns(client, tenant_a, PICNIC, session_id="s1", valid_from=when)
        alone = await turns(client, tenant_a, ["Mel: the picnic is at noon", "Caro: great"], valid_from=when)
        await distractors(client, tenant_a)

        out = await search(client, tenant_a, QUESTION, neighbours=2)

        assert rank_of(out, question) == 0 and rank_of(out, answer) == 1
        assert neighbour_ids(out, answer) == [question, closing]
        assert result(out, answer)["signals"]["neighbourhood"] == "session"
        assert neighbour_ids(out, alone[0]) == [alone[1]]
        assert result(out, alone[0])["signals"]["neighbourhood"] == "inferred"
