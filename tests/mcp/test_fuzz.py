"""Every MCP tool, called through the real MCP client with arguments generated from the tool's own
input schema and with arguments that do not fit it: each call answers a
result or a tool error that reads `<code>: <detail>` with one of our stable codes, never an
internal error, a traceback or a JSON-RPC failure. The REST door has the same guarantee from
schemathesis (tests/gateway/test_schemathesis.py); this is the MCP door's.

The arguments are drawn by ``fitting``, Hypothesis strategies for the part of JSON Schema our tools'
schemas use (types, enums, bounds, lengths, uuid and date-time formats, one pattern); the library
for this, hypothesis-jsonschema (last release 2024), fails on the Hypothesis that schemathesis
needs (`'many' object has no attribute 'more'`).

Bounded and repeatable: derandomised generation and no example database, a few examples per tool
and kind. The tenant is a throwaway one seeded with a memory, an entity and a session's messages,
and generated ids are drawn from those as well as at random, so by-id tools reach real rows; the
destructive tools (forget, delete) run last, on a tenant of their own.
"""

from __future__ import annotations

import asyncio
from dataclasses import dataclass
from datetime import UTC
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from memvault.api import NamespaceAPI
from memvault.errors import MemvaultError
from tests.conftest import Tenant, make_tenant
from tests.mcp.conftest import call, mcp_session

pytestmark = pytest.mark.slow

EXAMPLES = 12
JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=6,
)


def stable_codes() -> set[str]:
    """Every code our errors carry (MemvaultError's subclasses, loaded with the app)."""
    codes, todo = set(), [MemvaultError]
    while todo:
        cls = todo.pop()
        codes.add(cls.code)
        todo.extend(cls.__subclasses__())
    return codes - {"internal_error"}


CODES = stable_codes()


def check(tool: str, args: dict[str, Any], result: Any) -> None:
    if not result.is_error:
        return
    text = result.content[0].text.removeprefix(f"Error executing tool {tool}: ")
    code = text.split(":", 1)[0]
    assert code in CODES and "Traceback" not in text, f"{tool}({args!r}) -> {text}"


@dataclass
class Fuzzed:
    tenant: Tenant
    ids: list[str]
    # name -> input schema; the destructive tools (memory_forget) last, so the others meet the seed.
    schemas: dict[str, dict[str, Any]]


async def seeded(api: NamespaceAPI, base_url: str) -> Fuzzed:
    """A tenant with two memories, an entity and a trace (ids that generated arguments may name)
    and the tools as its client lists them."""
    t = await make_tenant(api, "fuzz")
    async with mcp_session(base_url, t.key) as s:
        memory = await call(s, "memory_store", content="Ana prefers window seats", key="seat", user_id="ana")
        other = await call(s, "memory_store", content="Ana prefers aisle seats now", user_id="ana")
        entity = await call(s, "entity_add", name="Ana", type="person")
        trace = await call(s, "trace_start", task="Book Ana a seat", session_id="s1")
        listed = (await s.list_tools()).tools
    ordered = sorted(listed, key=lambda tool: bool(tool.annotations and tool.annotations.destructive_hint))
    ids = [memory["id"], other["id"], entity["id"], trace["id"]]
    return Fuzzed(t, ids, {tool.name: tool.input_schema for tool in ordered})


def fitting(schema: dict[str, Any]) -> st.SearchStrategy[Any]:
    """Values that fit ``schema`` (the subset of JSON Schema the tools' input schemas use)."""
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    kind = schema.get("type")
    if kind == "string":
        if schema.get("format") == "uuid":
            return st.uuids().map(str)
        if schema.get("format") == "date-time":
            return st.datetimes(timezones=st.just(UTC)).map(lambda d: d.isoformat())
        if "pattern" in schema:
            return st.from_regex(schema["pattern"], fullmatch=True)
        low, high = schema.get("minLength", 0), schema.get("maxLength", 40)
        # Words as a person writes them half the time (deeper paths), any text the other half.
        words = st.from_regex(r"[A-Z][a-z]{1,8}( [a-z]{1,8}){0,4}", fullmatch=True).filter(
            lambda w: low <= len(w) <= high
        )
        return words | st.text(min_size=low, max_size=high)
    if kind == "integer":
        return st.integers(schema.get("minimum", -(10**6)), schema.get("maximum", 10**6))
    if kind == "number":
        return st.floats(schema.get("minimum", -1e6), schema.get("maximum", 1e6), allow_nan=False)
    if kind == "boolean":
        return st.booleans()
    if kind == "array":
        return st.lists(
            fitting(schema.get("items", {})), min_size=schema.get("minItems", 0), max_size=schema.get("maxItems", 4)
        )
    if kind == "object" and "properties" in schema:
        required = set(schema.get("required", []))
        props = schema["properties"]
        return st.fixed_dictionaries(
            {k: fitting(v) for k, v in props.items() if k in required},
            optional={k: fitting(v) for k, v in props.items() if k not in required},
        )
    if kind == "object":
        return st.dictionaries(st.text(max_size=8), JSON, max_size=3)
    return JSON


@st.composite
def arguments(draw: st.DrawFn, schema: dict[str, Any], namespace: str, ids: list[str]) -> dict[str, Any]:
    """Arguments that fit ``schema``; a uuid field names a seeded row or a random one, and a
    namespace field the tenant's own or a random name."""
    args: dict[str, Any] = draw(fitting(schema))
    props = schema.get("properties", {})
    for name in args:
        if props.get(name, {}).get("format") == "uuid":
            args[name] = draw(st.sampled_from(ids) | st.uuids().map(str))
        elif name == "namespace":
            args[name] = draw(st.just(namespace) | st.text(min_size=1, max_size=12))
    return args


def misfits(schema: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
    """Arguments that do not fit: the tool's own argument names (and others) with any JSON."""
    names = sorted(schema.get("properties", {})) or ["x"]
    return st.dictionaries(st.sampled_from(names) | st.text(max_size=10), JSON, max_size=4)


def examples_of(strategy: st.SearchStrategy[dict[str, Any]]) -> list[dict[str, Any]]:
    """Up to EXAMPLES draws of ``strategy``, the same on every run (derandomised, no database)."""
    drawn: list[dict[str, Any]] = []

    @settings(
        max_examples=EXAMPLES, derandomize=True, database=None, deadline=None, suppress_health_check=list(HealthCheck)
    )
    @given(strategy)
    def collect(args: dict[str, Any]) -> None:
        drawn.append(args)

    collect()
    return drawn


async def calls(base_url: str, key: str, tool: str, examples: list[dict[str, Any]]) -> None:
    async with mcp_session(base_url, key) as s:
        for args in examples:
            async with asyncio.timeout(60):
                result = await s.call_tool(tool, args)
            check(tool, args, result)


@pytest.fixture(scope="module")
async def fuzzed(api: NamespaceAPI, base_url: str) -> Fuzzed:
    return await seeded(api, base_url)


class TestEveryTool:
    async def test_arguments_that_fit_answer_a_result_or_a_stable_error(self, fuzzed: Fuzzed, base_url: str) -> None:
        for tool, schema in fuzzed.schemas.items():
            examples = examples_of(arguments(schema, fuzzed.tenant.namespace, fuzzed.ids))
            await calls(base_url, fuzzed.tenant.key, tool, examples)

    async def test_arguments_that_do_not_fit_answer_a_stable_error(self, fuzzed: Fuzzed, base_url: str) -> None:
        for tool, schema in fuzzed.schemas.items():
            await calls(base_url, fuzzed.tenant.key, tool, examples_of(misfits(schema)))
