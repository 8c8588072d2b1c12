"""Tool arguments are strict and their refusals readable: an argument a tool does not take is
refused by name, never dropped (a dropped `userId` once turned a private fact into a shared one),
and a bad value reads `validation_error: field <name>: <message>`, as on REST."""

from __future__ import annotations

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session


class TestArguments:
    async def test_an_unknown_argument_is_refused_by_name(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            text = await fails(s, "memory_store", content="Ana is vegetarian", userId="ana")
            assert text.startswith("validation_error: field userId: unknown argument"), text
            assert "user_id" in text  # the refusal names what the tool does take
            # Nothing was stored under any scope.
            assert (await call(s, "memory_list"))["data"] == []
            assert (await fails(s, "memory_search", query="x", limt=3)).startswith("validation_error: field limt:")
            # Every tool, however registered, is strict: here one without arguments of its own.
            assert (await fails(s, "memory_status", verbose=True)).startswith("validation_error: field verbose:")

    async def test_the_input_schema_says_so(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            tools = (await s.list_tools()).tools
        assert tools and all(t.input_schema.get("additionalProperties") is False for t in tools)

    async def test_a_bad_value_reads_cleanly(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            text = await fails(s, "memory_search", query="x", limit=500)
            assert text == "validation_error: field limit: Input should be less than or equal to 50", text
            missing = await fails(s, "memory_search")
            assert missing == "validation_error: field query: Field required", missing
            bad_id = await fails(s, "memory_get", memory_id="not-an-id")
            assert bad_id.startswith("validation_error: field memory_id: Input should be a valid UUID"), bad_id
            # A field refused inside the request model reads the same way.
            blank = await fails(s, "memory_store", content="   ")
            assert blank.startswith("validation_error: field content:"), blank
            for refusal in (text, missing, bad_id, blank):
                assert "errors.pydantic.dev" not in refusal and "validation error for" not in refusal

    async def test_a_time_given_as_a_number_is_refused(self, base_url: str, tenant_a: Tenant) -> None:
        # A model asked "since when?" writes "2015": read as seconds since 1970, it was stored as
        # 1970-01-01T00:33:35Z.
        async with mcp_session(base_url, tenant_a.key, "/mcp/extended") as s:
            text = await fails(s, "memory_store", content="Sam moved to Denver", valid_from="2015")
            assert text.startswith("validation_error: field valid_from: must be a date or date-time in ISO 8601"), text
            since = await fails(s, "memory_search", query="Denver", since=1425168000)
            assert since.startswith("validation_error: field since:"), since
            assert (await call(s, "memory_list"))["data"] == []
            stored = await call(s, "memory_store", content="Sam moved to Denver", valid_from="2015-03-01")
            assert stored["valid_from"].startswith("2015-03-01")
