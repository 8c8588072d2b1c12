"""Export a namespace as JSON Lines and import such a file into another namespace.

The file is: a header, then entities, relations, sessions, events, sessions' observations,
memories (each with its history and entity links, embeddings optional), contradictions between
them, traces (with steps), and an `end` record with the
counts, so an importer can tell a complete file from a truncated one. Export reads one
REPEATABLE READ snapshot, page by page; import is one transaction, all or nothing, with new ids
(references between records are remapped); every record is checked by the write API's models.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import AsyncIterator
from datetime import UTC, datetime
from itertools import groupby
from operator import itemgetter
from typing import Any

from pydantic import ValidationError
from sqlalchemy.exc import DBAPIError, IntegrityError
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.audit import repository as audit
from memvault.errors import Conflict, InvalidInput
from memvault.facade import FacadeBase
from memvault.fields import as_error
from memvault.guard import SecretDetected
from memvault.memories.service import content_hash
from memvault.metering.tally import count, estimated_tokens
from memvault.operations import operation
from memvault.plans.quotas import require_room
from memvault.plans.room import require_stored_room
from memvault.portability import repository as repo
from memvault.portability.records import RECORDS
from memvault.principal import Principal

FORMAT = "memvault-export"
VERSION = 1
PAGE = 500

# What each kind exports, in file order. Columns are listed, not `*`, so the format changes only
# when we mean it to.
COLUMNS: dict[str, tuple[str, ...]] = {
    "entity": ("id", "name", "type", "aliases", "description", "metadata", "created_by", "created_at", "updated_at"),
    "relation": (
        "id",
        "source_id",
        "type",
        "target_id",
        "valid_from",
        "valid_to",
        "confidence",
        "metadata",
        "created_by",
        "created_at",
    ),
    "session": ("id", "user_id", "started_at", "last_event_at", "message_count", "created_at", "updated_at"),
    "event": (
        "id",
        "session_id",
        "user_id",
        "role",
        "speaker",
        "content",
        "metadata",
        "occurred_at",
        "recorded_at",
        "created_by",
    ),
    # Named by its session; the job that wrote it is not carried (jobs stay where they ran).
    "observation": (
        "session_id",
        "user_id",
        "summary",
        "topics",
        "decisions",
        "open_questions",
        "observed_by",
        "message_count",
        "last_event_at",
        "created_at",
        "updated_at",
    ),
    "memory": (
        "id",
        "type",
        "key",
        "content",
        "scope",
        "user_id",
        "agent_id",
        "session_id",
        "metadata",
        "importance",
        "confidence",
        "state",
        "valid_from",
        "valid_to",
        "recorded_at",
        "superseded_at",
        "superseded_by",
        "supersedes",
        "source_event_ids",
        "content_hash",
        "access_count",
        "last_accessed_at",
        "created_by",
        "created_at",
        "updated_at",
        "embedding_model",
    ),
    # Only marks between two memories of the namespace: one naming a tenant-scope memory points
    # outside the file (repository.pages).
    "contradiction": (
        "id",
        "memory_id",
        "other_id",
        "note",
        "state",
        "resolution",
        "kept_id",
        "resolution_note",
        "created_by",
        "created_at",
        "resolved_by",
        "resolved_at",
    ),
    "trace": (
        "id",
        "task",
        "status",
        "outcome",
        "success",
        "user_id",
        "agent_id",
        "session_id",
        "metadata",
        "step_count",
        "created_by",
        "started_at",
        "completed_at",
        "embedding_model",
    ),
}
# Kinds a file names by a key that is kept, not remapped to a new id: a session by its own id (the
# client's), an observation by its session's. Every other kind is named by `id`, remapped on import.
KEPT_KEYS = {"session": "id", "observation": "session_id"}
# JSON columns whose missing value is an empty object rather than NULL.
JSON_OBJECTS = {"metadata", "snapshot"}


class ImportInvalid(InvalidInput):
    code = "import_invalid"
    title = "Import file invalid"


class ImportConflict(Conflict):
    code = "import_conflict"
    title = "Import conflicts with existing data"


def _jsonable(value: Any) -> Any:
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, uuid.UUID):
        return str(value)
    if isinstance(value, list):
        return [_jsonable(v) for v in value]
    return value


def _line(record: dict[str, Any]) -> str:
    return json.dumps({k: _jsonable(v) for k, v in record.items()}, ensure_ascii=False, separators=(",", ":")) + "\n"


class PortabilityOps(FacadeBase):
    # ---- export ---------------------------------------------------------------------------

    @operation("read")
    async def export_namespace(self, p: Principal, ns: str, *, embeddings: bool = False) -> AsyncIterator[str]:
        """The namespace as JSON Lines. Checks access before the first byte, so a refusal is a
        proper error response rather than a broken stream."""
        p.require("read", ns)
        limits = (await self._plans.of(p.tenant_id)).limits
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            if limits.export_bytes is not None:
                # Weighed by the database before the first byte: past the plan's size the answer is
                # a 403 naming the quota, never a file cut off in the middle.
                size = await repo.export_size(tx.session, p.tenant_id, namespace.id, COLUMNS, embeddings=embeddings)
                require_room(limits, "export_bytes", used=0, adding=size)
            await audit.record(
                tx.session, p.tenant_id, p.subject, "namespace.export", namespace_id=namespace.id, target_id=ns
            )
        return self._export_lines(p.tenant_id, namespace.id, ns, embeddings)

    async def _export_lines(
        self, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ns: str, embeddings: bool
    ) -> AsyncIterator[str]:
        counts: dict[str, int] = dict.fromkeys(COLUMNS, 0)
        async with self._db.tenant_tx(tenant_id, snapshot=True) as tx:
            s = tx.session
            yield _line(
                {
                    "kind": "header",
                    "format": FORMAT,
                    "version": VERSION,
                    "namespace": ns,
                    "exported_at": datetime.now(UTC),
                    "embedding_model": self._embedder.model_id,
                    "embeddings": embeddings,
                }
            )
            for kind in COLUMNS:
                async for row in self._rows(s, kind, tenant_id, namespace_id, embeddings):
                    counts[kind] += 1
                    yield _line({"kind": kind, **row})
        yield _line({"kind": "end", "counts": counts})

    async def _rows(
        self, s: AsyncSession, kind: str, tenant_id: uuid.UUID, namespace_id: uuid.UUID, embeddings: bool
    ) -> AsyncIterator[dict[str, Any]]:
        cols = COLUMNS[kind]
        pages = repo.pages(s, kind, tenant_id, namespace_id, cols, embeddings=embeddings, size=PAGE)
        async for rows in pages:
            key = KEPT_KEYS.get(kind, "id")
            extras = await _extras(s, kind, tenant_id, [r[key] for r in rows])
            for r in rows:
                out = {c: r[c] for c in cols}
                if "embedding" in r and r["embedding"] is not None:
                    out["embedding"] = json.loads(r["embedding"])
                out.update(extras.get(r[key], {}))
                if kind == "memory":
                    out.setdefault("entity_ids", [])
                    out.setdefault("history", [])
                if kind == "trace":
                    out.setdefault("steps", [])
                yield out

    @operation("read")
    async def export_current_memories(self, p: Principal, ns: str) -> AsyncIterator[dict[str, Any]]:
        """The namespace's current memories (the latest version of each, archived ones too), in
        record order from one snapshot, each with its namespace's name: what the Markdown mirror
        (portability/markdown.py) writes. Checks access before the first record."""
        p.require("read", ns)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "namespace.export",
                namespace_id=namespace.id,
                target_id=ns,
                detail={"format": "markdown"},
            )
        return self._current_memories(p.tenant_id, namespace.id, ns)

    async def _current_memories(
        self, tenant_id: uuid.UUID, namespace_id: uuid.UUID, ns: str
    ) -> AsyncIterator[dict[str, Any]]:
        cols = (*COLUMNS["memory"][:-1], "superseded_at")
        async with self._db.tenant_tx(tenant_id, snapshot=True) as tx:
            async for rows in repo.pages(
                tx.session, "memory", tenant_id, namespace_id, cols, embeddings=False, size=PAGE
            ):
                for r in rows:
                    if r["superseded_at"] is None:
                        yield {"namespace": ns, **{c: r[c] for c in cols}}

    # ---- import ---------------------------------------------------------------------------

    @operation("write")
    async def import_namespace(self, p: Principal, ns: str, lines: list[str]) -> dict[str, int]:
        """Restore an export into this namespace, all or nothing, under new ids. Every record is
        checked by the write API's own models (portability/records.py) before anything is stored;
        the first bad one refuses the file, naming its line."""
        p.require("write", ns)
        limits = (await self._plans.of(p.tenant_id)).limits
        # The body's size as received (each line and its newline): refused before it is parsed.
        require_room(limits, "import_bytes", used=0, adding=sum(len(line.encode()) + 1 for line in lines))
        records = _validated(_parse(lines), p.subject)
        memories = sum(1 for kind, _ in records if kind == "memory")
        if limits.memories is not None:  # refused before the model embeds the file
            async with self._db.tenant_tx(p.tenant_id) as tx:
                await require_stored_room(tx, limits, "memories", adding=memories, hold=False)
        vectors = await self._import_vectors(p, records)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            await require_stored_room(tx, limits, "memories", adding=memories)
            namespace = await self._namespace(tx, p, ns)
            try:
                async with tx.session.begin_nested():
                    counts = await _restore(tx.session, p.tenant_id, namespace.id, records, vectors)
            except IntegrityError as exc:
                if getattr(exc.orig, "sqlstate", None) != "23505":
                    # The file was checked whole: what the database still refuses is a rule the checks
                    # missed, not a clash with the namespace (a 409 would send the user looking there).
                    raise ImportInvalid(f"the file breaks a rule of the database ({_constraint(exc)})") from exc
                raise ImportConflict(
                    "The file clashes with what the namespace holds (an entity name or a current memory key "
                    "exists already). Import into an empty namespace, or forget the clashing data first."
                ) from exc
            except DBAPIError as exc:
                raise ImportInvalid(f"the database refused a value of the file ({_constraint(exc)})") from exc
            await audit.record(
                tx.session, p.tenant_id, p.subject, "namespace.import", namespace_id=namespace.id, detail=counts
            )
        count(
            memories_written=counts.get("memory", 0),
            bytes_stored=sum(len(str(r.get("content") or "").encode()) for _, r in records),
        )
        return counts

    async def _import_vectors(self, p: Principal, records: list[tuple[str, dict[str, Any]]]) -> dict[int, list[float]]:
        """Reuse the file's embeddings when the same model made them; embed the rest, in one batch."""
        vectors: dict[int, list[float]] = {}
        todo: list[tuple[int, str]] = []
        for i, (kind, r) in enumerate(records):
            if kind not in ("memory", "trace"):
                continue
            emb = r.get("embedding")
            if (
                isinstance(emb, list)
                and r.get("embedding_model") == self._embedder.model_id
                and len(emb) == self._embedder.dim
            ):
                vectors[i] = [float(x) for x in emb]
            else:
                todo.append((i, r["content"] if kind == "memory" else f"{r['task']}\n{r.get('outcome') or ''}"))
        if todo:
            texts = [t for _, t in todo]
            await self._usage.require_monthly_room(
                p.tenant_id, "embedded_tokens_per_month", adding=estimated_tokens(texts)
            )
            embedded = await self._embedder.embed(texts, tenant=p.tenant_id)
            vectors.update({i: v for (i, _), v in zip(todo, embedded, strict=True)})
        return vectors


def _jsonable_dict(d: dict[str, Any]) -> dict[str, Any]:
    return {k: _jsonable(v) for k, v in d.items()}


async def _extras(s: AsyncSession, kind: str, tenant_id: uuid.UUID, ids: list[Any]) -> dict[Any, dict[str, Any]]:
    """What a page of memories or traces carries beside its rows: entity links and history, steps."""
    extras: dict[Any, dict[str, Any]] = {}
    if kind == "memory":
        for mid, eid in await repo.memory_links(s, tenant_id, ids):
            extras.setdefault(mid, {}).setdefault("entity_ids", []).append(eid)
        for h in await repo.memory_history(s, tenant_id, ids):
            entry = _jsonable_dict({k: h[k] for k in repo.HISTORY_COLUMNS})
            extras.setdefault(h["memory_id"], {}).setdefault("history", []).append(entry)
    elif kind == "trace":
        for st in await repo.trace_steps(s, tenant_id, ids):
            step = _jsonable_dict({k: st[k] for k in repo.STEP_COLUMNS})
            extras.setdefault(st["trace_id"], {}).setdefault("steps", []).append(step)
    return extras


def _parse(lines: list[str]) -> list[tuple[int, str, dict[str, Any]]]:
    """The file's records as (line number, kind, fields), checked for shape: header, kinds, end."""
    parsed: list[tuple[int, dict[str, Any]]] = []
    for n, raw in enumerate(lines, start=1):
        if not raw.strip():
            continue
        try:
            value = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise ImportInvalid(f"line {n} is not JSON", extra={"line": n}) from exc
        if not isinstance(value, dict) or not isinstance(value.get("kind"), str):
            raise ImportInvalid(f"line {n} is not a record with a `kind`", extra={"line": n})
        parsed.append((n, value))
    if not parsed or parsed[0][1].get("kind") != "header" or parsed[0][1].get("format") != FORMAT:
        raise ImportInvalid("the file does not start with a memvault export header")
    if parsed[0][1].get("version") != VERSION:
        raise ImportInvalid(f"export format version {parsed[0][1].get('version')!r} is not supported (need {VERSION})")
    if parsed[-1][1].get("kind") != "end":
        raise ImportInvalid("the file has no `end` record: it is incomplete")
    records: list[tuple[int, str, dict[str, Any]]] = []
    for n, r in parsed[1:-1]:
        kind = r.pop("kind")
        if kind not in COLUMNS:
            raise ImportInvalid(f"line {n}: unknown kind {kind!r}", extra={"line": n})
        records.append((n, kind, r))
    counts: dict[str, int] = {}
    for _, kind, _ in records:
        counts[kind] = counts.get(kind, 0) + 1
    expected = parsed[-1][1].get("counts") or {}
    if not isinstance(expected, dict) or any(counts.get(k, 0) != v for k, v in expected.items()):
        raise ImportInvalid(f"the file's records {counts} do not match its end record {expected}")
    return records


def _validated(records: list[tuple[int, str, dict[str, Any]]], importer: str) -> list[tuple[str, dict[str, Any]]]:
    """Each record through its write model, then the references between them; as the column values
    to insert. Rows are the importer's: the file's `created_by` is not kept."""
    out: list[tuple[str, dict[str, Any]]] = []
    models: list[tuple[int, str, Any]] = []
    for n, kind, r in records:
        try:
            model = RECORDS[kind].model_validate(r)
        except ValidationError as exc:
            err = as_error(exc, prefix=f"line {n}: {kind}")
            if isinstance(err, SecretDetected):
                err.extra["line"] = n
                raise err from None
            raise ImportInvalid(err.detail, extra={"line": n, "field": err.extra.get("field")}) from None
        models.append((n, kind, model))
    _check_references(models)
    for _, kind, model in models:
        values = model.model_dump(mode="json", exclude_unset=True, exclude_none=True)
        if kind == "event" and "timestamp" in values:
            values["occurred_at"] = values.pop("timestamp")
        if kind == "memory":
            values["content_hash"] = content_hash(model.content)
        if "created_by" in COLUMNS[kind]:
            values["created_by"] = importer
        out.append((kind, values))
    return out


def _check_references(models: list[tuple[int, str, Any]]) -> None:
    """Ids unique per kind, every reference to a record of the file, and no two records the database
    would hold as the same (an entity name, a current memory key): a file error, not a clash."""
    ids: dict[str, set[str]] = {kind: set() for kind in COLUMNS}
    for n, kind, m in models:
        field = KEPT_KEYS.get(kind, "id")
        key = str(getattr(m, field))
        if key in ids[kind]:
            raise ImportInvalid(f"line {n}: a second {kind} with {field} {key}", extra={"line": n, "field": field})
        ids[kind].add(key)
    open_pairs: set[frozenset[str]] = set()
    names: set[tuple[str, str]] = set()
    current_keys: set[tuple[str, str | None, str, str]] = set()
    for n, kind, m in models:
        refs: list[tuple[str, str, Any]] = []
        if kind == "relation":
            refs = [("source_id", "entity", m.source_id), ("target_id", "entity", m.target_id)]
        elif kind == "memory":
            refs = [("entity_ids", "entity", e) for e in m.entity_ids]
            refs += [("source_event_ids", "event", e) for e in m.source_event_ids]
            refs += [(f, "memory", getattr(m, f)) for f in ("superseded_by", "supersedes") if getattr(m, f)]
        elif kind == "contradiction":
            refs = [(f, "memory", getattr(m, f)) for f in ("memory_id", "other_id")]
        elif kind == "observation":
            refs = [("session_id", "session", m.session_id)]
        for field, target, ref in refs:
            if str(ref) not in ids[target]:
                raise ImportInvalid(
                    f"line {n}: {kind}.{field} names {target} {ref}, which is not in the file",
                    extra={"line": n, "field": field},
                )
        if kind == "entity":
            name = (m.type.value, m.name.lower())
            if name in names:
                raise ImportInvalid(f"line {n}: a second {m.type.value} named {m.name!r}", extra={"line": n})
            names.add(name)
        if kind == "memory" and m.key is not None and m.superseded_at is None:
            owner = m.session_id if m.scope == "session" else m.user_id if m.scope == "user" else ""
            current = (m.scope.value, owner, m.type.value, m.key)
            if current in current_keys:
                raise ImportInvalid(f"line {n}: a second current memory with key {m.key!r}", extra={"line": n})
            current_keys.add(current)
        if kind == "contradiction" and m.state == "open":
            pair = frozenset((str(m.memory_id), str(m.other_id)))
            if pair in open_pairs:
                raise ImportInvalid(f"line {n}: a second open contradiction of one pair", extra={"line": n})
            open_pairs.add(pair)


def _constraint(exc: DBAPIError) -> str:
    diag = getattr(exc.orig, "diag", None)
    return getattr(diag, "constraint_name", None) or getattr(diag, "message_primary", None) or type(exc.orig).__name__


async def _restore(
    s: AsyncSession,
    tenant_id: uuid.UUID,
    namespace_id: uuid.UUID,
    records: list[tuple[str, dict[str, Any]]],
    vectors: dict[int, list[float]],
) -> dict[str, int]:
    new_id: dict[str, uuid.UUID] = {}

    def remap(old: Any) -> uuid.UUID | None:
        if old is None:
            return None
        return new_id.setdefault(str(old), uuid.uuid4())

    counts: dict[str, int] = dict.fromkeys(COLUMNS, 0)
    rows: list[tuple[str, dict[str, Any]]] = []
    steps: list[dict[str, Any]] = []
    links: list[dict[str, Any]] = []
    history: list[dict[str, Any]] = []
    for i, (kind, r) in enumerate(records):
        counts[kind] += 1
        values = {c: _column_value(c, r[c]) for c in COLUMNS[kind] if c in r}
        if kind not in KEPT_KEYS:
            values["id"] = remap(r["id"])
        if kind == "relation":
            values["source_id"], values["target_id"] = remap(r["source_id"]), remap(r["target_id"])
        if kind == "memory":
            values["superseded_by"] = remap(r.get("superseded_by"))
            values["supersedes"] = remap(r.get("supersedes"))
            values["source_event_ids"] = [remap(e) for e in r.get("source_event_ids") or []]
        if kind == "contradiction":
            for ref in ("memory_id", "other_id", "kept_id"):
                values[ref] = remap(r.get(ref))
        if kind in ("memory", "trace"):
            values["embedding"] = vectors[i]
        rows.append((kind, {"tenant_id": tenant_id, "namespace_id": namespace_id, **values}))
        if kind == "memory":
            links += [
                {"tenant_id": tenant_id, "memory_id": values["id"], "entity_id": remap(e)}
                for e in r.get("entity_ids") or []
            ]
            history += [
                {
                    "tenant_id": tenant_id,
                    "memory_id": values["id"],
                    "action": h["action"],
                    "actor": h["actor"],
                    "at": _column_value("at", h["at"]),
                    "changed_fields": h.get("changed_fields") or [],
                    "snapshot": _remap_snapshot(h.get("snapshot") or {}, remap),
                }
                for h in r.get("history") or []
            ]
        if kind == "trace":
            for st in r.get("steps") or []:
                step = {c: _column_value(c, st.get(c)) for c in repo.STEP_COLUMNS}
                step["at"] = step["at"] or values.get("started_at") or datetime.now(UTC)
                steps.append({"tenant_id": tenant_id, "trace_id": values["id"], **step})
    # In the file's order, a run of one kind at a time: a reference to an earlier record of
    # another kind (a relation's entities) is met as it was when each row went in alone.
    for kind, run in groupby(rows, key=itemgetter(0)):
        await repo.insert_records(s, kind, [row for _, row in run])
    await repo.insert_steps(s, steps)
    await repo.insert_links(s, links)
    await repo.insert_history(s, history)
    return counts


def _remap_snapshot(snapshot: dict[str, Any], remap: Any) -> dict[str, Any]:
    """A history snapshot names other versions by id; those ids are new in the target namespace."""
    out = dict(snapshot)
    for field in ("superseded_by", "supersedes"):
        if out.get(field):
            out[field] = str(remap(out[field]))
    return out


TIMESTAMPS = {
    "created_at",
    "updated_at",
    "started_at",
    "last_event_at",
    "occurred_at",
    "recorded_at",
    "valid_from",
    "valid_to",
    "superseded_at",
    "last_accessed_at",
    "completed_at",
    "resolved_at",
    "at",
}


def _column_value(col: str, value: Any) -> Any:
    """A checked record's JSON value as its column takes it."""
    if col in JSON_OBJECTS:
        return {} if value is None else value
    if col in TIMESTAMPS and isinstance(value, str):
        return datetime.fromisoformat(value)
    return value
