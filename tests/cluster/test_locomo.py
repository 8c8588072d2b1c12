"""Search on Citus answers as on one node (issue 26): one LoCoMo conversation (419 turns) stored in
a tenant of each, and its first 20 questions asked of both. The dataset is read in place from the
checkout's ``../shared/datasets/locomo`` (or ``MEMVAULT_LOCOMO``); without it the test is skipped."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.memories.test_router import BATCH, SEARCH

ROOT = Path(__file__).resolve().parents[2]
QUESTIONS = 20


def conversation() -> dict[str, Any]:
    for path in (
        os.environ.get("MEMVAULT_LOCOMO", ""),
        ROOT.parent / "shared" / "datasets" / "locomo" / "locomo10.json",
        Path("/work/shared/datasets/locomo/locomo10.json"),
    ):
        if path and Path(path).is_file():
            return json.loads(Path(path).read_text())[0]
    pytest.skip("no LoCoMo dataset (../shared/datasets/locomo/locomo10.json or MEMVAULT_LOCOMO)")


def turns(conv: dict[str, Any]) -> list[dict[str, Any]]:
    """Each turn as a memory of its session, in order."""
    c, out, n = conv["conversation"], [], 1
    while f"session_{n}" in c:
        out += [{"content": f"{t['speaker']}: {t['text']}", "session_id": f"session-{n}"} for t in c[f"session_{n}"]]
        n += 1
    return out


async def answers(client: httpx.AsyncClient, tenant: Tenant, question: str) -> list[str]:
    r = await client.post(SEARCH, json={"query": question, "limit": 5}, headers=tenant.headers)
    assert r.status_code == 200, r.text
    return [hit["memory"]["content"] for hit in r.json()["results"]]


# 838 memories embedded and stored, on a cluster of three servers sharing the machine's cores.
@pytest.mark.timeout(900)
async def test_a_locomo_conversation_is_searched_as_on_one_node(
    citus_client: httpx.AsyncClient, citus_a: Tenant, client: httpx.AsyncClient, tenant_a: Tenant
) -> None:
    conv = conversation()
    memories = turns(conv)
    for c, t in ((citus_client, citus_a), (client, tenant_a)):
        r = await c.post(BATCH, json={"memories": memories}, headers=t.headers)
        assert r.status_code == 201, r.text
    differ = []
    for qa in conv["qa"][:QUESTIONS]:
        on_citus, on_one = (
            await answers(citus_client, citus_a, qa["question"]),
            await answers(client, tenant_a, qa["question"]),
        )
        assert on_citus, qa["question"]
        if on_citus != on_one:
            differ.append((qa["question"], on_citus, on_one))
    assert not differ, differ[:3]
