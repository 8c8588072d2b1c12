"""The lexical channel's own word index, kept per namespace: memory_terms.

memvault_word_top (0010, 0012) found a query's rare words with the full-text (GIN) index, which
spans every tenant, then read each matching row to score it: about 5 µs a row, 10-30 ms for a
question whose words match 2,000-6,000 of a 100,000-memory namespace, the largest part of a
search. memory_terms holds one row per word of every live memory, keyed by its tenant and where
the scope chain looks for it (the namespace, or the tenant or system for shared memories), so a
namespace's matches for a word are one range of the primary key, read from the index alone.

memvault_word_best uses it in two steps: the rows that contain a picking word, ranked on those
words (the sum of their idf, times the length factor), then the best ``4 * p_limit`` of them read
again and scored on every query word exactly as memvault_word_top scores them (common words,
those that pick no candidates, still add their idf). The second step can miss a row that only
common words would have lifted into the list; the list is cut at 4x its length for that reason
(docs/benchmarks.md measures what moves). Memories that are not live (superseded, archived,
forgotten) have no rows here; a search that reads them (knowledge_at, a state filter,
include_archived) keeps memvault_word_top.

memvault_word_counts counts a word's memories in the same index (the namespace's live ones).

Triggers keep memory_terms in step with memories in the same transaction: a statement-level one
for inserts (a batch of 500 memories is one INSERT here) and deletes (a cascade from a namespace
included), a row-level one for updates that change a memory's words, liveness or place (the WHEN
clause skips the rest, such as access counts). They run as the owner: the app role may only read
memory_terms, under the tenant policy of every tenant table.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import context, op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None

CURRENT_TENANT = "NULLIF(current_setting('app.tenant_id', true), '')::uuid"
SYSTEM_TENANT = "'00000000-0000-0000-0000-000000000000'::uuid"
K1, B = 1.2, 0.75
UNROLLED = 16
# memvault_word_top's score as migration 0012 left it, so both functions give a row one score.
IDF_SUM = (
    f"(CASE WHEN cardinality(p_lexemes) <= {UNROLLED} THEN "
    + " + ".join(f"CASE WHEN m.tsv @@ p_lexemes[{i}] THEN p_idf[{i}] ELSE 0 END" for i in range(1, UNROLLED + 1))
    + " ELSE (SELECT coalesce(sum(t.idf), 0) FROM unnest(p_lexemes, p_idf) AS t(lexeme, idf)"
    " WHERE m.tsv @@ t.lexeme) END)"
)


def _length(doc_len: str) -> str:
    return f"{K1 + 1} / (1 + {K1} * ({1 - B} + {B} * {doc_len} / greatest(p_avg_len, 1)))"


# Where the scope chain finds a memory (memvault_word_top's conditions): the system tenant for a
# system memory; its namespace; the tenant for a tenant-scope memory. NULL: no search does.
# memvault_word_best checks every row it returns against those conditions again.
KEY = f"""CASE
    WHEN {{m}}.scope = 'system' AND {{m}}.tenant_id = {SYSTEM_TENANT} THEN {{m}}.tenant_id
    WHEN {{m}}.namespace_id IS NOT NULL THEN {{m}}.namespace_id
    WHEN {{m}}.scope = 'tenant' THEN {{m}}.tenant_id
END"""
LIVE = "({m}.superseded_at IS NULL AND {m}.state IN ('tentative', 'stable'))"
WORD_BEST = "memvault_word_best(uuid, text[], text[], tsquery[], float8[], float8, integer)"


def _app_role() -> str:
    role = context.config.get_main_option("memvault.app_role") or "memvault_app"
    if not role.replace("_", "").isalnum():
        raise ValueError(f"unsafe role name {role!r}")
    return role


def _postings(rows: str, m: str) -> str:
    """The memory_terms rows of the live memories in ``rows`` (aliased ``m``)."""
    key = KEY.format(m=m)
    return f"""
        SELECT {m}.tenant_id, {key}, w.lexeme, {m}.id, length({m}.tsv)
        FROM {rows} {m}, unnest(tsvector_to_array({m}.tsv)) AS w(lexeme)
        WHERE {LIVE.format(m=m)} AND {key} IS NOT NULL"""


def _word_counts(schema: str, settings: str, hits: str) -> str:
    """memvault_word_counts: how many of the namespace's memories (``hits``, one row each for
    lexeme ``l``) contain each lexeme, up to p_cap."""
    return f"""
        CREATE OR REPLACE FUNCTION memvault_word_counts(p_namespace uuid, p_lexemes text[], p_cap integer)
        RETURNS TABLE (lexeme text, df integer)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        {settings}
        AS $$
            SELECT l, (SELECT count(*) FROM ({hits} LIMIT p_cap) hits)::integer
            FROM unnest(p_lexemes) l
        $$;
        """


def upgrade() -> None:
    role = _app_role()
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    op.execute(
        """
        CREATE TABLE memory_terms (
            tenant_id uuid NOT NULL,
            owner_key uuid NOT NULL,
            lexeme text NOT NULL,
            memory_id uuid NOT NULL,
            doc_len integer NOT NULL,
            CONSTRAINT pk_memory_terms PRIMARY KEY (tenant_id, owner_key, lexeme, memory_id) INCLUDE (doc_len)
        )
        """
    )
    # Written only by the triggers below, which run as the owner; readable by the app role under
    # the same tenant policy as every tenant table.
    op.execute("ALTER TABLE memory_terms ENABLE ROW LEVEL SECURITY")
    op.execute(f"CREATE POLICY tenant_isolation ON memory_terms USING (tenant_id = {CURRENT_TENANT})")
    op.execute(f"REVOKE ALL ON memory_terms FROM PUBLIC, {role}")
    op.execute(f"GRANT SELECT ON memory_terms TO {role}")
    op.execute(f"INSERT INTO memory_terms {_postings(f'{schema}.memories', 'm')}")

    header = f"""LANGUAGE plpgsql SECURITY DEFINER SET search_path = pg_catalog, {schema}"""
    op.execute(
        f"""
        CREATE FUNCTION memvault_terms_added() RETURNS trigger {header} AS $$
        BEGIN
            INSERT INTO memory_terms {_postings("added", "m")}
            ON CONFLICT DO NOTHING;
            RETURN NULL;
        END $$;
        """
    )
    op.execute(
        f"""
        CREATE FUNCTION memvault_terms_removed() RETURNS trigger {header} AS $$
        BEGIN
            DELETE FROM memory_terms t
            USING ({_postings("removed", "m")}) AS gone(tenant_id, owner_key, lexeme, memory_id, doc_len)
            WHERE t.tenant_id = gone.tenant_id AND t.owner_key = gone.owner_key AND t.lexeme = gone.lexeme
              AND t.memory_id = gone.memory_id;
            RETURN NULL;
        END $$;
        """
    )
    old_key, new_key = KEY.format(m="OLD"), KEY.format(m="NEW")
    op.execute(
        f"""
        CREATE FUNCTION memvault_terms_changed() RETURNS trigger {header} AS $$
        BEGIN
            IF {LIVE.format(m="OLD")} AND ({old_key}) IS NOT NULL THEN
                DELETE FROM memory_terms
                WHERE tenant_id = OLD.tenant_id AND owner_key = ({old_key})
                  AND lexeme = ANY (tsvector_to_array(OLD.tsv)) AND memory_id = OLD.id;
            END IF;
            IF {LIVE.format(m="NEW")} AND ({new_key}) IS NOT NULL THEN
                INSERT INTO memory_terms
                SELECT NEW.tenant_id, ({new_key}), w.lexeme, NEW.id, length(NEW.tsv)
                FROM unnest(tsvector_to_array(NEW.tsv)) AS w(lexeme)
                ON CONFLICT DO NOTHING;
            END IF;
            RETURN NULL;
        END $$;
        """
    )
    op.execute(
        """
        CREATE TRIGGER memories_terms_added AFTER INSERT ON memories
        REFERENCING NEW TABLE AS added FOR EACH STATEMENT EXECUTE FUNCTION memvault_terms_added()
        """
    )
    op.execute(
        """
        CREATE TRIGGER memories_terms_removed AFTER DELETE ON memories
        REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION memvault_terms_removed()
        """
    )
    op.execute(
        """
        CREATE TRIGGER memories_terms_changed AFTER UPDATE ON memories FOR EACH ROW
        WHEN (OLD.tsv IS DISTINCT FROM NEW.tsv
              OR OLD.state IS DISTINCT FROM NEW.state
              OR OLD.superseded_at IS DISTINCT FROM NEW.superseded_at
              OR OLD.namespace_id IS DISTINCT FROM NEW.namespace_id
              OR OLD.scope IS DISTINCT FROM NEW.scope
              OR OLD.tenant_id IS DISTINCT FROM NEW.tenant_id)
        EXECUTE FUNCTION memvault_terms_changed()
        """
    )
    for fn in ("memvault_terms_added()", "memvault_terms_removed()", "memvault_terms_changed()"):
        op.execute(f"REVOKE ALL ON FUNCTION {fn} FROM PUBLIC")

    # The live rows of the scope chain that contain a picking word (p_picking), the best p_limit
    # (NULL: all) by BM25 over every query word (p_words, p_lexemes and p_idf aligned).
    op.execute(
        f"""
        CREATE FUNCTION memvault_word_best(
            p_namespace uuid, p_picking text[], p_words text[], p_lexemes tsquery[], p_idf float8[],
            p_avg_len float8, p_limit integer
        ) RETURNS TABLE (id uuid, score float8)
        LANGUAGE sql STABLE SECURITY DEFINER
        SET search_path = pg_catalog, {schema}
        SET plan_cache_mode = force_custom_plan
        AS $$
            WITH keys (tenant_id, owner_key) AS (
                VALUES ({CURRENT_TENANT}, p_namespace),
                       ({CURRENT_TENANT}, {CURRENT_TENANT}),
                       ({SYSTEM_TENANT}, {SYSTEM_TENANT})
            ),
            found AS (
                SELECT t.memory_id, sum(q.idf) * {_length("min(t.doc_len)")} AS picked
                FROM unnest(p_words, p_idf) AS q(lexeme, idf)
                JOIN keys ON true
                JOIN {schema}.memory_terms t
                  ON t.tenant_id = keys.tenant_id AND t.owner_key = keys.owner_key AND t.lexeme = q.lexeme
                WHERE q.lexeme = ANY (p_picking)
                GROUP BY t.memory_id
                ORDER BY picked DESC, t.memory_id
                LIMIT 4 * p_limit
            )
            SELECT m.id, {IDF_SUM} * {_length("length(m.tsv)")} AS score
            FROM found
            JOIN {schema}.memories m
              ON m.id = found.memory_id AND m.tenant_id IN ({CURRENT_TENANT}, {SYSTEM_TENANT})
            WHERE ((m.tenant_id = {CURRENT_TENANT}
                    AND (m.namespace_id = p_namespace OR (m.namespace_id IS NULL AND m.scope = 'tenant')))
                   OR (m.tenant_id = {SYSTEM_TENANT} AND m.scope = 'system'))
              AND m.superseded_at IS NULL AND m.state IN ('tentative', 'stable')
            ORDER BY score DESC, m.id
            LIMIT p_limit
        $$;
        """
    )
    op.execute(f"REVOKE ALL ON FUNCTION {WORD_BEST} FROM PUBLIC")
    op.execute(f"GRANT EXECUTE ON FUNCTION {WORD_BEST} TO {role}")
    # Document frequencies from the same index: a count of one key range, read from the index
    # alone, where the full-text index visited each matching row (about 10 ms for a new word).
    # Live memories only, as the index holds them.
    op.execute(
        _word_counts(
            schema,
            "SET plan_cache_mode = force_custom_plan",
            f"""SELECT 1 FROM {schema}.memory_terms t
                WHERE t.tenant_id = {CURRENT_TENANT} AND t.owner_key = p_namespace AND t.lexeme = l""",
        )
    )


def downgrade() -> None:
    schema = op.get_bind().exec_driver_sql("SELECT current_schema()").scalar_one()
    # memvault_word_counts as migrations 0008 and 0011 left it, on the full-text index.
    op.execute(
        _word_counts(
            schema,
            "SET enable_seqscan = off SET plan_cache_mode = force_custom_plan",
            f"""SELECT 1 FROM {schema}.memories m
                WHERE m.tsv @@ quote_literal(l)::tsquery
                  AND m.tenant_id = {CURRENT_TENANT} AND m.namespace_id = p_namespace
                  AND m.superseded_at IS NULL""",
        )
    )
    op.execute(f"DROP FUNCTION IF EXISTS {WORD_BEST}")
    for trigger in ("memories_terms_added", "memories_terms_removed", "memories_terms_changed"):
        op.execute(f"DROP TRIGGER IF EXISTS {trigger} ON memories")
    for fn in ("memvault_terms_added()", "memvault_terms_removed()", "memvault_terms_changed()"):
        op.execute(f"DROP FUNCTION IF EXISTS {fn}")
    op.execute("DROP TABLE IF EXISTS memory_terms")
