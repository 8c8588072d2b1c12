"""Usage metering (issue 23; filled by the metering work).

Revision ID: 0024
Revises: 0023
Create Date: 2026-12-03
"""

from __future__ import annotations

revision = "0024"
down_revision = "0023"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
