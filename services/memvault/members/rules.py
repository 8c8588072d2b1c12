"""Who may change whom: the owner rules every door's member change passes through (members,
invitations, tenant users, disabling), so none of them can leave a tenant without an owner or let
an admin make an owner."""

from __future__ import annotations

import uuid

from sqlalchemy.ext.asyncio import AsyncSession

from memvault.errors import Conflict, Forbidden, NotFound
from memvault.members.roles import MANAGERS
from memvault.oauth import repository as oauth_repo
from memvault.oauth.models import OAuthUser
from memvault.principal import Principal


class OwnerRequired(Forbidden):
    code = "owner_required"
    title = "Only an owner may do this"


class LastOwner(Conflict):
    code = "last_owner"
    title = "The last owner stays"


class MemberNotFound(NotFound):
    code = "member_not_found"
    title = "Member not found"


async def acting_role(s: AsyncSession, p: Principal) -> str:
    """The role ``p`` acts with when it manages members. A signed-in member acts with their own
    role (owners and admins only). An unrestricted admin API key counts as an owner: it can mint
    admin keys already, so holding anything less would be no protection; a namespace-limited one
    as an admin."""
    p.require("admin")
    if p.subject.startswith("user:"):
        try:
            user = await oauth_repo.get_user(s, p.tenant_id, uuid.UUID(p.subject.removeprefix("user:")))
        except ValueError:
            user = None
        if user is None or user.disabled_at is not None or user.role not in MANAGERS:
            raise Forbidden("Only owners and admins manage members.")
        return user.role
    return "owner" if p.unrestricted else "admin"


def may_assign(p: Principal, actor: str, role: str) -> None:
    """Whether ``p`` (acting as ``actor``) may give someone ``role``."""
    if role == "owner" and actor != "owner":
        raise OwnerRequired("Only an owner can make someone an owner.")
    if role in MANAGERS and not p.unrestricted:
        raise Forbidden("A key limited to some namespaces can only make members and viewers.")


async def may_change(s: AsyncSession, p: Principal, actor: str, target: OAuthUser, new_role: str | None) -> None:
    """Whether ``p`` may change ``target`` to ``new_role`` (None: remove or disable them). Locks
    the owners first, so two changes at once cannot both take away the last owner."""
    owners = await oauth_repo.lock_owners(s, p.tenant_id)
    if target.role == "owner" and actor != "owner":
        raise OwnerRequired("Only an owner can change or remove an owner.")
    if target.role in MANAGERS and not p.unrestricted:
        raise Forbidden("A key limited to some namespaces cannot change owners or admins.")
    if target.role == "owner" and new_role != "owner" and owners == [target.id]:
        raise LastOwner(
            "This is the organisation's last owner: make another member an owner first.",
            extra={"member_id": str(target.id)},
        )
