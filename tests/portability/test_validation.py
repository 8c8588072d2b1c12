"""Import checks every record as the write API does (the same models, the same guard): a bad record
refuses the whole file naming its line, stores nothing, and never answers 500 or a misleading 409."""

from __future__ import annotations

import copy
import json
import uuid
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant
from tests.memories.test_router import problem
from tests.portability.test_router import SRC, export, post, seed

DST = "/v1/namespaces/restored"
AWS_ID = "AK" + "IA" + "IOSFODNN7EXAMPLE"
SECRET = f"key {AWS_ID}"


async def exported_file(client: httpx.AsyncClient, tenant: Tenant) -> list[dict[str, Any]]:
    await seed(client, tenant)
    await post(client, tenant, "/v1/namespaces", {"name": "restored"})
    return await export(client, tenant, SRC)


async def import_(client: httpx.AsyncClient, tenant: Tenant, records: list[dict[str, Any]]) -> httpx.Response:
    body = "\n".join(json.dumps(r) for r in records)
    return await client.post(f"{DST}/import", content=body, headers=tenant.headers)


async def restored_is_empty(client: httpx.AsyncClient, tenant: Tenant) -> bool:
    exported = await export(client, tenant, DST)
    return exported[-1]["counts"] == dict.fromkeys(exported[-1]["counts"], 0)


def first(records: list[dict[str, Any]], kind: str) -> tuple[int, dict[str, Any]]:
    """(line number, record) of the first record of a kind: line 1 is the header."""
    i = next(i for i, r in enumerate(records) if r["kind"] == kind)
    return i + 1, records[i]


def deep(levels: int) -> dict[str, Any]:
    value: dict[str, Any] = {}
    for _ in range(levels):
        value = {"a": value}
    return value


FUTURE = (datetime.now(UTC) + timedelta(days=400)).isoformat()

# (kind, field, value, what the problem names): each was stored, or a 500, before.
BAD = [
    ("memory", "type", "spaceship", "type"),
    ("memory", "metadata", "just a string", "metadata"),
    ("memory", "metadata", deep(900), "metadata"),
    ("memory", "content", "x" * 1_000_000, "content"),
    ("memory", "importance", 1e-300, "importance"),
    ("memory", "importance", "high", "importance"),
    # Named: an id made of the date would differ between pytest-xdist workers, which must agree.
    pytest.param("memory", "recorded_at", FUTURE, "recorded_at", id="memory-recorded_at-next-year-recorded_at"),
    ("memory", "recorded_at", "yesterday-ish", "recorded_at"),
    ("memory", "key", "k\x00", "key"),
    ("memory", "user_id", ["ana"], "user_id"),
    ("memory", "history", "none", "history"),
    ("memory", "history", [{"action": "created"}], "history[0].actor"),
    ("memory", "embedding", ["a", "b"], "embedding[0]"),
    ("memory", "access_count", -1, "access_count"),
    ("memory", "supersedes", "not-a-uuid", "supersedes"),
    ("memory", "entity_ids", "all", "entity_ids"),
    ("event", "role", "wizard", "role"),
    ("event", "content", "", "content"),
    ("event", "session_id", None, "session_id"),
    ("event", "occurred_at", "soon", "timestamp"),
    ("memory", "history", [{"action": "created", "actor": "me", "at": None}], "history[0].at"),
    ("entity", "name", "", "name"),
    ("entity", "aliases", "Ana", "aliases"),
    ("entity", "type", "dragon", "type"),
    ("relation", "type", "Works At!", "type"),
    ("relation", "confidence", 2, "confidence"),
    ("session", "started_at", None, "started_at"),
    ("session", "message_count", 2**40, "message_count"),
    ("trace", "status", "exploded", "status"),
    ("trace", "steps", [{"seq": 1}], "steps[0]"),
    ("trace", "steps", [{"seq": "one", "thought": "x"}], "steps[0].seq"),
]


class TestBadRecords:
    @pytest.mark.parametrize(("kind", "field", "value", "named"), BAD)
    async def test_refused_whole_naming_the_line(
        self, client: httpx.AsyncClient, tenant_a: Tenant, kind: str, field: str, value: Any, named: str
    ) -> None:
        records = await exported_file(client, tenant_a)
        line, record = first(records, kind)
        record[field] = value

        r = await import_(client, tenant_a, records)

        body = problem(r, 422, "import_invalid")
        assert body["line"] == line
        assert body["detail"].startswith(f"line {line}: {kind}")
        assert body["field"].startswith(named), body
        assert await restored_is_empty(client, tenant_a)

    @pytest.mark.parametrize(
        ("kind", "path", "named"),
        [
            ("memory", ("key",), "key"),
            ("memory", ("user_id",), "user_id"),
            ("memory", ("agent_id",), "agent_id"),
            ("memory", ("history", 0, "snapshot", "content"), "history[0].snapshot.content"),
            ("event", ("speaker",), "speaker"),
            ("event", ("session_id",), "session_id"),
            ("entity", ("aliases",), "aliases"),
            ("trace", ("steps", 0, "thought"), "steps[0].thought"),
        ],
    )
    async def test_a_secret_anywhere_refuses_the_file(
        self, client: httpx.AsyncClient, tenant_a: Tenant, kind: str, path: tuple[Any, ...], named: str
    ) -> None:
        records = await exported_file(client, tenant_a)
        line, record = first(records, kind)
        target: Any = record
        for step in path[:-1]:
            target = target[step]
        target[path[-1]] = [SECRET] if path[-1] == "aliases" else SECRET

        r = await import_(client, tenant_a, records)

        body = problem(r, 422, "secret_detected")
        assert (body["line"], body["kind"]) == (line, "aws_access_key_id")
        assert body["field"].startswith(named)
        assert AWS_ID not in r.text
        assert await restored_is_empty(client, tenant_a)


class TestRecordTimeAndCreator:
    async def test_a_forged_creator_is_not_kept(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        for r in records:
            if "created_by" in r:
                r["created_by"] = "key:00000000-0000-4000-8000-000000000000"

        r = await import_(client, tenant_a, records)

        assert r.status_code == 200, r.text
        restored = await export(client, tenant_a, DST)
        creators = {r["created_by"] for r in restored if "created_by" in r}
        assert len(creators) == 1 and creators != {"key:00000000-0000-4000-8000-000000000000"}
        mine = (await client.post(f"{SRC}/memories", json={"content": "probe"}, headers=tenant_a.headers)).json()
        assert creators == {mine["created_by"]}

    async def test_history_and_past_record_times_are_kept(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        _, memory = first(records, "memory")
        memory["recorded_at"] = memory["created_at"] = memory["updated_at"] = "2019-03-01T00:00:00+00:00"

        r = await import_(client, tenant_a, records)

        assert r.status_code == 200, r.text
        restored = await export(client, tenant_a, DST)
        _, back = first(restored, "memory")
        assert back["recorded_at"].startswith("2019-03-01") and back["history"]

    async def test_record_times_out_of_order_are_refused(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        line, session = first(records, "session")
        session["last_event_at"] = "2001-01-01T00:00:00Z"

        body = problem(await import_(client, tenant_a, records), 422, "import_invalid")

        assert body["line"] == line and "before" in body["detail"]


class TestReferencesAndDuplicates:
    """The database refused these with constraint errors that came back as a misleading 409."""

    async def test_a_duplicate_in_the_file_is_422_not_409(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        line, session = first(records, "session")
        records.insert(line, {**copy.deepcopy(session)})
        records[-1]["counts"]["session"] += 1

        body = problem(await import_(client, tenant_a, records), 422, "import_invalid")

        assert body["line"] == line + 1
        assert await restored_is_empty(client, tenant_a)

    async def test_a_second_entity_of_the_same_name_is_422(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        line, entity = first(records, "entity")
        records.insert(line, {**copy.deepcopy(entity), "id": str(uuid.uuid4()), "name": entity["name"].upper()})
        records[-1]["counts"]["entity"] += 1

        body = problem(await import_(client, tenant_a, records), 422, "import_invalid")

        assert body["line"] == line + 1

    @pytest.mark.parametrize(
        ("kind", "field"), [("relation", "source_id"), ("memory", "entity_ids"), ("memory", "source_event_ids")]
    )
    async def test_a_reference_outside_the_file_is_422(
        self, client: httpx.AsyncClient, tenant_a: Tenant, kind: str, field: str
    ) -> None:
        records = await exported_file(client, tenant_a)
        line, record = first(records, kind)
        stray = str(uuid.uuid4())
        record[field] = [stray] if isinstance(record[field], list) else stray

        body = problem(await import_(client, tenant_a, records), 422, "import_invalid")

        assert (body["line"], body["field"]) == (line, field)

    async def test_a_clash_with_the_namespace_is_still_409(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        records = await exported_file(client, tenant_a)
        assert (await import_(client, tenant_a, records)).status_code == 200

        problem(await import_(client, tenant_a, records), 409, "import_conflict")


@pytest.mark.slow  # imports every field of every record with odd values
class TestNeverA500:
    async def test_every_field_of_every_record_with_odd_values(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        records = await exported_file(client, tenant_a)
        odd: list[Any] = [None, "", [[]], deep(40)]
        statuses: dict[int, int] = {}
        for kind in ("entity", "relation", "session", "event", "memory", "trace"):
            line, record = first(records, kind)
            i = line - 1
            for field in record:
                if field == "kind":
                    continue
                for value in odd:
                    changed = copy.deepcopy(records)
                    changed[i][field] = value
                    r = await import_(client, tenant_a, changed)
                    statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
                    assert r.status_code in (200, 409, 422), (record["kind"], field, value, r.text)
        assert statuses.get(422, 0) > 100, statuses
