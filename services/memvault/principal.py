"""Who a request runs as. Every facade method takes one explicitly; there is no ambient tenant."""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field
from typing import Literal

from memvault.errors import Forbidden
from memvault.metering.tally import note_namespace

Scope = Literal["read", "write", "admin"]
SCOPES: tuple[Scope, ...] = ("read", "write", "admin")
# Writes system-scope memories, which every tenant reads. Granted only from the CLI, never by
# another key, so no tenant can promote itself to speak to all tenants.
OPERATOR = "operator"
# Acts for users other than the signed-in one (see Principal.bind_user). An OAuth grant signed in by
# a person lacks it, so its calls stay that person's; a key bound to no user never needs it.
ACT_AS = "act_as"
# The reserved tenant that holds system-scope memories (created by migration 0002).
SYSTEM_TENANT_ID = uuid.UUID("00000000-0000-0000-0000-000000000000")

# A scope implies the ones below it: admin can write, write can read.
_IMPLIED: dict[str, set[str]] = {
    "read": {"read"},
    "write": {"read", "write"},
    "admin": {"read", "write", "admin"},
    OPERATOR: {OPERATOR},
    ACT_AS: {ACT_AS},
}


class UserMismatch(Forbidden):
    code = "user_mismatch"
    title = "Another user"


@dataclass(frozen=True)
class Principal:
    tenant_id: uuid.UUID
    scopes: frozenset[str]
    subject: str
    # None means every namespace of the tenant.
    namespaces: frozenset[str] | None = None
    default_namespace: str | None = None
    key_id: uuid.UUID | None = field(default=None, compare=False)
    # The OAuth grant an access token stands for (MCP clients signed in by a user).
    grant_id: uuid.UUID | None = field(default=None, compare=False)
    # The person who signed in for the grant: every memory call acts as them (bind_user). None for
    # API keys, which serve many users by the `user_id` each call names, and for jobs.
    user_id: str | None = field(default=None, compare=False)

    @classmethod
    def system(cls, tenant_id: uuid.UUID, subject: str = "system", *, operator: bool = False) -> Principal:
        """For jobs and the CLI: full rights inside one tenant, never across tenants. Only the CLI
        passes ``operator``: the machine's owner may mint operator keys."""
        scopes = {*SCOPES, OPERATOR} if operator else set(SCOPES)
        return cls(tenant_id=tenant_id, scopes=frozenset(scopes), subject=subject)

    @property
    def credential(self) -> str | None:
        """The door credential this principal came in with (an API key or an OAuth grant), which
        rate limits count against; None for jobs and the CLI (Principal.system), never limited."""
        if self.key_id is not None:
            return f"key:{self.key_id}"
        if self.grant_id is not None:
            return f"grant:{self.grant_id}"
        return None

    @property
    def unrestricted(self) -> bool:
        """Reaches every namespace of its tenant (needed to write tenant-wide memories)."""
        return self.namespaces is None

    def bind_user(self, requested: str | None) -> str | None:
        """The user a call acts for. A principal signed in by a person acts as that person: no
        `user_id` means theirs, and another one is refused unless it may act for others (ACT_AS).
        A principal bound to no user (an API key, a job) acts for whichever user the call names."""
        if self.user_id is None or requested == self.user_id or requested is None:
            return requested or self.user_id
        if self.has(ACT_AS):
            return requested
        raise UserMismatch(
            f"Signed in as user '{self.user_id}': this credential cannot act for user '{requested}'. "
            "Leave user_id out (it defaults to you).",
            extra={"field": "user_id", "acting_as_user": self.user_id},
        )

    @property
    def reader(self) -> str | None:
        """The user whose things alone this principal reaches by id (another user's are not
        there for it); None when it reaches every user's (an API key, a job, ACT_AS)."""
        return None if self.user_id is None or self.has(ACT_AS) else self.user_id

    def sees_owner(self, owner: str | None) -> bool:
        """Whether a thing owned by user ``owner`` (None: by no user) is there for this principal."""
        return owner is None or self.reader is None or owner == self.reader

    def has(self, scope: str) -> bool:
        return any(scope in _IMPLIED[s] for s in self.scopes if s in _IMPLIED)

    def can_access(self, namespace: str) -> bool:
        return self.namespaces is None or namespace in self.namespaces

    def covers(self, namespaces: list[str] | None) -> bool:
        """Whether another key's namespaces (None: all of them) lie within this principal's reach."""
        return self.namespaces is None or (namespaces is not None and set(namespaces) <= self.namespaces)

    def require_reach(self, scope: str, namespaces: list[str] | frozenset[str] | None) -> None:
        """The rule of every act that mints, shows or ends a credential (an API key, a tenant user,
        an OAuth grant, a consent): a principal can never mint or reach more than it has. The act
        needs ``scope``, and whatever it concerns must reach only ``namespaces`` (None: all of the
        tenant's) that this principal reaches itself; only an unrestricted principal acts on
        tenant-wide things. Listings filter with ``covers`` instead, so they show what this allows."""
        self.require(scope)
        if not self.covers(None if namespaces is None else sorted(namespaces)):
            raise Forbidden(
                "This key is limited to some namespaces; it can only act on what lies within them.",
                extra={"allowed_namespaces": sorted(self.namespaces or ())},
            )

    def require(self, scope: str, namespace: str | None = None) -> None:
        if not self.has(scope):
            raise Forbidden(f"This key lacks the '{scope}' scope.", extra={"required_scope": scope})
        if namespace is not None and not self.can_access(namespace):
            # Same answer as a namespace that does not exist would be a lie to an allowed key holder;
            # a limited key is told plainly that it is limited.
            raise Forbidden(f"This key is not allowed to use namespace '{namespace}'.")
        if namespace is not None:
            # Every call on a namespace asks here first: its use is metered to that namespace.
            note_namespace(namespace)
