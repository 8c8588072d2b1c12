"""Export a namespace as JSON Lines and import it into another: the round trip restores the same
memories (with versions, history and entity links), events, sessions, entities, relations and
traces; bad files are refused whole."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.memories.test_router import problem

AT = "2024-05-08T15:00:00Z"
SRC = "/v1/namespaces/default"
DST = "/v1/namespaces/restored"
UUID_FIELDS = ("id", "source_id", "target_id", "supersedes", "superseded_by")
UUID_LISTS = ("entity_ids", "source_event_ids")


async def post(client: httpx.AsyncClient, tenant: Tenant, path: str, body: dict[str, Any], status: int = 201) -> Any:
    r = await client.post(path, json=body, headers=tenant.headers)
    assert r.status_code == status, r.text
    return r.json()


async def seed(client: httpx.AsyncClient, tenant: Tenant) -> None:
    ana = await post(client, tenant, f"{SRC}/entities", {"name": "Ana", "type": "person", "aliases": ["Ana M."]})
    acme = await post(client, tenant, f"{SRC}/entities", {"name": "Acme", "type": "organization"})
    await post(
        client,
        tenant,
        f"{SRC}/relations",
        {"source_id": ana["id"], "type": "works_at", "target_id": acme["id"], "valid_from": "2021-01-01T00:00:00Z"},
    )
    ingested = await post(
        client,
        tenant,
        f"{SRC}/events",
        {
            "session_id": "s1",
            "user_id": "ana",
            "messages": [
                {"role": "user", "content": "I started at Acme in 2021", "timestamp": "2024-05-01T10:00:00Z"},
                {"role": "assistant", "content": "Congratulations!", "timestamp": "2024-05-01T10:00:05Z"},
            ],
        },
        202,
    )
    await post(
        client,
        tenant,
        f"{SRC}/memories",
        {
            "content": "Ana works at Acme",
            "user_id": "ana",
            "key": "employer",
            "entity_ids": [ana["id"], acme["id"]],
            "source_event_ids": ingested["event_ids"][:1],
            "metadata": {"source": "chat", "tags": ["job"]},
        },
    )
    await post(
        client, tenant, f"{SRC}/memories", {"content": "Ana works at Globex", "user_id": "ana", "key": "employer"}
    )
    m = await post(client, tenant, f"{SRC}/memories", {"content": "Team lunch is on Fridays", "state": "tentative"})
    await client.post(f"{SRC}/memories/{m['id']}/promote", headers=tenant.headers)
    trace = await post(client, tenant, f"{SRC}/traces", {"task": "Book a flight for Ana", "user_id": "ana"})
    await post(
        client,
        tenant,
        f"{SRC}/traces/{trace['id']}/steps",
        {"thought": "search flights", "tool_name": "flights.search", "tool_args": {"to": "LIS"}},
    )
    await post(
        client, tenant, f"{SRC}/traces/{trace['id']}/complete", {"outcome": "Booked TP123", "success": True}, 200
    )


async def export(client: httpx.AsyncClient, tenant: Tenant, base: str, **params: Any) -> list[dict[str, Any]]:
    r = await client.get(f"{base}/export", params=params, headers=tenant.headers)
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("application/x-ndjson")
    return [json.loads(line) for line in r.text.splitlines()]


def normalise(records: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Each record as canonical JSON with ids replaced by what they point at, grouped by kind."""
    label: dict[str, str] = {}
    for r in records:
        kind = r["kind"]
        if kind == "entity":
            label[r["id"]] = f"entity:{r['name']}"
        elif kind == "memory":
            label[r["id"]] = f"memory:{r['content']}"
        elif kind == "event":
            label[r["id"]] = f"event:{r['content']}"
        elif kind == "relation":
            label[r["id"]] = f"relation:{r['type']}"
        elif kind == "trace":
            label[r["id"]] = f"trace:{r['task']}"

    def fix(value: Any) -> Any:
        return label.get(value, value) if isinstance(value, str) else value

    out: dict[str, list[str]] = {}
    for r in records:
        r = dict(r)
        if r["kind"] == "header":
            r.pop("namespace"), r.pop("exported_at")
        for f in UUID_FIELDS:
            if f in r:
                r[f] = fix(r[f])
        for f in UUID_LISTS:
            if f in r:
                r[f] = sorted(fix(v) for v in r[f])
        for h in r.get("history", []):
            h["snapshot"]["superseded_by"] = fix(h["snapshot"].get("superseded_by"))
        out.setdefault(r["kind"], []).append(json.dumps(r, sort_keys=True))
    return {k: sorted(v) for k, v in out.items()}


class TestRoundTrip:
    @pytest.mark.parametrize("embeddings", [False, True])
    async def test_import_restores_an_equal_namespace(
        self, client: httpx.AsyncClient, tenant_a: Tenant, embeddings: bool
    ):
        await seed(client, tenant_a)
        await post(client, tenant_a, "/v1/namespaces", {"name": "restored"})
        exported = await export(client, tenant_a, SRC, embeddings=str(embeddings).lower())
        kinds = [r["kind"] for r in exported]
        assert kinds[0] == "header" and kinds[-1] == "end"
        assert exported[-1]["counts"] == {
            "entity": 2,
            "relation": 1,
            "session": 1,
            "event": 2,
            "observation": 0,
            "memory": 3,
            "contradiction": 0,
            "trace": 1,
        }
        assert ("embedding" in next(r for r in exported if r["kind"] == "memory")) is embeddings

        body = "\n".join(json.dumps(r) for r in exported)
        r = await client.post(f"{DST}/import", content=body, headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert r.json()["imported"] == exported[-1]["counts"]

        restored = await export(client, tenant_a, DST, embeddings=str(embeddings).lower())
        assert normalise(restored) == normalise(exported)
        source_ids = {r["id"] for r in exported if "id" in r and r["kind"] != "session"}
        assert source_ids.isdisjoint({r["id"] for r in restored if "id" in r})

        # The restored namespace works: search, history, scope chain.
        r = await client.post(f"{DST}/search", json={"query": "where does Ana work"}, headers=tenant_a.headers)
        assert r.json()["results"][0]["memory"]["content"] == "Ana works at Globex"
        current = r.json()["results"][0]["memory"]["id"]
        h = (await client.get(f"{DST}/memories/{current}/history", headers=tenant_a.headers)).json()
        assert [v["content"] for v in h["versions"]] == ["Ana works at Acme", "Ana works at Globex"]


class TestMarksAndObservations:
    async def test_contradictions_and_a_sessions_observation_survive_the_round_trip(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        """What a restore lost before: the marks that two memories disagree (open, and resolved
        with the memory kept) and what extraction made of a conversation. A mark naming a
        tenant-scope memory, which the file does not hold, is left out, and the file still imports."""
        said = [{"role": "user", "content": "We decided to move the stand-up to 9:30.", "timestamp": AT}]
        ingested = await post(client, tenant_a, f"{SRC}/events", {"session_id": "s-obs", "messages": said}, 202)
        assert (await api.run_job(tenant_a.principal, uuid.UUID(ingested["job_id"]))).status == "succeeded"
        texts = ["The office opens at 8", "The office opens at 9", "Parking is free", "Parking costs 5 euros"]
        a, b, c, d = [(await post(client, tenant_a, f"{SRC}/memories", {"content": t}))["id"] for t in texts]
        shared = await post(
            client, tenant_a, f"{SRC}/memories", {"content": "The office is in Lisbon", "scope": "tenant"}
        )
        await post(client, tenant_a, f"{SRC}/contradictions", {"memory_id": a, "other_id": b, "note": "opening time"})
        resolved = await post(client, tenant_a, f"{SRC}/contradictions", {"memory_id": c, "other_id": d})
        await post(
            client,
            tenant_a,
            f"{SRC}/contradictions/{resolved['id']}/resolve",
            {"resolution": "keep_one", "keep_id": c},
            200,
        )
        await post(client, tenant_a, f"{SRC}/contradictions", {"memory_id": a, "other_id": shared["id"]})

        exported = await export(client, tenant_a, SRC)
        assert exported[-1]["counts"]["contradiction"] == 2 and exported[-1]["counts"]["observation"] == 1
        await post(client, tenant_a, "/v1/namespaces", {"name": "restored"})
        r = await client.post(
            f"{DST}/import", content="\n".join(json.dumps(x) for x in exported), headers=tenant_a.headers
        )
        assert r.status_code == 200, r.text
        assert r.json()["imported"]["contradiction"] == 2 and r.json()["imported"]["observation"] == 1

        async def marks(base: str) -> list[tuple[Any, ...]]:
            page = (await client.get(f"{base}/contradictions", headers=tenant_a.headers)).json()["data"]
            content = {}
            for m in (await client.get(f"{base}/memories?limit=50&state=archived", headers=tenant_a.headers)).json()[
                "data"
            ]:
                content[m["id"]] = m["content"]
            for m in (await client.get(f"{base}/memories?limit=50", headers=tenant_a.headers)).json()["data"]:
                content[m["id"]] = m["content"]
            return sorted(
                (
                    content[x["memory_id"]],
                    content[x["other_id"]],
                    x["note"],
                    x["state"],
                    x["resolution"],
                    content.get(x["kept_id"]) if x["kept_id"] else None,
                    x["resolved_at"],
                )
                for x in page
            )

        source, restored = await marks(SRC), await marks(DST)
        # The tenant-scope memory is the tenant's, not the namespace's: a restore elsewhere would
        # find it, but the file does not carry it, so its mark stays out.
        assert len(source) == 3
        assert restored == [m for m in source if "The office is in Lisbon" not in m[:2]]
        assert [m[:6] for m in restored] == [
            ("Parking is free", "Parking costs 5 euros", None, "resolved", "keep_one", "Parking is free"),
            ("The office opens at 8", "The office opens at 9", "opening time", "open", None, None),
        ]
        # The open mark works in the restored namespace: a hit lists the other memory.
        r = await client.post(f"{DST}/search", json={"query": "when does the office open"}, headers=tenant_a.headers)
        top = r.json()["results"][0]
        assert top["memory"]["content"].startswith("The office opens at") and len(top["contradicted_by"]) == 1

        notes = [
            (await client.get(f"{base}/sessions/s-obs/observations", headers=tenant_a.headers)).json()
            for base in (SRC, DST)
        ]
        assert notes[0]["decisions"] == ["We decided to move the stand-up to 9:30"]
        assert {k: v for k, v in notes[1].items() if k != "job_id"} == {
            k: v for k, v in notes[0].items() if k != "job_id"
        }


class TestBadFiles:
    async def _import(self, client: httpx.AsyncClient, tenant: Tenant, lines: list[Any]) -> httpx.Response:
        body = "\n".join(x if isinstance(x, str) else json.dumps(x) for x in lines)
        return await client.post(f"{SRC}/import", content=body, headers=tenant.headers)

    async def test_refused_whole(self, client: httpx.AsyncClient, tenant_a: Tenant):
        header = {"kind": "header", "format": "memvault-export", "version": 1}
        good = {
            "kind": "memory",
            "id": str(uuid.uuid4()),
            "type": "fact",
            "content": "ok",
            "scope": "namespace",
            "content_hash": "x",
        }
        cases = [
            [],
            ["not json"],
            [{"kind": "memory"}],
            [header, good],  # no end: truncated
            [{**header, "version": 99}, {"kind": "end", "counts": {}}],
            [header, {"kind": "spaceship"}, {"kind": "end", "counts": {}}],
            [header, {**good, "content": None}, {"kind": "end", "counts": {"memory": 1}}],
            [header, good, {"kind": "end", "counts": {"memory": 2}}],
            [header, {**good, "scope": "system"}, {"kind": "end", "counts": {"memory": 1}}],
        ]
        # Marks and observations point into the file, and say a consistent thing.
        other = {**good, "id": str(uuid.uuid4()), "content": "not ok"}
        mark = {"kind": "contradiction", "id": str(uuid.uuid4()), "memory_id": good["id"], "other_id": other["id"]}
        resolved = {"state": "resolved", "resolution": "keep_one", "resolved_at": AT}
        observed = {"kind": "observation", "session_id": "s9", "summary": "x", "observed_by": "rules"}
        for records in (
            [good, {**mark, "other_id": str(uuid.uuid4())}],  # names a memory the file lacks
            [good, other, {**mark, **resolved, "kept_id": str(uuid.uuid4())}],  # keeps neither
            [good, other, {**mark, **resolved}],  # keep_one without kept_id
            [good, other, {**mark, "resolution": "keep_both"}],  # open, yet resolved
            [good, other, mark, {**mark, "id": str(uuid.uuid4())}],  # the same pair open twice
            [{**observed, "last_event_at": AT}],  # a session the file lacks
        ):
            counts: dict[str, int] = {}
            for x in records:
                counts[x["kind"]] = counts.get(x["kind"], 0) + 1
            cases.append([header, *records, {"kind": "end", "counts": counts}])
        for lines in cases:
            problem(await self._import(client, tenant_a, lines), 422, "import_invalid")
        secret = {**good, "content": "my key is AKIA" + "IOSFODNN7EXAMPLE"}
        r = await self._import(client, tenant_a, [header, good, secret, {"kind": "end", "counts": {"memory": 2}}])
        problem(r, 422, "secret_detected")
        r = await client.get(f"{SRC}/memories", headers=tenant_a.headers)
        assert r.json()["data"] == []  # nothing from any refused file

    async def test_clash_is_409_and_nothing_is_written(self, client: httpx.AsyncClient, tenant_a: Tenant):
        await post(client, tenant_a, f"{SRC}/entities", {"name": "Ana", "type": "person"})
        exported = await export(client, tenant_a, SRC)
        r = await client.post(
            f"{SRC}/import", content="\n".join(json.dumps(x) for x in exported), headers=tenant_a.headers
        )
        problem(r, 409, "import_conflict")


class TestOtherTenant:
    async def test_other_tenant_cannot_export_or_import(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ):
        note = await post(client, tenant_a, f"{SRC}/memories", {"content": "A's private note"})
        other = await post(client, tenant_a, f"{SRC}/memories", {"content": "A's other note"})
        await post(client, tenant_a, f"{SRC}/contradictions", {"memory_id": note["id"], "other_id": other["id"]})
        said = [{"role": "user", "content": "A's private decision: we will use Redis.", "timestamp": AT}]
        ingested = await post(client, tenant_a, f"{SRC}/events", {"session_id": "s-a", "messages": said}, 202)
        assert (await api.run_job(tenant_a.principal, uuid.UUID(ingested["job_id"]))).status == "succeeded"
        mine = await export(client, tenant_b, SRC)
        assert [r["kind"] for r in mine] == ["header", "end"]
        assert "A's private" not in json.dumps(mine)
        r = await client.get("/v1/namespaces/restored/export", headers=tenant_b.headers)
        problem(r, 404, "namespace_not_found")
        r = await client.post("/v1/keys", json={"scopes": ["read"]}, headers=tenant_a.headers)
        reader = {"Authorization": f"Bearer {r.json()['key']}"}
        r = await client.post(f"{SRC}/import", content="{}", headers=reader)
        problem(r, 403, "forbidden")
