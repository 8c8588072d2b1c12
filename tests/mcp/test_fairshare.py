"""The MCP door under the fair share of the process (plans/fairshare.py), with the real MCP client
over HTTP: a tool call that waited past the bound for its turn is a tool error naming `overloaded`,
and the next one, with a place free, is served."""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from memvault.api import NamespaceAPI
from memvault.plans.fairshare import FairShare
from tests.conftest import make_tenant
from tests.mcp.conftest import call, fails, mcp_session
from tests.plans.test_fairshare import Holder, door_principal, settle


@pytest.fixture
def two_places(api: NamespaceAPI) -> Iterator[FairShare]:
    gates: list[Any] = api._gates
    saved = list(gates)
    gate = FairShare(2, wait_s=0.3)
    gates[gates.index(api._fair_share)] = gate
    try:
        yield gate
    finally:
        gates[:] = saved


async def test_a_tool_call_that_waited_too_long_is_overloaded_and_the_next_is_served(
    base_url: str, api: NamespaceAPI, two_places: FairShare
) -> None:
    t = await make_tenant(api, "mcp-fair")
    holder = Holder(two_places)
    holder.start("a", door_principal(uuid.uuid4()))
    holder.start("c", door_principal(uuid.uuid4()))
    await settle(lambda: len(holder.admitted) == 2)
    async with mcp_session(base_url, t.key) as s:
        text = await fails(s, "memory_search", query="window seats")
        assert text.startswith("overloaded: "), text
        await holder.end("a")
        await call(s, "memory_search", query="window seats")
    await holder.end("c")
