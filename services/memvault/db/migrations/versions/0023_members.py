"""Members, roles, invitations and sign-up (issue 23; filled by the accounts work).

Revision ID: 0023
Revises: 0022
Create Date: 2026-12-03
"""

from __future__ import annotations

revision = "0023"
down_revision = "0022"
branch_labels = None
depends_on = None


def upgrade() -> None:
    pass


def downgrade() -> None:
    pass
