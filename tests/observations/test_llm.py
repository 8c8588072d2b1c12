"""The LLM observer against a stub OpenAI-compatible server on 127.0.0.1 (the provider is outside
this machine, as in tests/jobs/test_llm.py): a good answer becomes the session's observation, a
failing one falls back to the rules. Jobs run through the real runner, on a thread."""

from __future__ import annotations

import asyncio
import json
import uuid
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
from tests.llm_stub import ChatStub, completion

NOTES = {
    "summary": "Planning the billing service.",
    "topics": ["billing", "PostgreSQL"],
    "decisions": ["Use PostgreSQL for billing."],
    "open_questions": ["Frankfurt or Dublin?", "api_key=sk-live-0123456789abcdef0123456789abcdef"],
}


class Stub(ChatStub):
    """Answers the extraction's request with no memories and the observation's with NOTES, or
    fails the observation's with a 500 (``fail``)."""

    def __init__(self) -> None:
        self.fail = False
        self.asked: list[dict[str, Any]] = []
        super().__init__()

    def answer(self, path: str, headers: dict[str, str], body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        name = body["response_format"]["json_schema"]["name"]
        if name == "observation":
            self.asked.append(body)
            if self.fail:
                return 500, {"error": {"message": "overloaded"}}
        content = json.dumps(NOTES if name == "observation" else {"memories": []})
        return 200, completion(body["model"], content)


@pytest.fixture(scope="module")
def stub() -> Iterator[Stub]:
    s = Stub()
    yield s
    s.close()


async def observe_with_llm(
    api: NamespaceAPI, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: Stub, tenant: Tenant
) -> tuple[str, dict[str, Any]]:
    llm = settings.model_copy(
        update={"extractor": "llm", "llm_base_url": stub.url, "llm_model": "stub-model", "llm_timeout_s": 2.0}
    )
    llm.llm_api_key = SecretStr("stub-key")
    ctx = JobContext(llm, pg_urls, LoopBoundEmbedder(embedder, asyncio.get_running_loop()))
    session = "s-" + uuid.uuid4().hex[:8]
    body = EventsIn.model_validate(
        {
            "session_id": session,
            "messages": [
                {"role": "user", "content": "We decided to use PostgreSQL for the billing service."},
                {"role": "user", "content": "Should it run in Frankfurt or Dublin?"},
            ],
        }
    )
    out = await api.ingest_events(tenant.principal, "default", body)
    outcome = await asyncio.to_thread(execute, ctx, tenant.id, out.job_id)
    assert outcome.status == "succeeded", outcome
    return session, outcome.result


async def test_the_model_writes_the_observation(
    api: NamespaceAPI, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: Stub, tenant_a: Tenant
) -> None:
    stub.fail = False
    session, result = await observe_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)

    assert result["observations_updated"] == 1 and result["llm_observation_calls"] == 1
    notes = await api.get_observations(tenant_a.principal, "default", session)
    assert notes.observed_by == "llm" and notes.summary == "Planning the billing service."
    assert notes.decisions == ["Use PostgreSQL for billing."] and notes.topics == ["billing", "PostgreSQL"]
    # What the guard refuses is not kept, whoever wrote it.
    assert notes.open_questions == ["Frankfurt or Dublin?"]
    said = json.loads(stub.asked[-1]["messages"][1]["content"])
    assert [m["text"] for m in said["messages"]] == [
        "We decided to use PostgreSQL for the billing service.",
        "Should it run in Frankfurt or Dublin?",
    ]


async def test_a_failed_call_falls_back_to_the_rules(
    api: NamespaceAPI, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, stub: Stub, tenant_a: Tenant
) -> None:
    stub.fail = True
    session, result = await observe_with_llm(api, settings, pg_urls, embedder, stub, tenant_a)

    assert result["llm_observation_fallbacks"] == 1 and result["observations_updated"] == 1
    notes = await api.get_observations(tenant_a.principal, "default", session)
    assert notes.decisions == ["We decided to use PostgreSQL for the billing service"]
    assert notes.open_questions == ["Should it run in Frankfurt or Dublin?"]
