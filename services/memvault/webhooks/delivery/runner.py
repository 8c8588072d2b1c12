"""The delivery loop: claim due deliveries fairly across tenants, send them, record the outcome.

Each sweep lists what is due across tenants (an owner read of ids only, round-robin by tenant and
bounded), then claims per tenant in that tenant's own transaction (``FOR UPDATE SKIP LOCKED``, so
two senders never take the same row) and sends outside any transaction. Fairness: a tenant has at
most ``webhook_tenant_concurrency`` attempts in flight in this process, so a tenant with 10,000
deliveries to a slow receiver holds that many slots and no more, and every other tenant's
deliveries start on the next sweep. A sweep runs every ``webhook_sweep_interval_s``, and at once
when an attempt ends (to keep a fast receiver busy) or when ``nudge`` is called (after a commit
that queued deliveries, in this process or, through PostgreSQL's NOTIFY, in another).

Where it runs: inside `memvault serve` without Redis (app.py), inside `memvault worker` with
Redis (a thread of its own, jobs/runner.py). The outbox is in PostgreSQL, so a Redis restart
costs nothing here; several senders (workers, replicas) share the work through the row locks
and leases.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
import uuid
from collections import Counter

import httpx

from memvault import operator
from memvault.audit import repository as audit
from memvault.config import Settings
from memvault.db.session import Database, TenantTx
from memvault.webhooks import outbox
from memvault.webhooks.delivery import repository, sender
from memvault.webhooks.delivery.repository import Claimed

log = logging.getLogger(__name__)
# The actor the audit log names for what the sender does by itself (disabling an endpoint).
SENDER = "system:webhook-sender"

# Waits before each retry, after the 1st, 2nd, ... failed attempt; after the last, `failed`.
BACKOFF_S: tuple[float, ...] = (5, 60, 600, 3600, 6 * 3600, 24 * 3600)
# Each wait is drawn from +-20 % of its step, so receivers that fail together are not retried in
# lockstep.
JITTER = 0.2
DISABLE_AFTER_S = 3 * 24 * 3600
# Rows one sweep lists: enough for many tenants' turns, small enough to read in a few ms.
SWEEP_LIMIT = 500
# A claimed row comes due again this long after its attempt's deadline if its sender died.
LEASE_MARGIN_S = 30.0
# A stopping sender waits for its attempts in flight this long past their deadline, for their
# outcome to be written down.
RECORD_MARGIN_S = 5.0


def stop_wait_s(settings: Settings) -> float:
    """The longest a stopping sender waits for its attempts in flight."""
    return settings.webhook_timeout_s + RECORD_MARGIN_S


class DeliveryRunner:
    def __init__(
        self,
        db: Database,
        settings: Settings,
        *,
        backoff: tuple[float, ...] = BACKOFF_S,
        client: httpx.AsyncClient | None = None,
    ) -> None:
        self._db = db
        self._settings = settings
        self._backoff = backoff
        self._client = client or sender.client(allow_private=settings.webhook_allow_private)
        self._own_client = client is None
        self._cap = settings.webhook_tenant_concurrency
        self._total_cap = settings.webhook_concurrency
        self._in_flight: Counter[uuid.UUID] = Counter()
        self._tasks: set[asyncio.Task[None]] = set()
        self._wake = asyncio.Event()

    def nudge(self) -> None:
        """Sweep now rather than at the next interval (deliveries were just committed)."""
        self._wake.set()

    async def run(self) -> None:
        """Sweep until cancelled; every interval, and whenever nudged or an attempt ends."""
        listener = asyncio.create_task(self._listen())
        try:
            while True:
                self._wake.clear()
                try:
                    await self.sweep()
                except Exception:  # the database away for a moment: the next sweep tries again
                    log.warning("webhook sweep failed", exc_info=True)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(self._settings.webhook_sweep_interval_s):
                        await self._wake.wait()
        finally:
            listener.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await listener
            await self.aclose()

    async def sweep(self) -> int:
        """Start what is due within the caps; returns how many attempts it started."""
        free_total = self._total_cap - sum(self._in_flight.values())
        if free_total <= 0:
            return 0
        due = await operator.due_webhook_deliveries(self._db, per_tenant=self._cap, limit=SWEEP_LIMIT)
        by_tenant: dict[uuid.UUID, list[uuid.UUID]] = {}
        for tenant_id, delivery_id in due:  # in round-robin order: dicts keep first appearance
            by_tenant.setdefault(tenant_id, []).append(delivery_id)
        started = 0
        for tenant_id, ids in by_tenant.items():
            free = min(self._cap - self._in_flight[tenant_id], free_total - started)
            if free <= 0:
                continue
            async with self._db.tenant_tx(tenant_id) as tx:
                claimed = await repository.claim(tx.session, tenant_id, ids[:free], lease_s=self._lease_s)
            for delivery in claimed:
                self._in_flight[tenant_id] += 1
                task = asyncio.create_task(self._attempt(delivery))
                self._tasks.add(task)
                task.add_done_callback(self._tasks.discard)
            started += len(claimed)
        return started

    @property
    def _lease_s(self) -> float:
        return self._settings.webhook_timeout_s + LEASE_MARGIN_S

    async def _attempt(self, d: Claimed) -> None:
        try:
            message = sender.Message(d.message_id, d.payload, d.url, d.secrets)
            result = await sender.send(
                self._client,
                message,
                allow_private=self._settings.webhook_allow_private,
                timeout_s=self._settings.webhook_timeout_s,
            )
            await self._record(d, result)
        except Exception:  # the row's lease ends and it comes due again: nothing is lost
            log.exception("webhook delivery %s: recording the attempt failed", d.id)
        finally:
            self._in_flight[d.tenant_id] -= 1
            if self._in_flight[d.tenant_id] <= 0:
                del self._in_flight[d.tenant_id]
            self._wake.set()

    async def _record(self, d: Claimed, result: sender.Result) -> None:
        if result.outcome == "failed" and d.attempts <= len(self._backoff):
            status, delay = "pending", self._delay(d.attempts)
        else:
            status, delay = ("succeeded" if result.outcome == "succeeded" else "failed"), 0.0
        async with self._db.tenant_tx(d.tenant_id) as tx:
            kept = await repository.record(
                tx.session,
                d,
                status=status,
                delay_s=delay,
                response_status=result.status,
                excerpt=result.excerpt,
                latency_ms=result.latency_ms,
                error=result.error,
            )
            if not kept:
                return
            if result.outcome == "succeeded":
                await repository.endpoint_succeeded(tx.session, d.tenant_id, d.endpoint_id)
            elif result.outcome == "gone":
                if await repository.endpoint_gone(tx.session, d.tenant_id, d.endpoint_id):
                    await self._disabled(tx, d, "gone")
            elif await repository.endpoint_failed(
                tx.session, d.tenant_id, d.endpoint_id, disable_after_s=DISABLE_AFTER_S
            ):
                await self._disabled(tx, d, "failing")

    @staticmethod
    async def _disabled(tx: TenantTx, d: Claimed, reason: str) -> None:
        """Tell the tenant, in the transaction that disabled the endpoint: an audit entry, and a
        `webhook.disabled` event for its other endpoints that asked for it (the disabled one
        receives nothing more)."""
        log.warning("webhook endpoint %s disabled (%s)", d.endpoint_id, reason)
        detail = {"reason": reason, "url": d.url}
        await audit.record(
            tx.session, d.tenant_id, SENDER, "webhook.disable", target_id=str(d.endpoint_id), detail=detail
        )
        await outbox.emit(tx, d.tenant_id, "webhook.disabled", None, {"endpoint_id": str(d.endpoint_id), **detail})

    def _delay(self, attempts: int) -> float:
        step = self._backoff[attempts - 1]
        return step * random.uniform(1 - JITTER, 1 + JITTER)

    async def drain(self) -> None:
        """Wait for the attempts in flight (tests, shutdown)."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)

    async def aclose(self) -> None:
        """Stop (run() does this when cancelled): the attempts in flight may end and be recorded
        within their timeout, as a receiver that is answering expects, rather than be cut off and
        sent again when their lease ends; what is still running after that is cancelled (at least
        once: the lease brings it back)."""
        try:
            if self._tasks:
                await asyncio.wait(set(self._tasks), timeout=stop_wait_s(self._settings))
        finally:
            for task in list(self._tasks):
                task.cancel()
            await self.drain()
            if self._own_client:
                await self._client.aclose()

    async def _listen(self) -> None:
        """Nudged by NOTIFY memvault_webhooks (repository.notify, sent on commit by any process).
        Best effort: without it, the sweep interval still finds everything."""
        # LISTEN needs no table rights: the plain URL, without the SQLAlchemy driver name.
        dsn = self._db.urls.app.render_as_string(hide_password=False).replace("+psycopg", "")
        while True:
            try:
                async for _ in repository.notifications(dsn):
                    self._wake.set()
            except asyncio.CancelledError:
                raise
            except Exception:
                log.debug("webhook listener lost its connection", exc_info=True)
            await asyncio.sleep(5)
