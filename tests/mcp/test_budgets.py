"""What the remote default costs a client's model, measured through the real MCP client at plain
/mcp (tokens counted as characters / 4, as docs/mcp.md does): the tool definitions it sends on
every turn, and a ten-hit search of one-line memories, as text and as structured content. The
budgets are issue 28's; a change that grows past them fails here rather than in someone's bill."""

from __future__ import annotations

import json

from tests.conftest import Tenant
from tests.mcp.conftest import call, mcp_session

TOOLS_BUDGET = 1500
SEARCH_BUDGET = 600
STORE_BUDGET = 80
LISTED_BUDGET = 90  # a memory of a memory_list page

MEMORIES = [
    ("Ana prefers window seats on long flights", "preference", "seat_preference"),
    ("Ana is allergic to peanuts and carries an EpiPen", "fact", "allergy"),
    ("Ana's daughter Lia starts school in Porto in September", "fact", None),
    ("We decided to move the team offsite to the second week of June", "decision", None),
    ("Always answer Ana in Portuguese unless she writes in English", "instruction", "language"),
    ("Ana runs the Lisbon half marathon every March", "event", None),
    ("Book the dentist for Ana before the end of the month", "task", None),
    ("Ana drinks her coffee black, no sugar", "preference", "coffee"),
    ("Ana's manager is Rui Costa, head of platform engineering", "fact", "manager"),
    ("Ana works remotely on Fridays and is offline after 17:00", "fact", "schedule"),
]


def tokens(text: str) -> float:
    return len(text) / 4


class TestBudgets:
    async def test_the_default_tool_definitions_fit(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            tools = (await s.list_tools()).tools
        sent = [
            json.dumps({"name": t.name, "description": t.description, "input_schema": t.input_schema}) for t in tools
        ]
        total = sum(tokens(d) for d in sent)
        assert total <= TOOLS_BUDGET, f"{len(tools)} tools cost {total:.0f} tokens > {TOOLS_BUDGET}"
        # The core is still what a model needs to keep and use memory.
        assert {"memory_store", "memory_search", "memory_get_context", "memory_forget"} <= {t.name for t in tools}

    async def test_a_ten_hit_search_fits(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            for content, type_, key in MEMORIES:
                await call(s, "memory_store", content=content, type=type_, key=key, user_id="ana")
            result = await s.call_tool("memory_search", {"query": "what do we know about Ana?", "user_id": "ana"})
        assert not result.is_error and result.structured_content is not None
        assert len(result.structured_content["results"]) == 10
        text = "".join(block.text for block in result.content)  # type: ignore[union-attr]
        structured = json.dumps(result.structured_content)
        assert tokens(text) <= SEARCH_BUDGET, f"text content: {tokens(text):.0f} tokens > {SEARCH_BUDGET}"
        assert tokens(structured) <= SEARCH_BUDGET, f"structured: {tokens(structured):.0f} tokens > {SEARCH_BUDGET}"
        # Lean, not empty: every hit still carries what a model acts on.
        for hit in result.structured_content["results"]:
            assert {"id", "content", "type", "date", "score"} <= hit.keys()

    async def test_a_store_answers_in_few_tokens(self, base_url: str, tenant_a: Tenant) -> None:
        # The most frequent call: it answered with all 24 fields of the memory, about 220 tokens
        # of pretty-printed text and 200 more as structured content.
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            first = await call(s, "memory_store", content=MEMORIES[0][0], type="preference", key="seat", user_id="ana")
            result = await s.call_tool(
                "memory_store",
                {"content": "Ana now prefers aisle seats", "type": "preference", "key": "seat", "user_id": "ana"},
            )
        assert not result.is_error and result.structured_content is not None
        text = "".join(block.text for block in result.content)  # type: ignore[union-attr]
        structured = json.dumps(result.structured_content)
        assert tokens(text) <= STORE_BUDGET, f"text content: {tokens(text):.0f} tokens > {STORE_BUDGET}"
        assert tokens(structured) <= STORE_BUDGET, f"structured: {tokens(structured):.0f} tokens > {STORE_BUDGET}"
        # What a model refers to again, and what the write did: the version it replaced.
        assert result.structured_content["supersedes"] == first["id"]
        assert {"id", "content", "type", "scope", "key", "user_id"} <= result.structured_content.keys()

    async def test_a_page_of_memories_costs_few_tokens_a_memory(self, base_url: str, tenant_a: Tenant) -> None:
        # A page of 20 answered with every field of every memory: about 230 tokens a memory as
        # text and as much again as structured content, 4,600 to browse one page.
        async with mcp_session(base_url, tenant_a.key) as s:
            for content, type_, key in MEMORIES:
                await call(s, "memory_store", content=content, type=type_, key=key, user_id="ana")
            result = await s.call_tool("memory_list", {"user_id": "ana"})
        assert not result.is_error and result.structured_content is not None
        listed = result.structured_content["data"]
        assert [m["content"] for m in listed] == [content for content, _, _ in reversed(MEMORIES)]
        text = "".join(block.text for block in result.content)  # type: ignore[union-attr]
        structured = json.dumps(result.structured_content)
        for form, sent in (("text content", text), ("structured", structured)):
            each = tokens(sent) / len(listed)
            assert each <= LISTED_BUDGET, f"{form}: {each:.0f} tokens a memory > {LISTED_BUDGET}"
        # What a review acts on: which memory, what it says, whose, how sure, and since when.
        for memory in listed:
            assert {"id", "content", "type", "scope", "state", "confidence", "user_id", "recorded_at"} <= memory.keys()
        assert {m["key"] for m in listed if "key" in m} == {key for _, _, key in MEMORIES if key}

    async def test_every_other_answer_is_one_line(self, base_url: str, tenant_a: Tenant) -> None:
        # memory_get, memory_history, memory_forget and the rest answered with the SDK's
        # rendering: indented JSON, a third more tokens than the same on one line.
        async with mcp_session(base_url, tenant_a.key) as s:
            stored = await call(s, "memory_store", content="Ana drinks her coffee black", user_id="ana")
            answers = [
                await s.call_tool("memory_get", {"memory_id": stored["id"]}),
                await s.call_tool("memory_history", {"memory_id": stored["id"]}),
                await s.call_tool("memory_status", {}),
                await s.call_tool("memory_forget", {"memory_id": stored["id"]}),
            ]
        for result in answers:
            assert not result.is_error and result.structured_content is not None
            (block,) = result.content
            text = block.text  # type: ignore[union-attr]
            assert "\n" not in text and json.loads(text) == result.structured_content
        got = answers[0].structured_content
        assert got["content"] == "Ana drinks her coffee black" and got["key"] is None  # every field, as before
        assert json.loads(answers[2].content[0].text)["rules"] is None  # type: ignore[union-attr]

    async def test_context_is_the_block_alone(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key, "/mcp") as s:
            for content, type_, key in MEMORIES:
                await call(s, "memory_store", content=content, type=type_, key=key, user_id="ana")
            result = await s.call_tool("memory_get_context", {"user_id": "ana", "token_budget": 400})
        assert not result.is_error and result.structured_content is not None
        text = "".join(block.text for block in result.content)  # type: ignore[union-attr]
        # What the model reads is the block (within its budget), not the block again inside JSON.
        assert text.startswith(result.structured_content["context"])
        assert tokens(text) <= 400 + 25
