"""API keys: expiry and rotation (issue 23; filled by the keys work).

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-03
"""

from __future__ import annotations

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
