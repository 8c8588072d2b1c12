"""The search statement's row functions say how many rows they return.

PostgreSQL assumes 1,000 rows from a set-returning function unless told otherwise. The search
statement joins what memvault_word_best, memvault_word_top, memvault_nearest and
memvault_word_scores return (50 to 200 rows for a search of ten) to memories by primary key;
expecting 1,000 of each, and several hundred candidates after them, the planner read a small
tenant's memories whole instead (a bitmap scan of the namespace for each channel, and a sequential
scan of the table for the candidates' signals, each row paying the row-level security check): on
LoCoMo's ten conversations (5,882 memories in one table) the statement took 32 ms at p50, where
18 ms do (docs/benchmarks.md, "Small namespaces"). With these estimates, and the search transaction's
random_page_cost for data in memory (retrieval/hybrid.py, search_settings), each row is one key
lookup.

Revision ID: 0015
Revises: 0014
Create Date: 2026-12-01
"""

from __future__ import annotations

from alembic import op

revision = "0015"
down_revision = "0014"
branch_labels = None
depends_on = None

# What each returns for a default search (limit 10: 50 candidates per channel, twice that read
# from the word index first): the order of magnitude is what the planner needs.
ROWS = {
    "memvault_word_best(uuid, text[], text[], tsquery[], float8[], float8, integer)": 100,
    "memvault_word_top(uuid, tsquery, tsquery[], float8[], float8, boolean, integer)": 100,
    "memvault_nearest(uuid, vector, text, integer)": 50,
    "memvault_word_scores(uuid[], tsquery[], float8[], float8)": 100,
}


def upgrade() -> None:
    for signature, rows in ROWS.items():
        op.execute(f"ALTER FUNCTION {signature} ROWS {rows}")


def downgrade() -> None:
    for signature in ROWS:
        op.execute(f"ALTER FUNCTION {signature} ROWS 1000")
