"""The search's candidate functions that return each row's tenant with its id.

memvault_word_best, memvault_word_top and memvault_nearest return ids alone, so the search
statement read each candidate's row under both tenants a search sees (its own and the system
tenant's shared rows): two primary-key probes for every candidate, of which one found nothing.
memvault_word_best_keyed, memvault_word_top_keyed and memvault_nearest_keyed return the tenant
first, then what the others return, from the same bodies (0014's, 0012's and 0011's) with the same
grants and row estimates (0015): each candidate's row is then one probe by its full key
(retrieval/hybrid.py, ``_by_key``).

New names rather than new result types for the old ones: a release's migration must leave the
schema usable by the release before it, whose replicas keep calling the old functions until they
are replaced (docs/scaling.md). A later migration drops those.

Revision ID: 0016
Revises: 0015
Create Date: 2026-12-02
"""

from __future__ import annotations

from alembic import context, op

revision = "0016"
down_revision = "0015"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
K1, B = 1.2, 0.75
UNROLLED = 16
IDF_SUM = (
    f"(CASE WHEN cardinality(p_lexemes) <= {UNROLLED} THEN "
    + " + ".join(f"CASE WHEN m.tsv @@ p_lexemes[{i}] THEN p_idf[{i}] ELSE 0 END" for i in range(1, UNROLLED + 1))
    + " ELSE (SELECT coalesce(sum(t.idf), 0) FROM unnest(p_lexemes, p_idf) AS t(lexeme, idf)"
    " WHERE m.tsv @@ t.lexeme) END)"
)
SCOPE_CHAIN = f"""((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))"""
LIVE = "m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')"
DEFINER = "LANGUAGE sql STABLE SECURITY DEFINER"
WORD_BEST = "memvault_word_best(uuid, text[], text[], tsquery[], float8[], float8, integer)"
WORD_TOP = "memvault_word_top(uuid, tsquery, tsquery[], float8[], float8, boolean, integer)"
NEAREST = "memvault_nearest(uuid, vector, text, integer)"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _length(doc_len: str) -> str:
    return f"{K1 + 1} / (1 + {K1} * ({1 - B} + {B} * {doc_len} / greatest(p_avg_len, 1)))"


def _functions(schema: str, path: str) -> dict[str, tuple[str, str, str, int]]:
    """The old function's signature -> (parameters, result columns, attributes and body, rows) of
    its keyed twin: the old body with the row's tenant returned first."""
    word_best = f"""{DEFINER}
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $$
            WITH keys (tenant_id, owner_key) AS (
                VALUES ({CURRENT_TENANT}, p_namespace),
                       ({CURRENT_TENANT}, {CURRENT_TENANT}),
                       ({SYSTEM_TENANT}, {SYSTEM_TENANT})
            ),
            found AS (
                SELECT t.tenant_id, t.memory_id, sum(q.idf) * {_length("min(t.doc_len)")} AS picked
                FROM unnest(p_words, p_idf) AS q(lexeme, idf)
                CROSS JOIN keys
                CROSS JOIN LATERAL (
                    SELECT t.tenant_id, t.memory_id, t.doc_len FROM {schema}.memory_terms t
                    WHERE t.tenant_id = keys.tenant_id AND t.owner_key = keys.owner_key AND t.lexeme = q.lexeme
                    OFFSET 0
                ) t
                WHERE q.lexeme = ANY (p_picking)
                GROUP BY t.tenant_id, t.memory_id
                ORDER BY picked DESC, t.memory_id
                LIMIT 4 * p_limit
            )
            SELECT m.tenant_id, m.id, m.score
            FROM found
            CROSS JOIN LATERAL (
                SELECT m.id, m.tenant_id, m.namespace_id, m.scope, m.superseded_at, m.state,
                       {IDF_SUM} * {_length("length(m.tsv)")} AS score
                FROM {schema}.memories m
                WHERE m.tenant_id = found.tenant_id AND m.id = found.memory_id
                OFFSET 0
            ) m
            WHERE {SCOPE_CHAIN}
              AND {LIVE}
            ORDER BY m.score DESC, m.id
            LIMIT p_limit
        $$"""
    word_top = f"""{DEFINER}
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $$
            SELECT m.tenant_id, m.id, {IDF_SUM} * {_length("length(m.tsv)")} AS score
            FROM {schema}.memories m
            WHERE m.tsv @@ p_query
              AND {SCOPE_CHAIN}
              AND (NOT p_live OR ({LIVE}))
            ORDER BY score DESC, m.id
            LIMIT p_limit
        $$"""
    # Runs as its caller: row-level security applies as it does inline (0011).
    nearest = f"""LANGUAGE sql STABLE
        SET search_path = {path}
        SET plan_cache_mode = force_custom_plan
        AS $$
            SELECT m.tenant_id, m.id, m.embedding <=> p_vector AS dist
            FROM {schema}.memories m
            WHERE {SCOPE_CHAIN}
              AND {LIVE}
              AND m.embedding_model = p_model AND m.embedding IS NOT NULL
            ORDER BY dist
            LIMIT p_limit
        $$"""
    return {
        WORD_BEST: (
            "p_namespace uuid, p_picking text[], p_words text[], p_lexemes tsquery[], p_idf float8[], "
            "p_avg_len float8, p_limit integer",
            "tenant_id uuid, id uuid, score float8",
            word_best,
            100,
        ),
        WORD_TOP: (
            "p_namespace uuid, p_query tsquery, p_lexemes tsquery[], p_idf float8[], p_avg_len float8, "
            "p_live boolean, p_limit integer",
            "tenant_id uuid, id uuid, score float8",
            word_top,
            100,
        ),
        NEAREST: (
            "p_namespace uuid, p_vector vector, p_model text, p_limit integer",
            "tenant_id uuid, id uuid, dist float8",
            nearest,
            50,
        ),
    }


def _keyed(signature: str) -> str:
    """The keyed function's signature: the same name with ``_keyed``, the same parameters."""
    name, parameters = signature.split("(", 1)
    return f"{name}_keyed({parameters}"


def _schema_and_path() -> tuple[str, str]:
    """The schema the functions read, and the search path they run with."""
    bind = op.get_bind()
    schema = bind.exec_driver_sql("SELECT current_schema()").scalar_one()
    # pgvector's type and operators may live in a schema of their own (a managed database's).
    vector = bind.exec_driver_sql(
        "SELECT extnamespace::regnamespace::text FROM pg_extension WHERE extname = 'vector'"
    ).scalar_one()
    return schema, ", ".join(dict.fromkeys(["pg_catalog", schema, vector]))


def upgrade() -> None:
    role = _app_role()
    schema, path = _schema_and_path()
    for signature, (parameters, columns, body, rows) in _functions(schema, path).items():
        keyed = _keyed(signature)
        name = keyed.split("(")[0]
        op.execute(f"CREATE FUNCTION {name}({parameters}) RETURNS TABLE ({columns}) ROWS {rows} {body}")
        op.execute(f"REVOKE ALL ON FUNCTION {keyed} FROM PUBLIC")
        op.execute(f"GRANT EXECUTE ON FUNCTION {keyed} TO {role}")


def downgrade() -> None:
    for signature in (WORD_BEST, WORD_TOP, NEAREST):
        op.execute(f"DROP FUNCTION IF EXISTS {_keyed(signature)}")
