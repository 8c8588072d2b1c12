"""What a search reads before its statement, in one round trip: the namespace by its name, the
model probe, the query's words and the entities it names."""

from __future__ import annotations

import re
import uuid
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any

from sqlalchemy import DateTime, Text, any_, bindparam, cast, false, func, literal, null, or_, select, union_all
from sqlalchemy.dialects.postgresql import ARRAY
from sqlalchemy.dialects.postgresql import UUID as PG_UUID
from sqlalchemy.ext.asyncio import AsyncSession

from memvault.entities.models import Entity, Relation
from memvault.entities.relations_repository import valid_at_condition
from memvault.maintenance import repository as maintenance_repo
from memvault.namespaces.models import Namespace
from memvault.retrieval.lexical import lexemes_of
from memvault.retrieval.plan import NamedEntities


def query_grams(query: str, longest: int = 4) -> list[str]:
    """Every run of one to ``longest`` words of the query, lower-cased, punctuation as spaces: the
    strings an entity name or alias is compared with."""
    words = re.sub(r"[^\w]+", " ", query.lower()).split()
    return sorted({" ".join(words[i : i + n]) for n in range(1, longest + 1) for i in range(len(words) - n + 1)})


def _normalised_name(col: Any) -> Any:
    return func.btrim(func.regexp_replace(func.lower(col), r"[^[:alnum:]_]+", " ", "g"))


def _entity_rows(tenant_id: Any, namespace_id: Any, grams: Any, at: Any) -> Any:
    """The entities said (whose name or an alias is one of ``grams``) and the relations touching
    them: a row per entity with its name, then a row per relation with its two ends and no name.
    ``namespace_id`` may be the column of an enclosing query's namespaces row."""
    alias = func.unnest(Entity.aliases).column_valued("alias")
    said = (
        select(Entity.id, Entity.name)
        .where(
            Entity.tenant_id == tenant_id,
            Entity.namespace_id == namespace_id,
            or_(
                _normalised_name(Entity.name) == any_(grams),
                select(literal(1)).where(_normalised_name(alias) == any_(grams)).exists(),
            ),
        )
        .correlate(Namespace)
        .subquery("said")
    )
    touching = select(said.c.id)
    return union_all(
        select(said.c.id, said.c.name, cast(literal(None), PG_UUID).label("other")),
        select(Relation.source_id, cast(literal(None), Text), Relation.target_id)
        .where(
            Relation.tenant_id == tenant_id,
            Relation.namespace_id == namespace_id,
            or_(Relation.source_id.in_(touching), Relation.target_id.in_(touching)),
            valid_at_condition(at),
        )
        .correlate(Namespace),
    )


def _named_entities(rows: list[list[Any]]) -> NamedEntities:
    """NamedEntities from ``_entity_rows``' rows as JSON arrays: [id, name, other], ids as text."""
    found = [(uuid.UUID(i), name) for i, name, _ in rows if name is not None]
    named = tuple(i for i, _ in found)
    if not named:
        return NamedEntities()
    ends = {uuid.UUID(e) for i, name, other in rows if name is None for e in (i, other)}
    return NamedEntities(named=named, related=tuple(sorted(ends - set(named))), names=tuple(n for _, n in found))


@dataclass(frozen=True)
class Preamble:
    """What a search reads before its statement, in one round trip."""

    namespace_id: uuid.UUID
    settings: dict[str, Any]  # the namespace's own settings
    other_model: bool  # some live memory has no vector of the query's model
    lexemes: list[str]  # the query's words as the full-text index has them
    entities: NamedEntities


@lru_cache(maxsize=8)
def _preamble_statement(dense: bool, bm25: bool, graph: bool) -> Any:
    """The namespace's id and settings by its name, the model probe, the query's lexemes and the
    entities it names as JSON, one statement built once per kind (parameters: tenant_id,
    namespace, model_id, query, grams, at)."""
    tenant_id = bindparam("tenant_id", type_=PG_UUID(as_uuid=True))
    entities: Any = null()
    if graph:
        at = bindparam("at", type_=DateTime(timezone=True))
        rows = _entity_rows(tenant_id, Namespace.id, bindparam("grams", type_=ARRAY(Text)), at).subquery("named")
        entities = select(func.json_agg(func.json_build_array(rows.c.id, rows.c.name, rows.c.other))).scalar_subquery()
    return select(
        Namespace.id,
        Namespace.settings,
        maintenance_repo.other_model_probe(Namespace.id, bindparam("model_id", type_=Text)) if dense else false(),
        lexemes_of(bindparam("query", type_=Text)) if bm25 else null(),
        entities,
    ).where(Namespace.tenant_id == tenant_id, Namespace.name == bindparam("namespace", type_=Text))


async def search_preamble(
    s: AsyncSession,
    *,
    tenant_id: uuid.UUID,
    namespace: str,
    query: str,
    model_id: str | None,
    bm25: bool,
    graph: bool,
    at: datetime,
) -> Preamble | None:
    """The namespace named ``namespace`` (None if there is none) with what the search needs of it:
    whether memories of another model than ``model_id`` hide from the dense channel (not asked
    without a model), the query's lexemes (with ``bm25``), and with ``graph`` the namespace's
    entities the query names as whole words (name or alias) and those related to them by a
    relation valid at ``at``."""
    grams = query_grams(query) if graph else []
    stmt = _preamble_statement(model_id is not None, bm25, bool(grams))
    params = {"tenant_id": tenant_id, "namespace": namespace, "model_id": model_id, "query": query}
    # On the connection, not through the ORM: the row is plain values, and every search pays
    # for the ORM's execution path (docs/benchmarks.md).
    connection = await s.connection()
    row = (await connection.execute(stmt, {**params, "grams": grams, "at": at})).one_or_none()
    if row is None:
        return None
    namespace_id, settings, other_model, lexemes, entities = row
    return Preamble(
        namespace_id=namespace_id,
        settings=settings or {},
        other_model=bool(other_model),
        lexemes=list(lexemes or []),
        entities=_named_entities(entities or []),
    )
