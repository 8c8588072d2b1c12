"""Shared by the job tests: an app running jobs in-process, and waiting for a job to end."""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Any

import httpx

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryFilters, MemoryOut, MemoryState
from memvault.principal import Principal

# A guard against hanging, not a speed assertion.
JOB_DEADLINE_S = 120


async def wait_for_job(
    client: httpx.AsyncClient, headers: dict[str, str], job_id: str, *, until: tuple[str, ...] = ("succeeded", "failed")
) -> dict[str, Any]:
    deadline = time.monotonic() + JOB_DEADLINE_S
    while True:
        r = await client.get(f"/v1/jobs/{job_id}", headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        if body["status"] in until:
            return body
        assert time.monotonic() < deadline, f"job still {body['status']}: {body}"
        await asyncio.sleep(0.1)


async def all_memories(api: NamespaceAPI, p: Principal, ns: str = "default") -> list[MemoryOut]:
    """Every memory of the namespace, any state, current versions."""
    out: list[MemoryOut] = []
    cursor = None
    states = [MemoryState.tentative, MemoryState.stable, MemoryState.archived]
    while True:
        page = await api.list_memories(p, ns, MemoryFilters(state=states), limit=200, cursor=cursor)
        out += page.data
        cursor = page.next_cursor
        if cursor is None:
            return out


def new_id() -> str:
    return uuid.uuid4().hex[:8]
