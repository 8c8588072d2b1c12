"""The LLM extractor against a stub OpenAI-compatible server on 127.0.0.1 (tests/llm_stub.py: the
provider is outside this machine). Good answers become memories; a malformed, slow or
failing answer falls back to the rule-based extractor. Jobs run through the real runner, on a
thread, as in-process mode does."""

from __future__ import annotations

import asyncio
import json
import time
from collections.abc import Iterator
from typing import Any

import pytest
from pydantic import SecretStr

from memvault.api import NamespaceAPI
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.events.schemas import EventsIn
from memvault.jobs.runner import JobContext, LoopBoundEmbedder, execute
from tests.conftest import Tenant
from tests.jobs.helpers import all_memories, new_id
from tests.jobs.test_tasks import events_body
from tests.llm_stub import ChatStub, completion

GOOD = {
    "memories": [
        {
            "content": "The user went to the dentist on 2024-05-07.",
            "type": "event",
            "source": [0],
            "valid_from": "2024-05-07",
            "entities": [],
            "importance": 0.4,
            "key": None,
        },
        {
            "content": "The user prefers window seats on long flights.",
            "type": "preference",
            "source": [1],
            "valid_from": None,
            "entities": [{"name": "Lisbon", "type": "location"}],
            "importance": 0.8,
            "key": "seat_preference",
        },
        {
            "content": "The assistant is helpful.",
            "type": "fact",
            "source": [2],
            "valid_from": None,
            "entities": [],
            "importance": 0.1,
            "key": None,
        },
    ]
}
MESSAGES = [
    ("user", "I went to the dentist yesterday."),
    ("user", "I prefer window seats on long flights."),
    ("assistant", "Noted, I am always helpful."),
]


class Stub(ChatStub):
    """A chat-completions server whose next answers the test chooses."""

    def __init__(self) -> None:
        self.mode = "good"
        self.requests: list[dict[str, Any]] = []
        self.headers: list[dict[str, str]] = []
        super().__init__()

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        self.requests.append(body)
        self.headers.append(headers)
        if path != "/v1/chat/completions":
            return 404, {"error": {"message": "not found"}}
        if self.mode == "error":
            return 500, {"error": {"message": "overloaded"}}
        if self.mode == "slow":
            time.sleep(2)
        content = json.dumps(GOOD) if self.mode in ("good", "slow") else '{"memories": [{"content": '
        return 200, completion(body["model"], content)


@pytest.fixture(scope="module")
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


async def run_with_llm(
    api: NamespaceAPI, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: Stub, tenant: Tenant
) -> dict[str, Any]:
    """Ingest (the shared app queues the job and has no worker), then run the job as a runner
    configured for the stub would."""
    llm = settings.model_copy(
        update={
            "extractor": "llm",
            "llm_base_url": stub.url,
            "llm_model": "stub-model",
            "llm_api_key": SecretStr("stub-key"),
            "llm_timeout_s": 0.5,
        }
    )
    ctx = JobContext(llm, pg_urls, LoopBoundEmbedder(embedder, asyncio.get_running_loop()))
    out = await api.ingest_events(tenant.principal, "default", EventsIn(**events_body("s-" + new_id(), MESSAGES)))
    outcome = await asyncio.to_thread(execute, ctx, tenant.id, out.job_id)
    job = await api.get_job(tenant.principal, out.job_id)
    assert outcome.status == "succeeded" and job.status.value == "succeeded", job
    return job.result or {}


class TestLLMExtractor:
    async def test_good_answer_becomes_memories(
        self,
        api: NamespaceAPI,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
        stub: Stub,
        tenant_a: Tenant,
    ) -> None:
        stub.mode = "good"
        seen = len(stub.requests)
        result = await run_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)

        assert result["extractor"] == "llm" and result["llm_calls"] == 1 and "llm_fallbacks" not in result
        # The memory citing only the assistant's message is dropped: not evidence about the user.
        assert result["memories_created"] == 2 and result["llm_uncited"] == 1
        request = stub.requests[seen]
        assert request["model"] == "stub-model" and request["temperature"] == 0
        assert request["response_format"]["type"] == "json_schema"
        assert request["response_format"]["json_schema"]["schema"]["required"] == ["memories"]
        assert stub.headers[seen]["Authorization"] == "Bearer stub-key"
        said = json.loads(request["messages"][1]["content"])["messages"]
        assert [m["text"] for m in said] == [t for _, t in MESSAGES]
        assert said[0]["said_at"] == "2024-05-08T15:00:00+00:00"

        mems = {m.content: m for m in await all_memories(api, tenant_a.principal)}
        assert set(mems) == {g["content"] for g in GOOD["memories"][:2]}
        event = mems["The user went to the dentist on 2024-05-07."]
        assert event.type.value == "event" and event.valid_from.isoformat() == "2024-05-07T00:00:00+00:00"
        assert event.metadata["extracted_by"] == "llm" and event.state.value == "tentative"
        pref = mems["The user prefers window seats on long flights."]
        assert pref.key == "seat_preference" and pref.importance == 0.8 and pref.user_id == "u1"

    @pytest.mark.parametrize("mode", ["malformed", "slow", "error"])
    async def test_failed_call_falls_back_to_rules(
        self,
        api: NamespaceAPI,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
        stub: Stub,
        tenant_a: Tenant,
        mode: str,
    ) -> None:
        stub.mode = mode
        result = await run_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)

        assert result["llm_calls"] == 1 and result["llm_fallbacks"] == 1
        contents = {m.content for m in await all_memories(api, tenant_a.principal)}
        assert contents == {"I went to the dentist yesterday (2024-05-07)", "I prefer window seats on long flights"}

    async def test_a_keyed_llm_memory_supersedes_the_older_one(
        self,
        api: NamespaceAPI,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
        stub: Stub,
        tenant_a: Tenant,
    ) -> None:
        stub.mode = "good"
        await run_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)
        GOOD["memories"][1]["content"] = "The user now prefers aisle seats."
        try:
            await run_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)
        finally:
            GOOD["memories"][1]["content"] = "The user prefers window seats on long flights."

        current = [m for m in await all_memories(api, tenant_a.principal) if m.key == "seat_preference"]
        assert [m.content for m in current] == ["The user now prefers aisle seats."]
        assert current[0].supersedes is not None
