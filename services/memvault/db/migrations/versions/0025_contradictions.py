"""Contradictions between memories (issue 28, part 3): placeholder, filled in by the change that needs it.

Revision ID: 0025
Revises: 0024
Create Date: 2026-12-04
"""

from __future__ import annotations

revision = "0025"
down_revision = "0024"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
