"""Events and sessions as a client sees them: append conversation messages (202 + an extraction
job), read sessions and their messages back page by page, and every refusal: secrets, other
tenants, limited keys and bad input, as problem JSON, never a 500.

Runs against the real app and embedded PostgreSQL; job rows are read back through the facade's own
tenant transaction, under row-level security."""

from __future__ import annotations

import base64
import json
import random
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.jobs import repository as jobs_repo
from tests.conftest import Tenant
from tests.memories.test_router import problem

BASE = "/v1/namespaces/default"
EVENTS = f"{BASE}/events"
SESSIONS = f"{BASE}/sessions"
T0 = datetime(2026, 3, 1, 9, 0, tzinfo=UTC)
# Shapes the secrets guard refuses (docs: private-key blocks, credentialed connection strings).
PRIVATE_KEY = "-----BEGIN RSA PRIVATE KEY-----\nMIIEowIBAAKCAQEAu1SU1LfVLPHCozMxH2Mo4lgOEePzNm0tRgeLezV6ffAt0gun\n"
CONNECTION = "postgresql://admin:s3cr3t-Passw0rd@db.internal.example.com:5432/prod"


def session_url(session_id: str, ns: str = "default") -> str:
    return f"/v1/namespaces/{ns}/sessions/{quote(session_id, safe='')}"


def messages_url(session_id: str, ns: str = "default") -> str:
    return f"{session_url(session_id, ns)}/messages"


def msg(content: str, role: str = "user", **fields: Any) -> dict[str, Any]:
    return {"role": role, "content": content, **fields}


async def ingest(
    client: httpx.AsyncClient, tenant: Tenant, messages: list[dict[str, Any]], *, ns: str = "default", **top: Any
) -> dict[str, Any]:
    r = await client.post(f"/v1/namespaces/{ns}/events", json={"messages": messages, **top}, headers=tenant.headers)
    assert r.status_code == 202, r.text
    return r.json()


async def all_messages(
    client: httpx.AsyncClient, tenant: Tenant, session_id: str, *, limit: int = 200, **params: Any
) -> list[dict[str, Any]]:
    """Every message of a session, following cursors; asserts no page repeats a message."""
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(500):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        r = await client.get(messages_url(session_id), params=query, headers=tenant.headers)
        assert r.status_code == 200, r.text
        page = r.json()
        assert len(page["data"]) <= limit
        out += page["data"]
        cursor = page["next_cursor"]
        if cursor is None:
            ids = [m["id"] for m in out]
            assert len(ids) == len(set(ids)), "a message was repeated across pages"
            return out
        assert page["data"], "a page with a cursor must not be empty"
    raise AssertionError("pagination does not end")


async def all_sessions(
    client: httpx.AsyncClient, tenant: Tenant, *, limit: int = 200, **params: Any
) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    cursor: str | None = None
    for _ in range(500):
        query = {"limit": limit, **params, **({"cursor": cursor} if cursor else {})}
        r = await client.get(SESSIONS, params=query, headers=tenant.headers)
        assert r.status_code == 200, r.text
        out += r.json()["data"]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            return out
    raise AssertionError("pagination does not end")


async def counts(api: NamespaceAPI, tenant: Tenant) -> dict[str, int]:
    """Rows this tenant has, as the application role sees them (row-level security applies)."""
    out: dict[str, int] = {}
    async with api._db.tenant_tx(tenant.id) as tx:
        for table in ("events", "sessions", "jobs"):
            out[table] = (await tx.session.execute(text(f"SELECT count(*) FROM {table}"))).scalar_one()
    return out


async def job_row(api: NamespaceAPI, tenant: Tenant, job_id: str) -> Any:
    async with api._db.tenant_tx(tenant.id) as tx:
        return await jobs_repo.get(tx.session, tenant.id, uuid.UUID(job_id))


async def create_key(client: httpx.AsyncClient, tenant: Tenant, **body: Any) -> dict[str, str]:
    r = await client.post("/v1/keys", json={"name": "test", **body}, headers=tenant.headers)
    assert r.status_code == 201, r.text
    return {"Authorization": f"Bearer {r.json()['key']}"}


def b64(value: Any) -> str:
    """A hand-made cursor, in the API's encoding."""
    return base64.urlsafe_b64encode(json.dumps(value).encode()).decode().rstrip("=")


def at(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


# ---- ingest ---------------------------------------------------------------------------------


class TestIngest:
    async def test_one_message_is_accepted_with_a_queued_job(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r = await client.post(
            EVENTS,
            json={"session_id": "s1", "user_id": "alice", "messages": [msg("I moved to Lisbon last month")]},
            headers=tenant_a.headers,
        )

        assert r.status_code == 202, r.text
        body = r.json()
        assert set(body) == {"job_id", "job_created", "event_ids", "sessions"}
        assert r.headers["location"] == f"/v1/jobs/{body['job_id']}"
        assert body["job_created"] is True
        assert len(body["event_ids"]) == 1
        [session] = body["sessions"]
        assert session["id"] == "s1"
        assert session["user_id"] == "alice"
        assert session["message_count"] == 1
        assert session["started_at"] == session["last_event_at"]

        job = await job_row(api, tenant_a, body["job_id"])
        assert job is not None
        assert (job.kind, job.status, job.attempts) == ("extraction", "queued", 0)
        assert job.payload == {"event_ids": body["event_ids"], "namespace": "default"}
        assert job.created_by.startswith("key:")
        assert job.job_key

        [m] = (await client.get(messages_url("s1"), headers=tenant_a.headers)).json()["data"]
        assert m["id"] == body["event_ids"][0]
        assert m["job_id"] == body["job_id"]
        assert m["content"] == "I moved to Lisbon last month"
        assert (m["role"], m["session_id"], m["user_id"], m["speaker"]) == ("user", "s1", "alice", None)
        assert m["metadata"] == {}
        # An untimed message happened when it arrived.
        assert m["timestamp"] == m["recorded_at"]

    async def test_many_messages_keep_request_order_and_share_one_job(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        contents = [f"turn {i}: {'question' if i % 2 == 0 else 'answer'}" for i in range(25)]
        messages = [
            msg(c, "user" if i % 2 == 0 else "assistant", metadata={"i": i}, speaker="Bot" if i % 2 else None)
            for i, c in enumerate(contents)
        ]

        body = await ingest(client, tenant_a, messages, session_id="chat")

        assert len(body["event_ids"]) == len(set(body["event_ids"])) == 25
        listed = await all_messages(client, tenant_a, "chat")
        # No timestamps: all share the arrival time, and arrival order decides.
        assert [m["content"] for m in listed] == contents
        assert [m["id"] for m in listed] == body["event_ids"]
        assert [m["metadata"]["i"] for m in listed] == list(range(25))
        assert listed[1]["speaker"] == "Bot"
        assert {m["job_id"] for m in listed} == {body["job_id"]}
        job = await job_row(api, tenant_a, body["job_id"])
        assert job.payload["event_ids"] == body["event_ids"]
        assert (await counts(api, tenant_a))["jobs"] == 1

    async def test_per_message_session_and_user_override_the_request(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        body = await ingest(
            client,
            tenant_a,
            [
                msg("hello from the main thread"),
                msg("a side conversation", session_id="side", user_id="bob"),
                msg("back in the main thread"),
            ],
            session_id="main",
            user_id="alice",
        )

        assert [s["id"] for s in body["sessions"]] == ["main", "side"]
        by_id = {s["id"]: s for s in body["sessions"]}
        assert (by_id["main"]["user_id"], by_id["main"]["message_count"]) == ("alice", 2)
        assert (by_id["side"]["user_id"], by_id["side"]["message_count"]) == ("bob", 1)
        main = await all_messages(client, tenant_a, "main")
        assert [m["content"] for m in main] == ["hello from the main thread", "back in the main thread"]
        assert {m["user_id"] for m in main} == {"alice"}
        [side] = await all_messages(client, tenant_a, "side")
        assert (side["content"], side["user_id"]) == ("a side conversation", "bob")

    async def test_messages_need_no_user(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = await ingest(
            client, tenant_a, [msg("system prompt", "system"), msg("tool output", "tool")], session_id="s"
        )

        assert body["sessions"][0]["user_id"] is None
        assert [m["role"] for m in await all_messages(client, tenant_a, "s")] == ["system", "tool"]

    async def test_session_spans_and_counts_grow_with_each_request(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        first = await ingest(
            client,
            tenant_a,
            [
                msg("second", timestamp=(T0 + timedelta(minutes=5)).isoformat()),
                msg("first", timestamp=T0.isoformat()),
            ],
            session_id="s",
        )
        [s] = first["sessions"]
        assert (at(s["started_at"]), at(s["last_event_at"]), s["message_count"]) == (T0, T0 + timedelta(minutes=5), 2)

        # An earlier and a later message widen the span on both sides; a user is taken when given.
        second = await ingest(
            client,
            tenant_a,
            [
                msg("before all", timestamp=(T0 - timedelta(days=1)).isoformat()),
                msg("after all", timestamp=(T0 + timedelta(hours=1)).isoformat()),
            ],
            session_id="s",
            user_id="carol",
        )
        [s] = second["sessions"]
        assert at(s["started_at"]) == T0 - timedelta(days=1)
        assert at(s["last_event_at"]) == T0 + timedelta(hours=1)
        assert (s["message_count"], s["user_id"]) == (4, "carol")

        # A request without a user keeps the session's.
        await ingest(client, tenant_a, [msg("still carol", timestamp=T0.isoformat())], session_id="s")
        r = await client.get(session_url("s"), headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert r.json() == {**s, "message_count": 5, "user_id": "carol"}

        listed = await all_messages(client, tenant_a, "s")
        # Conversation order is message time; the two at T0 keep their arrival order.
        assert [m["content"] for m in listed] == ["before all", "first", "still carol", "second", "after all"]

    async def test_timestamps_are_stored_in_utc(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await ingest(
            client,
            tenant_a,
            [msg("naive", timestamp="2026-03-01T09:00:00"), msg("zoned", timestamp="2026-03-01T11:00:00+02:00")],
            session_id="s",
        )

        listed = await all_messages(client, tenant_a, "s")
        assert [at(m["timestamp"]) for m in listed] == [T0, T0]
        assert [m["content"] for m in listed] == ["naive", "zoned"]

    async def test_session_ids_are_free_text(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        odd = ["slack:C0123/1700000000.000100", "a b?c#d%e&f", "ünïcødé 会话", "x/messages", "s" * 200]
        await ingest(client, tenant_a, [msg(f"in {sid}", session_id=sid) for sid in odd])

        for sid in odd:
            r = await client.get(session_url(sid), headers=tenant_a.headers)
            if sid == "x/messages":
                # Its path is that of session "x"'s messages, and "x" does not exist.
                problem(r, 404, "session_not_found")
            else:
                assert r.status_code == 200, (sid, r.text)
                assert r.json()["id"] == sid
            [m] = await all_messages(client, tenant_a, sid)
            assert m["content"] == f"in {sid}"
        assert sorted(s["id"] for s in await all_sessions(client, tenant_a)) == sorted(odd)

    async def test_audit_records_the_count_not_the_content(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        body = await ingest(client, tenant_a, [msg("my favourite colour is teal"), msg("noted")], session_id="s")

        async with api._db.tenant_tx(tenant_a.id) as tx:
            rows = (
                await tx.session.execute(
                    text("SELECT actor, target_id, detail::text FROM audit_log WHERE action = 'events.ingest'")
                )
            ).all()
        [(actor, target, detail)] = rows
        assert actor.startswith("key:")
        assert target == body["job_id"]
        assert '"count": 2' in detail
        assert "teal" not in detail and "noted" not in detail


class TestRetry:
    """An identical retry appends its events again (events are append-only) but reuses the first
    request's extraction job, so the same messages are not extracted twice."""

    REQUEST: dict[str, Any] = {
        "session_id": "s",
        "user_id": "alice",
        "messages": [msg("I prefer window seats"), msg("Noted, window seats.", "assistant", metadata={"k": [1, 2]})],
    }

    async def test_identical_retry_reuses_the_job(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        r1 = await client.post(EVENTS, json=self.REQUEST, headers=tenant_a.headers)
        r2 = await client.post(EVENTS, json=self.REQUEST, headers=tenant_a.headers)

        assert r1.status_code == r2.status_code == 202
        first, second = r1.json(), r2.json()
        assert second["job_id"] == first["job_id"]
        assert r2.headers["location"] == r1.headers["location"]
        assert (first["job_created"], second["job_created"]) == (True, False)
        assert set(first["event_ids"]).isdisjoint(second["event_ids"])
        assert second["sessions"][0]["message_count"] == 4
        assert await counts(api, tenant_a) == {"events": 4, "sessions": 1, "jobs": 1}
        # The job still names the events it was made for.
        job = await job_row(api, tenant_a, first["job_id"])
        assert job.payload["event_ids"] == first["event_ids"]
        listed = await all_messages(client, tenant_a, "s")
        assert {m["job_id"] for m in listed} == {first["job_id"]}

    @pytest.mark.parametrize(
        "change",
        [
            {"session_id": "other"},
            {"user_id": "bob"},
            {"messages": [msg("I prefer aisle seats")]},
            {"messages": [msg("I prefer window seats"), msg("I prefer window seats")]},
            {"messages": [msg("I prefer window seats", timestamp=T0.isoformat())]},
            {"messages": [msg("I prefer window seats", "participant")]},
            {"messages": [msg("I prefer window seats", speaker="Al")]},
            {"messages": [msg("I prefer window seats", metadata={"k": 1})]},
        ],
    )
    async def test_any_difference_makes_a_new_job(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, change: dict[str, Any]
    ) -> None:
        base = {"session_id": "s", "user_id": "alice", "messages": [msg("I prefer window seats")]}
        first = await ingest(client, tenant_a, **base)
        second = await ingest(client, tenant_a, **{**base, **change})

        assert second["job_id"] != first["job_id"]
        assert second["job_created"] is True
        assert (await counts(api, tenant_a))["jobs"] == 2

    async def test_same_request_in_another_namespace_or_tenant_is_its_own_job(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        r = await client.post("/v1/namespaces", json={"name": "work"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text

        jobs = {
            (await ingest(client, tenant_a, **self.REQUEST))["job_id"],
            (await ingest(client, tenant_a, ns="work", **self.REQUEST))["job_id"],
            (await ingest(client, tenant_b, **self.REQUEST))["job_id"],
        }

        assert len(jobs) == 3


class RecordingDispatcher:
    """Stands in for the workers' dispatcher, which the facade takes as a constructor argument."""

    def __init__(self, api: NamespaceAPI) -> None:
        self.api = api
        self.calls: list[tuple[uuid.UUID, uuid.UUID, str, str | None]] = []

    async def dispatch(self, tenant_id: uuid.UUID, job_id: uuid.UUID, kind: str) -> None:
        # What a worker would find: the job must already be committed, visible to a new transaction.
        async with self.api._db.tenant_tx(tenant_id) as tx:
            job = await jobs_repo.get(tx.session, tenant_id, job_id)
        self.calls.append((tenant_id, job_id, kind, job.status if job else None))


class TestJobHandOff:
    @pytest.fixture
    def recorder(self, api: NamespaceAPI) -> RecordingDispatcher:
        return RecordingDispatcher(api)

    @pytest.fixture
    def facade(self, api: NamespaceAPI, recorder: RecordingDispatcher) -> NamespaceAPI:
        return NamespaceAPI(api._db, api._embedder, api._settings, jobs=recorder)

    async def test_new_job_is_dispatched_once_after_commit(
        self, facade: NamespaceAPI, recorder: RecordingDispatcher, tenant_a: Tenant
    ) -> None:
        from memvault.events.schemas import EventsIn

        body = EventsIn.model_validate({"session_id": "s", "messages": [msg("I like jazz")]})

        out = await facade.ingest_events(tenant_a.principal, "default", body)
        again = await facade.ingest_events(tenant_a.principal, "default", body)

        assert again.job_id == out.job_id
        # The retry's job was already handed over by the request that created it.
        assert recorder.calls == [(tenant_a.id, out.job_id, "extraction", "queued")]

    async def test_refused_request_dispatches_nothing(
        self, facade: NamespaceAPI, recorder: RecordingDispatcher, tenant_a: Tenant
    ) -> None:
        from pydantic import ValidationError

        from memvault.errors import MemvaultError
        from memvault.events.schemas import EventsIn

        # A secret is refused by the request model itself (fields.Body), before any door reaches the facade.
        with pytest.raises(ValidationError, match="secret_detected"):
            EventsIn.model_validate({"session_id": "s", "messages": [msg("fine"), msg(PRIVATE_KEY)]})
        unknown_ns = EventsIn.model_validate({"session_id": "s", "messages": [msg("fine")]})
        with pytest.raises(MemvaultError):
            await facade.ingest_events(tenant_a.principal, "nowhere", unknown_ns)

        assert recorder.calls == []


# ---- secrets --------------------------------------------------------------------------------


class TestSecrets:
    @pytest.mark.parametrize(
        ("message", "field", "kind"),
        [
            (msg(PRIVATE_KEY), "messages[3].content", "private_key"),
            (msg(f"connect with {CONNECTION}", "tool"), "messages[3].content", "url_password"),
            (
                msg("see the config", metadata={"db": {"url": CONNECTION}}),
                "messages[3].metadata.db.url",
                "url_password",
            ),
            (msg("ok", speaker=f"bot at {CONNECTION}"), "messages[3].speaker", "url_password"),
        ],
    )
    async def test_one_secret_stores_nothing(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        message: dict[str, Any],
        field: str,
        kind: str,
    ) -> None:
        messages = [msg(f"harmless message {i}") for i in range(3)] + [message, msg("after")]

        r = await client.post(EVENTS, json={"session_id": "s", "messages": messages}, headers=tenant_a.headers)

        body = problem(r, 422, "secret_detected")
        assert (body["field"], body["kind"]) == (field, kind)
        assert "s3cr3t" not in r.text and "MIIEow" not in r.text
        assert await counts(api, tenant_a) == {"events": 0, "sessions": 0, "jobs": 0}
        problem(await client.get(session_url("s"), headers=tenant_a.headers), 404, "session_not_found")


# ---- sessions -------------------------------------------------------------------------------


class TestSessions:
    async def test_most_recent_activity_first(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for i, sid in enumerate(["old", "new", "middle"]):
            hours = {"old": 0, "new": 2, "middle": 1}[sid]
            ts = (T0 + timedelta(hours=hours)).isoformat()
            await ingest(client, tenant_a, [msg(f"message {i}", timestamp=ts)], session_id=sid, user_id="u")

        listed = await all_sessions(client, tenant_a)
        assert [s["id"] for s in listed] == ["new", "middle", "old"]
        assert set(listed[0]) == {"id", "user_id", "started_at", "last_event_at", "message_count"}

        # New activity in "old" brings it to the front.
        await ingest(
            client, tenant_a, [msg("again", timestamp=(T0 + timedelta(hours=3)).isoformat())], session_id="old"
        )
        assert [s["id"] for s in await all_sessions(client, tenant_a)] == ["old", "new", "middle"]

    async def test_cursor_visits_every_session_once(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        # Sessions sharing a last_event_at must still page without gaps: the id breaks the tie.
        sids = [f"session-{i:02d}" for i in range(23)]
        await ingest(
            client,
            tenant_a,
            [
                msg("hi", session_id=sid, timestamp=(T0 + timedelta(minutes=i // 4)).isoformat())
                for i, sid in enumerate(sids)
            ],
        )

        pages: list[list[str]] = []
        cursor: str | None = None
        while True:
            params = {"limit": 5, **({"cursor": cursor} if cursor else {})}
            r = await client.get(SESSIONS, params=params, headers=tenant_a.headers)
            assert r.status_code == 200, r.text
            pages.append([s["id"] for s in r.json()["data"]])
            cursor = r.json()["next_cursor"]
            if cursor is None:
                break
            assert len(pages) < 10

        seen = [sid for page in pages for sid in page]
        assert [len(p) for p in pages] == [5, 5, 5, 5, 3]
        expected = sorted(sids, key=lambda sid: (T0 + timedelta(minutes=sids.index(sid) // 4), sid), reverse=True)
        assert seen == expected

    async def test_filter_by_user(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await ingest(
            client,
            tenant_a,
            [
                msg("a1", session_id="a1", user_id="alice"),
                msg("b1", session_id="b1", user_id="bob"),
                msg("a2", session_id="a2", user_id="alice"),
                msg("nobody", session_id="n1"),
            ],
        )

        alice = await all_sessions(client, tenant_a, user_id="alice", limit=1)
        assert sorted(s["id"] for s in alice) == ["a1", "a2"]
        assert [s["id"] for s in await all_sessions(client, tenant_a, user_id="bob")] == ["b1"]
        assert await all_sessions(client, tenant_a, user_id="carol") == []
        assert len(await all_sessions(client, tenant_a)) == 4

    async def test_empty_namespace_has_no_sessions(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.get(SESSIONS, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert r.json() == {"data": [], "next_cursor": None}

    async def test_unknown_session_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="known")

        problem(await client.get(session_url("unknown"), headers=tenant_a.headers), 404, "session_not_found")
        problem(await client.get(messages_url("unknown"), headers=tenant_a.headers), 404, "session_not_found")
        # Session ids are exact: no case folding, no trimming.
        problem(await client.get(session_url("Known"), headers=tenant_a.headers), 404, "session_not_found")
        problem(await client.get(session_url("known "), headers=tenant_a.headers), 404, "session_not_found")

    async def test_a_session_belongs_to_its_namespace(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        r = await client.post("/v1/namespaces", json={"name": "work"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        await ingest(client, tenant_a, [msg("in default")], session_id="s")
        await ingest(client, tenant_a, [msg("in work 1"), msg("in work 2")], session_id="s", ns="work")

        default = (await client.get(session_url("s"), headers=tenant_a.headers)).json()
        work = (await client.get(session_url("s", "work"), headers=tenant_a.headers)).json()
        assert (default["message_count"], work["message_count"]) == (1, 2)
        r = await client.get(messages_url("s", "work"), headers=tenant_a.headers)
        assert [m["content"] for m in r.json()["data"]] == ["in work 1", "in work 2"]

    async def test_unknown_namespace_is_404(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        for method, url, body in [
            ("POST", "/v1/namespaces/nowhere/events", {"session_id": "s", "messages": [msg("hi")]}),
            ("GET", "/v1/namespaces/nowhere/sessions", None),
            ("GET", session_url("s", "nowhere"), None),
            ("GET", messages_url("s", "nowhere"), None),
        ]:
            r = await client.request(method, url, json=body, headers=tenant_a.headers)
            problem(r, 404, "namespace_not_found")


# ---- messages -------------------------------------------------------------------------------


class TestMessages:
    @pytest.fixture
    async def conversation(self, client: httpx.AsyncClient, tenant_a: Tenant) -> list[str]:
        """120 messages in 12 ten-minute groups of 10, sent in two requests with the groups
        interleaved, so time order differs from arrival order; inside a group arrival decides.
        Returns their contents in conversation order."""
        groups = list(range(12))
        random.Random(7).shuffle(groups)
        for part in (groups[:6], groups[6:]):
            messages = [
                msg(
                    f"g{g:02d}-m{i}",
                    "user" if i % 2 == 0 else "assistant",
                    timestamp=(T0 + timedelta(minutes=10 * g)).isoformat(),
                )
                for g in part
                for i in range(10)
            ]
            await ingest(client, tenant_a, messages, session_id="long")
        return [f"g{g:02d}-m{i}" for g in range(12) for i in range(10)]

    @pytest.mark.parametrize("limit", [1, 7, 50, 120, 200])
    async def test_pages_visit_every_message_once_in_order(
        self, client: httpx.AsyncClient, tenant_a: Tenant, conversation: list[str], limit: int
    ) -> None:
        asc = await all_messages(client, tenant_a, "long", limit=limit)
        desc = await all_messages(client, tenant_a, "long", limit=limit, order="desc")

        assert [m["content"] for m in asc] == conversation
        assert [m["content"] for m in desc] == conversation[::-1]

    async def test_default_page_is_fifty_oldest_first(
        self, client: httpx.AsyncClient, tenant_a: Tenant, conversation: list[str]
    ) -> None:
        r = await client.get(messages_url("long"), headers=tenant_a.headers)

        page = r.json()
        assert [m["content"] for m in page["data"]] == conversation[:50]
        assert page["next_cursor"]
        session = (await client.get(session_url("long"), headers=tenant_a.headers)).json()
        assert session["message_count"] == 120
        assert at(session["started_at"]) == T0
        assert at(session["last_event_at"]) == T0 + timedelta(minutes=110)

    async def test_filter_by_role(self, client: httpx.AsyncClient, tenant_a: Tenant, conversation: list[str]) -> None:
        users = await all_messages(client, tenant_a, "long", limit=9, role="user")
        assistants = await all_messages(client, tenant_a, "long", limit=9, order="desc", role="assistant")

        assert [m["content"] for m in users] == conversation[0::2]
        assert [m["content"] for m in assistants] == conversation[1::2][::-1]
        both = await all_messages(client, tenant_a, "long", role=["user", "assistant"])
        assert len(both) == 120
        assert await all_messages(client, tenant_a, "long", role="tool") == []

    async def test_a_cursor_belongs_to_its_order_and_list(
        self, client: httpx.AsyncClient, tenant_a: Tenant, conversation: list[str]
    ) -> None:
        r = await client.get(messages_url("long"), params={"limit": 5}, headers=tenant_a.headers)
        asc_cursor = r.json()["next_cursor"]
        await ingest(client, tenant_a, [msg("hi", session_id=f"s{i}") for i in range(3)])
        r = await client.get(SESSIONS, params={"limit": 1}, headers=tenant_a.headers)
        sessions_cursor = r.json()["next_cursor"]

        for url, params in [
            (messages_url("long"), {"order": "desc", "cursor": asc_cursor}),
            (SESSIONS, {"cursor": asc_cursor}),
            (messages_url("long"), {"cursor": sessions_cursor}),
        ]:
            r = await client.get(url, params=params, headers=tenant_a.headers)
            assert problem(r, 422, "validation_error")["field"] == "cursor"


# ---- isolation and access ---------------------------------------------------------------------


class TestOtherTenant:
    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await ingest(client, tenant_a, [msg("alice's secret plan")], session_id="s-a", user_id="alice")

        r = await client.get(SESSIONS, headers=tenant_b.headers)
        assert r.json() == {"data": [], "next_cursor": None}
        r = await client.get(SESSIONS, params={"user_id": "alice"}, headers=tenant_b.headers)
        assert r.json()["data"] == []
        problem(await client.get(session_url("s-a"), headers=tenant_b.headers), 404, "session_not_found")
        problem(await client.get(messages_url("s-a"), headers=tenant_b.headers), 404, "session_not_found")

    async def test_same_session_id_in_two_tenants_stays_apart(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await ingest(client, tenant_a, [msg("from a")], session_id="shared", user_id="alice")
        await ingest(client, tenant_b, [msg("from b 1"), msg("from b 2")], session_id="shared", user_id="bob")

        a = (await client.get(session_url("shared"), headers=tenant_a.headers)).json()
        b = (await client.get(session_url("shared"), headers=tenant_b.headers)).json()
        assert (a["user_id"], a["message_count"]) == ("alice", 1)
        assert (b["user_id"], b["message_count"]) == ("bob", 2)
        a_msgs = (await client.get(messages_url("shared"), headers=tenant_a.headers)).json()["data"]
        assert [m["content"] for m in a_msgs] == ["from a"]
        assert await counts(api, tenant_a) == {"events": 1, "sessions": 1, "jobs": 1}

    async def test_other_tenants_job_is_not_found(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        body = await ingest(client, tenant_a, [msg("hi")], session_id="s")

        assert await job_row(api, tenant_b, body["job_id"]) is None
        # Row-level security hides it even when the query forgets the tenant filter.
        async with api._db.tenant_tx(tenant_b.id) as tx:
            found = await tx.session.execute(text("SELECT 1 FROM jobs WHERE id = :id"), {"id": body["job_id"]})
            assert found.first() is None


class TestKeys:
    CALLS: list[tuple[str, str, dict[str, Any] | None]] = [
        ("POST", "/v1/namespaces/{ns}/events", {"session_id": "s", "messages": [msg("hi")]}),
        ("GET", "/v1/namespaces/{ns}/sessions", None),
        ("GET", "/v1/namespaces/{ns}/sessions/s", None),
        ("GET", "/v1/namespaces/{ns}/sessions/s/messages", None),
    ]

    @pytest.mark.parametrize(("method", "path", "body"), CALLS, ids=[f"{m} {p}" for m, p, _ in CALLS])
    async def test_namespace_limited_key_is_refused_elsewhere(
        self,
        client: httpx.AsyncClient,
        api: NamespaceAPI,
        tenant_a: Tenant,
        method: str,
        path: str,
        body: dict[str, Any] | None,
    ) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="s")
        limited = await create_key(client, tenant_a, scopes=["read", "write"], namespaces=["other"])

        r = await client.request(method, path.format(ns="default"), json=body, headers=limited)

        problem(r, 403, "forbidden")
        assert await counts(api, tenant_a) == {"events": 1, "sessions": 1, "jobs": 1}

    async def test_namespace_limited_key_works_in_its_namespace(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        r = await client.post("/v1/namespaces", json={"name": "other"}, headers=tenant_a.headers)
        assert r.status_code == 201, r.text
        limited = await create_key(client, tenant_a, scopes=["read", "write"], namespaces=["other"])

        r = await client.post(
            "/v1/namespaces/other/events", json={"session_id": "s", "messages": [msg("hi")]}, headers=limited
        )
        assert r.status_code == 202, r.text
        r = await client.get("/v1/namespaces/other/sessions/s/messages", headers=limited)
        assert [m["content"] for m in r.json()["data"]] == ["hi"]

    async def test_read_only_key_reads_but_cannot_ingest(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="s")
        reader = await create_key(client, tenant_a, scopes=["read"])

        r = await client.post(EVENTS, json={"session_id": "s", "messages": [msg("more")]}, headers=reader)
        assert problem(r, 403, "forbidden")["required_scope"] == "write"
        assert (await client.get(SESSIONS, headers=reader)).status_code == 200
        assert (await client.get(messages_url("s"), headers=reader)).status_code == 200
        assert await counts(api, tenant_a) == {"events": 1, "sessions": 1, "jobs": 1}

    async def test_no_key_is_401(self, client: httpx.AsyncClient) -> None:
        r = await client.post(EVENTS, json={"session_id": "s", "messages": [msg("hi")]})
        problem(r, 401, "missing_credentials")
        problem(await client.get(SESSIONS), 401, "missing_credentials")


# ---- bad input ------------------------------------------------------------------------------


class TestBadInput:
    @pytest.mark.parametrize(
        ("body", "field"),
        [
            ({"session_id": "s", "messages": []}, "messages"),
            ({"session_id": "s"}, "messages"),
            ({"session_id": "s", "messages": [msg("x")] * 501}, "messages"),
            ({"session_id": "s", "messages": "hello"}, "messages"),
            ({"session_id": "s", "messages": [msg("x", "robot")]}, "messages[0].role"),
            ({"session_id": "s", "messages": [{"content": "x"}]}, "messages[0].role"),
            ({"session_id": "s", "messages": [{"role": "user"}]}, "messages[0].content"),
            ({"session_id": "s", "messages": [msg("ok"), msg("")]}, "messages[1].content"),
            ({"session_id": "s", "messages": [msg(" \n\t ")]}, "messages[0].content"),
            ({"session_id": "s", "messages": [msg("x" * 32_001)]}, "messages[0].content"),
            ({"session_id": "s", "messages": [msg("a\u0000b")]}, "messages[0].content"),
            ({"session_id": "s", "messages": [msg(42)]}, "messages[0].content"),
            ({"session_id": "s", "messages": [msg("x", timestamp="yesterday")]}, "messages[0].timestamp"),
            ({"session_id": "s", "messages": [msg("x", timestamp="2026-13-45T99:00:00Z")]}, "messages[0].timestamp"),
            (
                {"session_id": "s", "messages": [msg("x", timestamp="0001-01-01T00:00:00+01:00")]},
                "messages[0].timestamp",
            ),
            ({"session_id": "s", "messages": [msg("x", colour="blue")]}, "messages[0].colour"),
            ({"session_id": "s", "messages": [msg("x")], "agent": "a"}, "agent"),
            ({"session_id": "s", "messages": [msg("x", metadata=[1])]}, "messages[0].metadata"),
            ({"session_id": "s", "messages": [msg("x", metadata={"a": "\u0000"})]}, "messages[0].metadata"),
            ({"session_id": "s", "messages": [msg("x", speaker="")]}, "messages[0].speaker"),
            ({"session_id": "s", "messages": [msg("x", speaker="a\u0000")]}, "messages[0].speaker"),
            ({"session_id": "", "messages": [msg("x")]}, "session_id"),
            ({"session_id": "s" * 201, "messages": [msg("x")]}, "session_id"),
            ({"session_id": "a\u0000b", "messages": [msg("x")]}, "session_id"),
            ({"session_id": 7, "messages": [msg("x")]}, "session_id"),
            ({"session_id": "s", "user_id": "", "messages": [msg("x")]}, "user_id"),
            ({"session_id": "s", "messages": [msg("x", user_id="u" * 201)]}, "messages[0].user_id"),
            ({"messages": [msg("x")]}, "messages[0].session_id"),
            ({"messages": [msg("x", session_id="s"), msg("y")]}, "messages[1].session_id"),
            ({"session_id": None, "messages": [msg("x", session_id=None)]}, "messages[0].session_id"),
        ],
    )
    async def test_invalid_ingest_is_422_and_stores_nothing(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, body: dict[str, Any], field: str
    ) -> None:
        r = await client.post(EVENTS, json=body, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field
        assert await counts(api, tenant_a) == {"events": 0, "sessions": 0, "jobs": 0}

    async def test_limits_are_inclusive(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        body = await ingest(
            client, tenant_a, [msg("é" * 32_000)] + [msg(f"m{i}") for i in range(499)], session_id="s" * 200
        )

        assert len(body["event_ids"]) == 500
        assert body["sessions"][0]["message_count"] == 500

    @pytest.mark.parametrize("raw", [b"{not json", b"", b"null", b"[1, 2]", b'"text"', b"\xff\xfe"])
    async def test_body_that_is_not_a_json_object(
        self, client: httpx.AsyncClient, tenant_a: Tenant, raw: bytes
    ) -> None:
        r = await client.post(EVENTS, content=raw, headers={**tenant_a.headers, "content-type": "application/json"})

        problem(r, 422, "validation_error")

    @pytest.mark.parametrize(
        ("url", "params", "field"),
        [
            (SESSIONS, {"limit": 0}, "limit"),
            (SESSIONS, {"limit": 201}, "limit"),
            (SESSIONS, {"limit": "ten"}, "limit"),
            (SESSIONS, {"user_id": "u" * 201}, "user_id"),
            (SESSIONS, {"user_id": "a\u0000b"}, "user_id"),
            (f"{SESSIONS}/s/messages", {"order": "sideways"}, "order"),
            (f"{SESSIONS}/s/messages", {"role": "robot"}, "role[0]"),
            (f"{SESSIONS}/s/messages", {"limit": -1}, "limit"),
            (f"{SESSIONS}/{'s' * 201}", {}, "session_id"),
            (f"{SESSIONS}/{'s' * 201}/messages", {}, "session_id"),
            (f"{SESSIONS}/a%00b", {}, "session_id"),
            (f"{SESSIONS}/a%00b/messages", {}, "session_id"),
        ],
    )
    async def test_bad_query_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, url: str, params: dict[str, Any], field: str
    ) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="s")

        r = await client.get(url, params=params, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == field

    @pytest.mark.parametrize(
        "cursor",
        [
            "%%%",
            b64("not json"),
            b64(None),
            b64([1, 2]),
            b64(["sessions", "not a date", "s"]),
            b64(["sessions", "2026-03-01T09:00:00", "s"]),  # no zone
            b64(["sessions", "2026-03-01T09:00:00+00:00", 1]),
            b64(["sessions", "2026-03-01T09:00:00+00:00", "a\u0000b"]),
            b64(["sessions", "2026-03-01T09:00:00+00:00"]),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", 1]),
        ],
    )
    async def test_garbage_sessions_cursor_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, cursor: str
    ) -> None:
        r = await client.get(SESSIONS, params={"cursor": cursor}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "cursor"

    @pytest.mark.parametrize(
        "cursor",
        [
            "%%%",
            b64({"a": 1}),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", "1"]),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", -1]),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", 2**63]),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", True]),
            b64(["messages:asc", "2026-03-01T09:00:00+00:00", 1.5]),
            b64(["messages:asc", None, 1]),
            b64(["messages:desc", "2026-03-01T09:00:00+00:00", 1]),  # the other order's
        ],
    )
    async def test_garbage_messages_cursor_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, cursor: str
    ) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="s")

        r = await client.get(messages_url("s"), params={"cursor": cursor}, headers=tenant_a.headers)

        assert problem(r, 422, "validation_error")["field"] == "cursor"

    async def test_largest_valid_seq_in_a_cursor_is_simply_past_the_end(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await ingest(client, tenant_a, [msg("hi")], session_id="s")
        cursor = b64(["messages:asc", "9999-12-31T00:00:00+00:00", 2**63 - 1])

        r = await client.get(messages_url("s"), params={"cursor": cursor}, headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        assert r.json() == {"data": [], "next_cursor": None}
