"""Roles of a tenant's members and the key scopes each stands for. The database derives
`oauth_users.scopes` from the role with the same table (migrations 0023, 0028), so they cannot differ."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Literal

Role = Literal["owner", "admin", "member", "viewer"]
ROLES: tuple[Role, ...] = ("owner", "admin", "member", "viewer")
ROLE_SCOPES: dict[str, tuple[str, ...]] = {
    "viewer": ("read",),
    "member": ("read", "write"),
    "admin": ("read", "write", "admin", "act_as"),
    "owner": ("read", "write", "admin", "act_as"),
}
# Who may manage members at all.
MANAGERS = frozenset({"owner", "admin"})


def role_of_scopes(scopes: Iterable[str]) -> Role:
    """The role that keeps what a user made with scopes (before roles existed) could do."""
    return "member" if "write" in set(scopes) else "viewer"
