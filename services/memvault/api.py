"""NamespaceAPI: the one entry point that REST, MCP, jobs and the CLI call.

Every method takes the caller's Principal first, checks its scope, opens a tenant transaction
(RLS-bound), does the work through the capability repositories, records an audit entry for
changes, and returns API schemas. Nothing else opens tenant transactions.
"""

from __future__ import annotations

import logging
import re
import uuid
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault import __version__
from memvault.audit import repository as audit
from memvault.audit.schemas import AuditEntryOut, AuditPage
from memvault.entities.service import EntityOps
from memvault.errors import Conflict, InvalidInput, NotFound, Unauthenticated
from memvault.events.service import EventOps
from memvault.extraction.service import ExtractionOps
from memvault.facade import FacadeBase, NamespaceNotFound
from memvault.forget.service import ForgetOps
from memvault.idempotency.service import IdempotencyOps
from memvault.jobs.service import JobOps
from memvault.keys import repository as keys_repo
from memvault.keys import tokens
from memvault.keys.schemas import KeyCreated, KeyIn, KeyOut
from memvault.maintenance.service import MaintenanceOps
from memvault.memories.service import MemoryOps
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import NamespaceIn, NamespaceOut, NamespacePatch, NamespaceSettings
from memvault.oauth.accounts import AccountOps
from memvault.oauth.service import OAuthOps
from memvault.portability.service import PortabilityOps
from memvault.principal import OPERATOR, Principal
from memvault.retrieval.service import SearchOps
from memvault.tenants import service as tenants_service
from memvault.traces.service import TraceOps

log = logging.getLogger(__name__)


# A key's last-used time is written at most this often, so reads do not each cost a write.
LAST_USED_RESOLUTION = timedelta(seconds=60)


class KeyNotFound(NotFound):
    code = "api_key_not_found"
    title = "API key not found"


class NamespaceExists(Conflict):
    code = "namespace_exists"
    title = "Namespace exists"


class InvalidApiKey(Unauthenticated):
    code = "invalid_api_key"
    title = "Invalid API key"


class RevokedApiKey(Unauthenticated):
    code = "api_key_revoked"
    title = "API key revoked"


def namespace_out(ns: Namespace, memory_count: int) -> NamespaceOut:
    return NamespaceOut(
        id=ns.id,
        name=ns.name,
        description=ns.description,
        created_at=ns.created_at,
        memory_count=memory_count,
        settings=NamespaceSettings.model_validate(ns.settings or {}),
    )


@dataclass(frozen=True)
class Health:
    version: str
    database: bool
    redis: bool | None
    embedding_model: str
    embedded_database: bool


class NamespaceAPI(
    MemoryOps,
    SearchOps,
    EntityOps,
    EventOps,
    TraceOps,
    ForgetOps,
    PortabilityOps,
    IdempotencyOps,
    JobOps,
    ExtractionOps,
    MaintenanceOps,
    OAuthOps,
    AccountOps,
    FacadeBase,
):
    # ---- authentication -------------------------------------------------------------------

    async def authenticate(self, raw_key: str) -> Principal:
        """Resolve a bearer API key to its Principal, or raise 401."""
        if not tokens.looks_like_key(raw_key):
            raise InvalidApiKey("The bearer token is not a memvault API key.")
        async with self._db.unscoped() as s:
            found = await keys_repo.find_by_prefix(s, tokens.lookup_prefix(raw_key))
        if found is None or not tokens.matches(raw_key, found.secret_hash):
            raise InvalidApiKey("The API key is not valid.")
        if found.revoked_at is not None:
            raise RevokedApiKey("The API key has been revoked.")
        now = datetime.now(UTC)
        if found.last_used_at is None or now - found.last_used_at > LAST_USED_RESOLUTION:
            async with self._db.tenant_tx(found.tenant_id) as tx:
                await keys_repo.mark_used(tx.session, found.tenant_id, found.id)
        return Principal(
            tenant_id=found.tenant_id,
            scopes=frozenset(found.scopes),
            subject=f"key:{found.id}",
            namespaces=frozenset(found.namespaces) if found.namespaces is not None else None,
            default_namespace=found.default_namespace,
            key_id=found.id,
        )

    # ---- tenants (operator) ---------------------------------------------------------------

    async def create_tenant(self, name: str, *, namespace: str = "default") -> tenants_service.NewTenant:
        """Create a tenant with one namespace and an admin key (shown once)."""
        async with self._db.owner() as s:
            return await tenants_service.create(s, name, namespace=namespace)

    # ---- namespaces -----------------------------------------------------------------------

    async def create_namespace(self, p: Principal, body: NamespaceIn) -> NamespaceOut:
        """Create a namespace: an isolated memory space inside the tenant."""
        p.require("admin", body.name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await ns_repo.create(tx.session, p.tenant_id, body.name, body.description)
            if ns is None:
                raise NamespaceExists(f"A namespace named '{body.name}' already exists.")
            await audit.record(
                tx.session, p.tenant_id, p.subject, "namespace.create", namespace_id=ns.id, target_id=body.name
            )
        return namespace_out(ns, 0)

    async def list_namespaces(self, p: Principal) -> list[NamespaceOut]:
        """Namespaces this principal may use, with their memory counts."""
        p.require("read")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await ns_repo.list_with_counts(tx.session, p.tenant_id, p.namespaces)
        return [namespace_out(ns, n) for ns, n in rows]

    async def get_namespace(self, p: Principal, name: str) -> NamespaceOut:
        p.require("read", name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
        return namespace_out(ns, n)

    async def update_namespace(self, p: Principal, name: str, patch: NamespacePatch) -> NamespaceOut:
        """Change a namespace's description or settings (search defaults, periodic maintenance)."""
        p.require("admin", name)
        given = patch.model_fields_set
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
            if "description" in given:
                ns.description = patch.description
            if "settings" in given and patch.settings is not None:
                merged = dict(ns.settings or {})
                for part in patch.settings.model_fields_set:
                    value = getattr(patch.settings, part)
                    if value is None:
                        merged.pop(part, None)
                    else:
                        merged[part] = value.model_dump(mode="json", exclude_none=True)
                ns.settings = merged
            await tx.session.flush()
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "namespace.update",
                namespace_id=ns.id,
                target_id=name,
                detail={
                    "fields": sorted(given),
                    "settings": sorted(patch.settings.model_fields_set) if patch.settings else [],
                },
            )
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
        return namespace_out(ns, n)

    async def delete_namespace(self, p: Principal, name: str) -> None:
        """Delete a namespace and every memory in it, permanently."""
        p.require("admin", name)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            ns = await self._namespace(tx, p, name)
            n = await ns_repo.count_memories(tx.session, p.tenant_id, ns.id)
            await ns_repo.remove(tx.session, p.tenant_id, ns.id)
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "namespace.delete",
                namespace_id=ns.id,
                target_id=name,
                detail={"memories_deleted": n},
            )

    # ---- API keys -------------------------------------------------------------------------

    async def create_key(self, p: Principal, body: KeyIn, *, operator: bool = False) -> KeyCreated:
        """Create an API key. The key is in the response once and never again. ``operator`` (CLI
        only) adds the scope that writes system-wide memories."""
        p.require_reach("admin", body.namespaces)
        if operator:
            p.require(OPERATOR)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row, raw = await keys_repo.create(
                tx.session,
                p.tenant_id,
                name=body.name,
                scopes=[*body.scopes, OPERATOR] if operator else body.scopes,
                namespaces=body.namespaces,
                default_namespace=body.default_namespace,
            )
            await audit.record(
                tx.session,
                p.tenant_id,
                p.subject,
                "key.create",
                target_id=str(row.id),
                detail={"scopes": body.scopes, "namespaces": body.namespaces},
            )
        return KeyCreated.model_validate({**KeyOut.model_validate(row).model_dump(), "key": raw})

    async def list_keys(self, p: Principal) -> list[KeyOut]:
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            rows = await keys_repo.list_all(tx.session, p.tenant_id)
        return [KeyOut.model_validate(r) for r in rows if p.covers(r.namespaces)]

    async def revoke_key(self, p: Principal, key_id: uuid.UUID) -> KeyOut:
        """Revoke an API key at once; revoking twice is harmless."""
        p.require("admin")
        async with self._db.tenant_tx(p.tenant_id) as tx:
            row = await keys_repo.revoke(tx.session, p.tenant_id, key_id)
            if row is None:
                raise KeyNotFound(f"No API key with id {key_id}.")
            # Raised inside the transaction, so the revocation rolls back.
            p.require_reach("admin", row.namespaces)
            await audit.record(tx.session, p.tenant_id, p.subject, "key.revoke", target_id=str(key_id))
        return KeyOut.model_validate(row)

    # ---- audit ----------------------------------------------------------------------------

    async def list_audit(
        self,
        p: Principal,
        *,
        namespace: str | None = None,
        action: str | None = None,
        target_id: str | None = None,
        since: datetime | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> AuditPage:
        """The tenant's audit log, newest first. Admin scope; a namespace-limited key sees only
        entries of its namespaces."""
        p.require("admin", namespace)
        before_id: int | None = None
        if cursor is not None:
            # Entry ids are bigints: ASCII digits below 2**63, or the database refuses the comparison.
            if not re.fullmatch(r"[0-9]{1,19}", cursor) or int(cursor) >= 2**63:
                raise InvalidInput("cursor is not one this API returned", extra={"field": "cursor"})
            before_id = int(cursor)
        async with self._db.tenant_tx(p.tenant_id) as tx:
            names = {ns.id: ns.name for ns, _ in await ns_repo.list_with_counts(tx.session, p.tenant_id, None)}
            if namespace is not None:
                wanted: list[uuid.UUID] | None = [i for i, n in names.items() if n == namespace]
                if not wanted:
                    raise NamespaceNotFound(f"No namespace named '{namespace}'.")
            elif p.namespaces is not None:
                wanted = [i for i, n in names.items() if n in p.namespaces]
            else:
                wanted = None
            rows = await audit.page(
                tx.session,
                p.tenant_id,
                namespace_ids=wanted,
                action=action,
                target_id=target_id,
                since=since,
                limit=limit + 1,
                before_id=before_id,
            )
        more = len(rows) > limit
        rows = rows[:limit]
        return AuditPage(
            data=[
                AuditEntryOut(
                    id=r.id,
                    at=r.at,
                    actor=r.actor,
                    action=r.action,
                    namespace=names.get(r.namespace_id) if r.namespace_id else None,
                    namespace_id=r.namespace_id,
                    target_id=r.target_id,
                    detail=r.detail,
                )
                for r in rows
            ],
            next_cursor=str(rows[-1].id) if more and rows else None,
        )

    # ---- status ---------------------------------------------------------------------------

    async def health(self) -> Health:
        redis_ok: bool | None = None
        if self._redis is not None:
            try:
                redis_ok = bool(await self._redis.ping())
            except Exception:
                redis_ok = False
        return Health(
            version=__version__,
            database=await self._db.ping(),
            redis=redis_ok,
            embedding_model=self._embedder.model_id,
            embedded_database=self._db.urls.embedded,
        )

    async def tenant_summary(self, p: Principal) -> dict[str, Any]:
        namespaces = await self.list_namespaces(p)
        return {
            "tenant_id": str(p.tenant_id),
            "subject": p.subject,
            "scopes": sorted(p.scopes),
            "namespaces": [n.name for n in namespaces],
            "memories": sum(n.memory_count or 0 for n in namespaces),
        }
