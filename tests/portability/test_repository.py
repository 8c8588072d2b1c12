"""The import writes in batches (portability/repository.py): a file larger than a batch, whose
records leave out different optional fields, comes back whole, in order, with the database's
defaults where the file gave none."""

from __future__ import annotations

import json
import uuid
from typing import Any

import httpx
from sqlalchemy import text

from memvault.api import NamespaceAPI
from memvault.portability import repository
from tests.conftest import Tenant
from tests.portability.test_router import DST, SRC, export, post, seed

N = repository.CHUNK + 150  # past one batch


def _bigger(exported: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The exported file with N more events and N more memories. Every other event leaves out its
    speaker, every other memory its key and importance, every third its record time, so rows of
    one kind name different columns; the vectors are the file's own, so nothing is embedded."""
    header, *records, _end = exported
    memory = next(r for r in records if r["kind"] == "memory")
    event = next(r for r in records if r["kind"] == "event")
    more: list[dict[str, Any]] = []
    for i in range(N):
        e = {**event, "id": str(uuid.uuid4()), "content": f"turn {i}"}
        if i % 2:
            e["speaker"] = f"speaker {i}"
        else:
            e.pop("speaker", None)
        more.append(e)
    for i in range(N):
        m = {
            k: v
            for k, v in memory.items()
            if k not in ("key", "importance", "recorded_at", "supersedes", "superseded_by", "superseded_at")
        }
        m |= {"id": str(uuid.uuid4()), "content": f"fact {i}", "history": [], "entity_ids": []}
        m["source_event_ids"] = []
        if i % 2:
            m |= {"key": f"k{i}", "importance": 0.9}
        if i % 3:
            m["recorded_at"] = "2024-06-01T00:00:00Z"
        more.append(m)
    body = [r for r in records if r["kind"] not in ("memory", "trace")]
    body += more + [r for r in records if r["kind"] in ("memory", "trace")]
    counts: dict[str, int] = {}
    for r in body:
        counts[r["kind"]] = counts.get(r["kind"], 0) + 1
    return [header, *body, {"kind": "end", "counts": counts}]


class TestBatchedImport:
    async def test_a_file_larger_than_a_batch_comes_back_whole_and_in_order(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await seed(client, tenant_a)
        await post(client, tenant_a, "/v1/namespaces", {"name": "restored"})
        file = _bigger(await export(client, tenant_a, SRC, embeddings="true"))
        r = await client.post(f"{DST}/import", content="\n".join(json.dumps(x) for x in file), headers=tenant_a.headers)
        assert r.status_code == 200, r.text
        assert {kind: n for kind, n in r.json()["imported"].items() if n} == file[-1]["counts"]

        restored = await export(client, tenant_a, DST)
        events = [x for x in restored if x["kind"] == "event"]
        # Export lists events in arrival order: the file's order survives batching.
        assert [x["content"] for x in events] == [x["content"] for x in file if x["kind"] == "event"]
        assert [x.get("speaker") for x in events[2:6]] == [None, "speaker 1", None, "speaker 3"]
        facts = {x["content"]: x for x in restored if x["kind"] == "memory" and x["content"].startswith("fact ")}
        assert len(facts) == N
        # Left out: the database's default (importance 0.5, record time now); given: kept.
        assert (facts["fact 0"]["importance"], facts["fact 0"]["key"]) == (0.5, None)
        assert (facts["fact 1"]["importance"], facts["fact 1"]["key"]) == (0.9, "k1")
        assert facts["fact 1"]["recorded_at"].startswith("2024-06-01")
        assert not facts["fact 3"]["recorded_at"].startswith("2024-06-01")


class TestDefaults:
    async def test_a_column_imported_as_null_when_left_out_has_no_default(self, api: NamespaceAPI) -> None:
        """The import gives NULL for a column a record leaves out when the model declares no default
        for it (so that rows of one batch name the same columns). That is only what leaving it out
        means if the database has no default for it either; a migration adding one must say so in
        the model too."""
        async with api._db.owner() as s:
            for table in repository.WRITTEN:
                rows = await s.execute(
                    text(
                        "SELECT column_name FROM information_schema.columns WHERE table_name = :t "
                        "AND (column_default IS NOT NULL OR is_identity = 'YES' OR is_generated = 'ALWAYS')"
                    ),
                    {"t": table.name},
                )
                assert not repository.null_when_left_out(table) & {name for (name,) in rows}, table.name
