"""A signed-in person's memories are theirs: two members of one tenant, each signed in through
OAuth with the real MCP client, never see each other's memories by any tool, resource or prompt;
another user's `user_id` is refused; an API key still serves many users by `user_id`."""

from __future__ import annotations

import json
from typing import Any

import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.shared.exceptions import MCPError

from tests.conftest import Tenant
from tests.mcp.conftest import call, fails, mcp_session
from tests.oauth.conftest import Server, User, make_user, obtain_tokens

SECRET_FACT = "My blood type is O negative"


@pytest.fixture
async def ana(oauth_server: Server, tenant_a: Tenant) -> User:
    return await make_user(oauth_server.api, tenant_a)


@pytest.fixture
async def bob(oauth_server: Server, tenant_a: Tenant) -> User:
    return await make_user(oauth_server.api, tenant_a)


async def token_of(http: httpx.AsyncClient, server: Server, user: User) -> str:
    return (await obtain_tokens(http, server, user)).access_token


def contents(found: dict[str, Any]) -> list[str]:
    return [r["content"] for r in found["results"]]


async def read_resource(s: ClientSession, uri: str) -> str:
    out = await s.read_resource(uri)
    return out.contents[0].text  # type: ignore[union-attr]


class TestTwoMembers:
    async def test_neither_sees_the_others_memories(
        self, oauth_server: Server, http: httpx.AsyncClient, ana: User, bob: User
    ) -> None:
        ana_token, bob_token = await token_of(http, oauth_server, ana), await token_of(http, oauth_server, bob)

        async with mcp_session(oauth_server.base, ana_token) as s:
            status = await call(s, "memory_status")
            assert status["acting_as_user"] == str(ana.id)
            # No user_id, as a model writes it: the memory is ana's, at user scope.
            mine = await call(s, "memory_store", content=SECRET_FACT, session_id="checkup")
            assert mine["scope"] == "user" and mine["user_id"] == str(ana.id)
            # Keyed too, so a later fact supersedes it for her alone.
            keyed = await call(s, "memory_store", content="Ana prefers aisle seats", key="seat", type="preference")
            assert keyed["user_id"] == str(ana.id)
            # A session memory she chose keeps her as its owner.
            room = await call(
                s,
                "memory_store",
                content="Ana's locker code hint is the bird",
                scope="session",
                session_id="shared-room",
            )
            assert room["scope"] == "session" and room["user_id"] == str(ana.id)
            # Shared with the team only when she says so.
            shared = await call(s, "memory_store", content="The office wifi is on floor 2", scope="namespace")
            assert shared["scope"] == "namespace" and shared.get("user_id") is None
            said = [{"role": "user", "content": "The nurse said my results are fine"}]
            await call(s, "memory_ingest", session_id="checkup", messages=said)
            assert SECRET_FACT in contents(await call(s, "memory_search", query="blood type"))
            assert SECRET_FACT in (await call(s, "memory_get_context", query="blood type"))["context"]

        async with mcp_session(oauth_server.base, bob_token) as s:
            assert (await call(s, "memory_status"))["acting_as_user"] == str(bob.id)
            found = contents(await call(s, "memory_search", query="blood type", limit=50))
            assert SECRET_FACT not in found
            assert "The office wifi is on floor 2" in contents(await call(s, "memory_search", query="wifi floor"))
            in_session = contents(await call(s, "memory_search", query="locker code", session_id="shared-room"))
            assert "Ana's locker code hint is the bird" not in in_session
            context = (await call(s, "memory_get_context", query="blood type seats", session_id="checkup"))["context"]
            assert SECRET_FACT not in context and "aisle" not in context
            listed = [m["content"] for m in (await call(s, "memory_list", limit=100))["data"]]
            assert listed == ["The office wifi is on floor 2"]

            # By id, her memories do not exist for him: read, history, change or forget.
            for memory_id in (mine["id"], keyed["id"], room["id"]):
                for tool in ("memory_get", "memory_history", "memory_promote", "memory_archive"):
                    assert (await fails(s, tool, memory_id=memory_id)).startswith("memory_not_found"), tool
                assert (await fails(s, "memory_update", memory_id=memory_id, content="x")).startswith(
                    "memory_not_found"
                )
                assert (await fails(s, "memory_forget", memory_id=memory_id, hard=True)).startswith("memory_not_found")

            # Her conversation is not there for him, nor can he add to it (and so take it over).
            assert (await fails(s, "session_messages", session_id="checkup")).startswith("session_not_found")
            assert [x["id"] for x in (await call(s, "session_list"))["data"]] == []
            joined = await fails(s, "memory_ingest", session_id="checkup", messages=said)
            assert joined.startswith("user_mismatch"), joined

            # Nor through the resources.
            with pytest.raises(MCPError):
                await read_resource(s, f"memory://memories/{mine['id']}")
            assert SECRET_FACT not in await read_resource(s, "memory://context/checkup")
            assert "locker" not in await read_resource(s, "memory://context/shared-room")
            # The prompts carry instructions only, never memory content.
            prompt = await s.get_prompt("memory-review", {})
            assert SECRET_FACT not in prompt.messages[0].content.text  # type: ignore[union-attr]

            # Naming her is refused, whatever the tool.
            ana_id = str(ana.id)
            for tool, args in (
                ("memory_search", {"query": "blood type", "user_id": ana_id}),
                ("memory_get_context", {"user_id": ana_id}),
                ("memory_list", {"user_id": ana_id}),
                ("memory_store", {"content": "Ana is allergic to nuts", "user_id": ana_id}),
                ("memory_forget", {"user_id": ana_id}),
                (
                    "memory_ingest",
                    {"session_id": "s", "user_id": ana_id, "messages": [{"role": "user", "content": "hi"}]},
                ),
                ("session_list", {"user_id": ana_id}),
            ):
                text = await fails(s, tool, **args)
                assert text.startswith("user_mismatch") and str(bob.id) in text, (tool, text)
            # Forgetting by session reaches other users' rows too: a signed-in user forgets their own.
            assert (await fails(s, "memory_forget", session_id="checkup", hard=True)).startswith("forbidden")
            # Naming himself is the same as naming nobody.
            assert SECRET_FACT not in contents(await call(s, "memory_search", query="blood", user_id=str(bob.id)))

        # Her memories are all still there, unchanged, for her.
        async with mcp_session(oauth_server.base, ana_token) as s:
            page = await call(s, "session_messages", session_id="checkup")
            assert [m["content"] for m in page["data"]] == [said[0]["content"]]
            got = await call(s, "memory_get", memory_id=mine["id"])
            assert got["content"] == SECRET_FACT and got["state"] == "stable"
            assert {m["content"] for m in (await call(s, "memory_list", limit=100))["data"]} == {
                SECRET_FACT,
                "Ana prefers aisle seats",
                "The office wifi is on floor 2",
            }
            in_room = await call(s, "memory_search", query="locker code", session_id="shared-room")
            assert "Ana's locker code hint is the bird" in contents(in_room)

    async def test_an_api_key_still_serves_many_users_by_user_id(
        self, oauth_server: Server, http: httpx.AsyncClient, ana: User, tenant_a: Tenant
    ) -> None:
        ana_token = await token_of(http, oauth_server, ana)
        async with mcp_session(oauth_server.base, ana_token) as s:
            await call(s, "memory_store", content=SECRET_FACT)
        async with mcp_session(oauth_server.base, tenant_a.key) as s:
            assert (await call(s, "memory_status"))["acting_as_user"] is None
            for user, fact in (("u-1", "U1 likes tea"), ("u-2", "U2 likes coffee")):
                assert (await call(s, "memory_store", content=fact, user_id=user))["user_id"] == user
            assert contents(await call(s, "memory_search", query="likes", user_id="u-1")) == ["U1 likes tea"]
            assert contents(await call(s, "memory_search", query="likes", user_id="u-2")) == ["U2 likes coffee"]
            # The signed-in person is one more user the backend may serve, by her id.
            assert SECRET_FACT in contents(await call(s, "memory_search", query="blood", user_id=str(ana.id)))
            # Without a user_id it stores for nobody in particular, as before.
            assert (await call(s, "memory_store", content="Shared note"))["scope"] == "namespace"


class TestOtherDoors:
    async def test_rest_does_not_take_oauth_access_tokens(
        self, oauth_server: Server, http: httpx.AsyncClient, ana: User, tenant_a: Tenant
    ) -> None:
        # The REST door authenticates API keys only: an access token minted for /mcp is no key
        # there, so no signed-in request can reach memories around the MCP door's binding.
        token = await token_of(http, oauth_server, ana)
        r = await http.get(
            f"{oauth_server.base}/v1/namespaces/{tenant_a.namespace}/memories",
            headers={"Authorization": f"Bearer {token}"},
        )
        assert r.status_code == 401, r.text
        assert json.loads(r.text)["code"] in {"invalid_api_key", "unauthenticated", "invalid_credentials"}
