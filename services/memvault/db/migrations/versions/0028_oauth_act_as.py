"""Owners and admins may grant an OAuth client `act_as` (issue 28).

`oauth_users.scopes`, generated from the role since 0023, is the ceiling of what a person may
grant a client. Owners and admins now hold `act_as` in it: their clients may name any member by
`user_id` (principal.py ACT_AS), as an API key does. Members and viewers stay bound to themselves.

The check 0005 put on `oauth_users.scopes` (`read`, `write` only) went with the column in 0023;
the generated expression is the only limit, and grants, codes and tokens carry no check on their
scopes (a grant holds at most what the consent took from this column). PostgreSQL 15 cannot
change a generated expression in place, so the column is made again, as 0023 did.

Revision ID: 0028
Revises: 0027
Create Date: 2026-12-04
"""

from __future__ import annotations

from alembic import op

revision = "0028"
down_revision = "0027"
branch_labels = None
depends_on = None

OLD_SCOPES_OF_ROLE = (
    "CASE role WHEN 'viewer' THEN ARRAY['read']::text[] WHEN 'member' THEN ARRAY['read', 'write']::text[] "
    "ELSE ARRAY['read', 'write', 'admin']::text[] END"
)
SCOPES_OF_ROLE = (
    "CASE role WHEN 'viewer' THEN ARRAY['read']::text[] WHEN 'member' THEN ARRAY['read', 'write']::text[] "
    "ELSE ARRAY['read', 'write', 'admin', 'act_as']::text[] END"
)


def _scopes(expression: str) -> None:
    op.execute(
        f"""
        ALTER TABLE oauth_users
            DROP COLUMN scopes,
            ADD COLUMN scopes text[] GENERATED ALWAYS AS ({expression}) STORED
        """
    )


def upgrade() -> None:
    _scopes(SCOPES_OF_ROLE)


def downgrade() -> None:
    # Grants that hold act_as may stay: the older code drops scopes it does not know from every
    # token it issues or reads.
    _scopes(OLD_SCOPES_OF_ROLE)
