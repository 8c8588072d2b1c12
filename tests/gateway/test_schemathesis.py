"""Schemathesis over the OpenAPI description, against the app under uvicorn on loopback: every
operation, with data that fits the schema and data that does not, answers no 5xx, only statuses
and content types the description declares, and bodies that validate against it.

Bounded and repeatable: a fixed seed, derandomised generation, a few examples per operation and no
example database, so a failure seen in CI is the same one seen on a laptop. Authenticated with a
real API key of a throwaway tenant that is seeded with a little of everything (memories, events,
an entity and a relation, a trace), so lists, searches and by-id reads answer real bodies.
Destructive operations (delete a namespace, forget, revoke a key, disable a user, revoke a grant,
import, change namespace settings) run on a tenant of their own each, so they cannot disturb the
rest.

To run it alone: ``pytest tests/gateway/test_schemathesis.py -q``; a failure prints the request
schemathesis sent as a curl command to reproduce it.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass

import httpx
import pytest
import schemathesis
from schemathesis.checks import (
    content_type_conformance,
    not_a_server_error,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
)
from schemathesis.config import SchemathesisConfig

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, make_tenant
from tests.servers import served_on_thread

# Generated requests for every operation, against uvicorn: minutes, not seconds.
pytestmark = pytest.mark.slow

SEED = 27
# Per operation and generation mode (data that fits the schema, data that does not). With the
# coverage phase's boundary cases, a few thousand requests: 1 min 43 s to 4 min on a 2-core
# machine shared with other test runs, the app's start included.
MAX_EXAMPLES = 6
CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_schema_conformance,
    response_headers_conformance,
]
DESTRUCTIVE = {
    "DELETE /v1/namespaces/{ns}",
    "PATCH /v1/namespaces/{ns}",
    "POST /v1/namespaces/{ns}/forget",
    "POST /v1/namespaces/{ns}/import",
    "DELETE /v1/keys/{key_id}",
    "POST /v1/keys/{key_id}/rotate",
    "POST /v1/users/{user_id}/disable",
    "DELETE /v1/account/grants/{grant_id}",
}


@pytest.fixture(scope="module")
def fuzz_url(settings: Settings, pg_urls: DatabaseUrls) -> Iterator[str]:
    """The app under uvicorn on its own thread and loop (schemathesis' calls are synchronous, so the
    session's app, which runs on the test loop, could not answer them). An embedder of its own: the
    session's holds an asyncio lock bound to the session's loop."""
    embedder = LocalEmbedder("sentence-transformers/all-MiniLM-L6-v2", dim=384)
    with served_on_thread(create_app(settings, urls=pg_urls, embedder=embedder)) as url:
        yield url


@dataclass
class Target:
    url: str
    main: Tenant
    destructive: dict[str, Tenant]
    ids: dict[str, str]

    def headers_for(self, label: str) -> dict[str, str]:
        return (self.destructive.get(label) or self.main).headers


def _seed(url: str, tenant: Tenant) -> dict[str, str]:
    """A little of everything in the tenant's namespace; the ids the by-id operations are pointed at."""
    ns = f"{url}/v1/namespaces/{tenant.namespace}"
    with httpx.Client(headers=tenant.headers, timeout=60) as http:

        def post(path: str, body: dict[str, object]) -> dict[str, object]:
            r = http.post(f"{ns}{path}", json=body)
            assert r.status_code < 300, r.text
            return r.json()

        batch = post(
            "/memories/batch",
            {
                "memories": [
                    {
                        "content": "Ana prefers window seats on long flights",
                        "type": "preference",
                        "user_id": "ana",
                        "key": "seat_preference",
                        "metadata": {"source": "chat"},
                    },
                    {
                        "content": "The team decided to ship the importer in March",
                        "type": "decision",
                        "valid_from": "2026-03-01T00:00:00Z",
                    },
                    {"content": "Always answer in British English", "type": "instruction", "session_id": "s1"},
                ]
            },
        )
        memory_id = batch["memories"][0]["id"]  # type: ignore[index]
        ana = post("/entities", {"name": "Ana", "type": "person", "aliases": ["Ana B."]})
        acme = post("/entities", {"name": "Acme", "type": "organization"})
        post("/relations", {"source_id": ana["id"], "type": "works_at", "target_id": acme["id"]})
        post(f"/memories/{memory_id}/entities", {"entity_ids": [ana["id"]]})
        events = post(
            "/events",
            {
                "session_id": "s1",
                "user_id": "ana",
                "messages": [
                    {"role": "user", "content": "I moved to Lisbon last week."},
                    {"role": "assistant", "content": "Noted: you live in Lisbon now."},
                ],
            },
        )
        trace = post("/traces", {"task": "Book a flight to Lisbon", "user_id": "ana"})
        post(f"/traces/{trace['id']}/steps", {"action": "search flights", "observation": "3 found"})
    return {
        "ns": tenant.namespace,
        "memory_id": str(memory_id),
        "entity_id": str(ana["id"]),
        "trace_id": str(trace["id"]),
        "session_id": "s1",
        "job_id": str(events["job_id"]),
    }


@pytest.fixture(scope="module")
async def fuzz_target(api: NamespaceAPI, fuzz_url: str) -> Target:
    main = await make_tenant(api, "fuzz")
    destructive = {label: await make_tenant(api, "fuzz-destructive") for label in DESTRUCTIVE}
    return Target(url=fuzz_url, main=main, destructive=destructive, ids=_seed(fuzz_url, main))


def _schema() -> schemathesis.BaseSchema:
    """The description the app serves at /openapi.json (the same function makes both; building it
    needs no database), loaded at collection so each operation is a test of its own."""
    config = SchemathesisConfig.from_dict(
        {
            "seed": SEED,
            "generation": {"max-examples": MAX_EXAMPLES, "deterministic": True, "database": "none"},
            # A 1,000-memory batch embeds 1,000 texts; on a busy 2-core machine that takes more than
            # the default 10 s (issue 27 item 11 is about what it does to others meanwhile).
            "request-timeout": 120,
            "phases": {"stateful": {"enabled": False}},
            "operations": [
                {
                    # The coverage phase's boundary cases include three 1,000-memory batches (over
                    # a minute of embedding on 2 cores, and thousands of rows that slow every later
                    # search and export); big batches are issue 27 item 11's benchmark, not this.
                    "include-path": "/v1/namespaces/{ns}/memories/batch",
                    "phases": {"coverage": {"enabled": False}},
                }
            ],
            "suppress-health-check": ["all"],
        }
    )
    return schemathesis.openapi.from_dict(create_app(Settings(_env_file=None)).openapi(), config=config)


schema = _schema()


@schema.parametrize()
def test_no_5xx_and_every_response_as_described(case: schemathesis.Case, fuzz_target: Target) -> None:
    # Every operation works in the seeded namespace, on the seeded rows; the destructive tenants
    # have the namespace (same name) but not the rows, so their by-id calls are 404s.
    for name in case.path_parameters or {}:
        if name in fuzz_target.ids:
            case.path_parameters[name] = fuzz_target.ids[name]
    headers = fuzz_target.headers_for(case.operation.label)
    response = case.call(base_url=fuzz_target.url, headers=headers)
    case.validate_response(response, checks=CHECKS, headers=headers, transport_kwargs={"base_url": fuzz_target.url})
