"""The best hit's conversation (retrieval/window.py): its neighbours among the hits rise a little,
the best hit stays first, nothing outside its conversation moves, and a weight of 0 turns it off."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx

from memvault.memories.models import Memory
from memvault.retrieval.hits import Hit
from memvault.retrieval.window import WIDTH, lift
from tests.conftest import Tenant

TENANT, NAMESPACE = uuid.uuid4(), uuid.uuid4()
T0 = datetime(2026, 5, 1, 12, tzinfo=UTC)
GAP_S = 30 * 60.0


def hit(score: float, seq: int, **fields: Any) -> Hit:
    values = {
        "tenant_id": TENANT,
        "namespace_id": NAMESPACE,
        "scope": "namespace",
        "user_id": None,
        "agent_id": None,
        "session_id": "s1",
        "type": "event",
        "valid_from": None,
        "created_at": T0 + timedelta(seconds=seq),
        "content": f"turn {seq}",
        **fields,
    }
    return Hit(Memory(id=uuid.uuid4(), seq=seq, **values), score, None, None, None, None, {})


def order(hits: list[Hit]) -> list[int]:
    return [h.memory.seq for h in hits]


def test_the_best_hits_neighbours_rise_and_it_stays_first() -> None:
    best, far, near, other = hit(0.9, 10), hit(0.85, 30, session_id="s3"), hit(0.8, 11), hit(0.84, 12, session_id="s2")
    out = lift([best, far, other, near], 0.1, GAP_S)
    assert order(out) == [10, 11, 30, 12]
    # One turn away: 0.1 x (1 - 1/6).
    assert near.score == 0.883333 and near.channels["window"] == (None, 0.083333)
    assert "window" not in far.channels and "window" not in other.channels


def test_distance_is_counted_among_the_hits_of_the_conversation() -> None:
    best = hit(0.9, 100)
    # Hits of its session at 1..WIDTH+1 places from it, whatever their seq gaps.
    after = [hit(0.5, 100 + 7 * i) for i in range(1, WIDTH + 2)]
    lift([best, *after], 0.1, GAP_S)
    gains = [h.channels.get("window", (None, 0.0))[1] for h in after]
    assert gains[:WIDTH] == sorted(gains[:WIDTH], reverse=True) and all(g > 0 for g in gains[:WIDTH])
    assert gains[WIDTH] == 0.0  # the sixth is beyond the window


def test_a_neighbour_never_passes_the_best_hit() -> None:
    best, near = hit(0.9, 1), hit(0.89, 2)
    out = lift([best, near], 10.0, GAP_S)
    assert out[0] is best and near.score < best.score


def test_other_owners_and_facts_stay_where_they_were() -> None:
    best = hit(0.9, 1, session_id=None)
    others = [
        hit(0.8, 2, session_id=None, user_id="someone-else"),
        hit(0.8, 3, session_id=None, type="fact"),
        hit(0.8, 4, session_id=None, agent_id="another-agent"),
        hit(0.8, 5, session_id=None, namespace_id=uuid.uuid4()),
        hit(0.8, 6, session_id=None, created_at=T0 + timedelta(days=2)),
    ]
    lift([best, *others], 0.1, GAP_S)
    assert all("window" not in h.channels for h in others)
    # The same owner's event a minute later is of its inferred conversation.
    same = hit(0.8, 7, session_id=None, created_at=T0 + timedelta(minutes=1))
    lift([best, same], 0.1, GAP_S)
    assert "window" in same.channels
    # Without a session gap there is no inferred conversation.
    alone = hit(0.8, 8, session_id=None, created_at=T0 + timedelta(minutes=1))
    lift([best, alone], 0.1, 0.0)
    assert "window" not in alone.channels


def test_a_weight_of_zero_changes_nothing() -> None:
    hits = [hit(0.9, 1), hit(0.5, 30), hit(0.4, 2)]
    assert lift(list(hits), 0.0, GAP_S) == hits
    assert all(not h.channels for h in hits)


SEARCH = "/v1/namespaces/default/search"


async def test_a_search_lifts_the_best_hits_turns_and_says_so(client: httpx.AsyncClient, tenant_a: Tenant) -> None:
    turns = [
        "Did you plant the tomatoes in the garden this spring?",
        "Yes, and the basil next to them came up first.",
        "We also put a small pond in the back corner.",
    ]
    for i, text in enumerate(turns):
        body = {"content": text, "type": "event", "session_id": "garden-talk", "valid_from": f"2026-05-01T12:0{i}:00Z"}
        r = await client.post("/v1/namespaces/default/memories", json=body, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
    for text in ["The tomatoes at the market were expensive.", "Basil pesto needs pine nuts."]:
        r = await client.post("/v1/namespaces/default/memories", json={"content": text}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text

    query = {"query": "tomatoes planted in the garden", "limit": 5}
    lifted = (await client.post(SEARCH, json=query, headers=tenant_a.headers)).json()
    plain = (await client.post(SEARCH, json={**query, "weights": {"window": 0}}, headers=tenant_a.headers)).json()

    first = lifted["results"][0]
    assert first["memory"]["content"] == turns[0] == plain["results"][0]["memory"]["content"]
    risen = [r for r in lifted["results"] if "window" in r["signals"]["channels"]]
    assert risen and all(r["memory"]["session_id"] == "garden-talk" for r in risen)
    assert all(r["score"] < first["score"] for r in risen)
    assert lifted["metrics"]["weights"]["window"] == 0.1
    assert all("window" not in r["signals"]["channels"] for r in plain["results"])
    assert "window" not in plain["metrics"]["weights"]
