"""The maintenance part of the facade: `organize` queues a job that runs named steps over one
namespace within a time budget; each step is also a job kind of its own (`_job_dedup`, ...).

Every step is safe to re-run and to stop between batches: what it did is committed batch by
batch, and a re-run finds only what is left (duplicates are superseded, weak memories archived,
promoted ones stable, re-embedded ones of the current model).
"""

from __future__ import annotations

import logging
import time
import uuid
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from memvault import operator
from memvault.audit import repository as audit
from memvault.db.session import TenantTx
from memvault.errors import InvalidInput
from memvault.facade import FacadeBase
from memvault.jobs import repository as jobs_repo
from memvault.jobs.models import Job
from memvault.jobs.registry import JobKind, handles
from memvault.jobs.service import JobRun, Progress
from memvault.maintenance import repository as repo
from memvault.maintenance.guard import why_distinct
from memvault.maintenance.schemas import (
    DEFAULT_STEPS,
    MAX_BUDGET_MS,
    MaintenanceTick,
    OrganizeIn,
    OrganizeOut,
    ScheduledRun,
    Step,
)
from memvault.memories import changes
from memvault.namespaces.models import Namespace
from memvault.namespaces.schemas import MaintenanceSchedule
from memvault.operations import operation
from memvault.principal import Principal

log = logging.getLogger(__name__)

ORGANIZE = JobKind.organize
SCHEDULER = "scheduler"
# Namespaces one tick queues at most; the next tick takes the rest, longest waiting first.
TICK_LIMIT = 1000
# Memories per near-duplicate probe statement, and per archive/promote update.
NEAR_BATCH = 200
# Namespaces from this many live memories are probed through the HNSW index (see near_pairs): the
# exact probe reads the namespace once per memory, so a sweep costs n squared. Measured on LoCoMo
# turns (loadtests/bench_dedup_probe.py): the index is 0.52x the exact sweep's time at 100 memories,
# 0.09x at 500, 0.05-0.10x at 1,000, 0.02x at 5,000, with the same pairs found at every size.
NEAR_INDEX_FROM = 100
UPDATE_BATCH = 500
MERGE_FIELDS = ["metadata", "source_event_ids"]


class Deadline:
    """When a run must stop: its budget is spent, or its job was cancelled. Steps check it between
    batches, so both stop a run the same way: what was committed stays, `complete: false`."""

    def __init__(self, budget_ms: int, cancelled: Callable[[], bool] = lambda: False) -> None:
        self.budget_ms = budget_ms
        self._start = time.monotonic()
        self._end = self._start + budget_ms / 1000
        self._cancelled = cancelled

    @property
    def cancelled(self) -> bool:
        return self._cancelled()

    @property
    def passed(self) -> bool:
        return self.cancelled or time.monotonic() >= self._end

    @property
    def elapsed_ms(self) -> int:
        return round((time.monotonic() - self._start) * 1000)


StepFn = Callable[[Principal, Namespace, Deadline, Progress], Awaitable[dict[str, Any]]]


def schedule_slot(now: datetime, every_minutes: int) -> datetime:
    """The start of the ``every_minutes``-wide slot (counted from the Unix epoch) holding ``now``.

    Two runs of one schedule are at least ``every_minutes`` apart, so they never share a slot: the
    slot names the run, and two schedulers (or a retried tick) that both get this far for the same
    run make one job."""
    minutes = int(now.timestamp() // 60)
    return datetime.fromtimestamp((minutes - minutes % every_minutes) * 60, UTC)


def clusters(
    pairs: list[tuple[uuid.UUID, uuid.UUID, float]], found: dict[uuid.UUID, repo.Candidate], stats: Counter[str]
) -> list[tuple[uuid.UUID, list[uuid.UUID]]]:
    """Group similar pairs into (representative, duplicates). A duplicate is merged only into a
    representative it was itself compared with and found the same fact as: similarity is not
    transitive, and A~B~C must not merge A and C when they differ."""
    same: dict[uuid.UUID, set[uuid.UUID]] = defaultdict(set)
    for a, b, _ in pairs:
        if a not in found or b not in found:
            continue
        reason = why_distinct(found[a].content, found[b].content)
        if reason is not None:
            stats["kept_distinct"] += 1
            stats[f"kept_distinct_{reason}"] += 1
            continue
        same[a].add(b)
        same[b].add(a)
    out: list[tuple[uuid.UUID, list[uuid.UUID]]] = []
    taken: set[uuid.UUID] = set()
    for rep in sorted(same, key=lambda i: found[i].rank):
        if rep in taken:
            continue
        members = sorted((m for m in same[rep] if m not in taken), key=lambda i: found[i].rank)
        if members:
            taken.update([rep, *members])
            out.append((rep, members))
    return out


class MaintenanceOps(FacadeBase):
    @operation("write")
    async def organize(self, p: Principal, ns: str, body: OrganizeIn) -> OrganizeOut:
        """Queue maintenance of a namespace: the named steps (dedup, decay, promote, reembed) run in
        order within ``budget_ms``; the job's result reports what each did."""
        async with self._open(p, ns, "write") as (tx, namespace):
            # No job key: each request is new work; Idempotency-Key covers retries.
            job_id = await self._queue_organize(tx, p, namespace.id, ns, body)
        assert job_id is not None  # without a job key a job is always created
        return OrganizeOut(job_id=job_id, jobs=body.jobs, budget_ms=body.budget_ms)

    # ---- periodic maintenance ----------------------------------------------------------------

    async def queue_due_maintenance(self, now: datetime | None = None) -> MaintenanceTick:
        """The scheduler's tick: queue an organize job for every namespace whose periodic
        maintenance (``settings.maintenance``) is due. System-wide, so it takes no principal: due
        namespaces are listed across tenants as the owner (ids only), then each is claimed and its
        job created inside its own tenant's transaction, as ``Principal.system(tenant)``."""
        now = now or datetime.now(UTC)
        due = await operator.due_maintenance(self._db, now, limit=TICK_LIMIT)
        tick = MaintenanceTick(due=len(due))
        for tenant_id, namespace_id in due:
            p = Principal.system(tenant_id, subject=SCHEDULER)
            try:
                job_id = await self._queue_scheduled(p, namespace_id, now)
            except Exception:  # one namespace's trouble must not starve the others
                log.exception("periodic maintenance of namespace %s (tenant %s) not queued", namespace_id, tenant_id)
                tick.failed += 1
                continue
            if job_id is not None:
                tick.queued.append(ScheduledRun(tenant_id=tenant_id, namespace_id=namespace_id, job_id=job_id))
        if tick.queued or tick.failed:
            log.info("periodic maintenance: %d due, %d queued, %d failed", tick.due, len(tick.queued), tick.failed)
        if self._settings.signup_unverified_days:
            try:
                tick.purged_signups = await operator.purge_unverified_signups(
                    self._db, now - timedelta(days=self._settings.signup_unverified_days)
                )
            except Exception:  # the next tick tries again; the maintenance above is queued either way
                log.exception("unverified sign-ups not purged")
            if tick.purged_signups:
                log.info("deleted %d organisations never verified: %s", len(tick.purged_signups), tick.purged_signups)
        return tick

    async def _queue_scheduled(self, p: Principal, namespace_id: uuid.UUID, now: datetime) -> uuid.UUID | None:
        async with self._db.tenant_tx(p.tenant_id) as tx:
            claimed = await repo.claim_schedule(tx.session, p.tenant_id, namespace_id, now)
            if claimed is None:
                return None  # another scheduler took this run, or the schedule was cleared meanwhile
            name, settings = claimed
            schedule = MaintenanceSchedule.model_validate(settings["maintenance"])
            slot = schedule_slot(now, schedule.every_minutes)
            # Job keys are unique per tenant, so the namespace is part of the run's name.
            key = f"schedule:{namespace_id}:{schedule.every_minutes}m:{slot:%Y-%m-%dT%H:%MZ}"
            job_id = await self._queue_organize(tx, p, namespace_id, name, schedule, job_key=key, slot=slot)
        return job_id

    async def _queue_organize(
        self,
        tx: TenantTx,
        p: Principal,
        namespace_id: uuid.UUID,
        name: str,
        request: OrganizeIn,
        *,
        job_key: str | None = None,
        slot: datetime | None = None,
    ) -> uuid.UUID | None:
        """Create an organize job, audit it and dispatch it after commit: for a request, or for a
        scheduled run (``slot``). None when ``job_key`` names a run that already has its job."""
        steps = [s.value for s in request.jobs]
        extra = {"schedule": slot.isoformat()} if slot is not None else {}
        job, created = await jobs_repo.create(
            tx.session,
            p.tenant_id,
            namespace_id=namespace_id,
            kind=ORGANIZE,
            payload={"namespace": name, "jobs": steps, "budget_ms": request.budget_ms, **extra},
            job_key=job_key,
            created_by=p.subject,
        )
        if not created:
            return None
        await self._audit(
            tx,
            p,
            "namespace.organize",
            namespace_id=namespace_id,
            target_id=str(job.id),
            detail={"jobs": steps, "budget_ms": request.budget_ms, **extra},
        )
        job_id = job.id
        tx.after_commit(lambda: self._jobs.dispatch(p.tenant_id, job_id, ORGANIZE))
        return job_id

    # ---- job handlers ------------------------------------------------------------------------

    @handles(JobKind.organize)
    async def _job_organize(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        """Run the payload's steps in order within its budget."""
        try:
            steps = [Step(s) for s in job.payload.get("jobs", [])] or list(DEFAULT_STEPS)
            budget = int(job.payload.get("budget_ms", 60_000))
        except (ValueError, TypeError) as exc:
            raise InvalidInput("organize job payload is malformed") from exc
        return await self._run_steps(p, job, steps, max(1, min(budget, MAX_BUDGET_MS)), run)

    @handles(JobKind.dedup)
    async def _job_dedup(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        return await self._run_steps(p, job, [Step.dedup], self._budget(job), run)

    @handles(JobKind.decay)
    async def _job_decay(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        return await self._run_steps(p, job, [Step.decay], self._budget(job), run)

    @handles(JobKind.promote)
    async def _job_promote(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        return await self._run_steps(p, job, [Step.promote], self._budget(job), run)

    @handles(JobKind.reembed)
    async def _job_reembed(self, p: Principal, job: Job, run: JobRun) -> dict[str, Any]:
        return await self._run_steps(p, job, [Step.reembed], self._budget(job), run)

    @staticmethod
    def _budget(job: Job) -> int:
        try:
            return max(1, min(int(job.payload.get("budget_ms", MAX_BUDGET_MS)), MAX_BUDGET_MS))
        except (ValueError, TypeError) as exc:
            raise InvalidInput("job payload has a malformed budget_ms") from exc

    async def _run_steps(
        self, p: Principal, job: Job, steps: list[Step], budget_ms: int, run: JobRun
    ) -> dict[str, Any]:
        ns = str(job.payload.get("namespace", ""))
        async with self._db.tenant_tx(p.tenant_id) as tx:
            namespace = await self._namespace(tx, p, ns)
        deadline = Deadline(budget_ms, lambda: run.cancelled)
        do: dict[Step, StepFn] = {
            Step.dedup: self._dedup,
            Step.decay: self._decay,
            Step.promote: self._promote,
            Step.reembed: self._reembed,
        }
        result: dict[str, Any] = {}
        for i, step in enumerate(steps):
            if deadline.passed:
                result[step.value] = {"skipped": "cancelled" if deadline.cancelled else "budget"}
                continue

            async def step_progress(fraction: float, i: int = i) -> None:
                await run((i + max(0.0, min(1.0, fraction))) / len(steps))

            started = time.monotonic()
            out = await do[step](p, namespace, deadline, step_progress)
            result[step.value] = {**out, "ms": round((time.monotonic() - started) * 1000)}
            await run((i + 1) / len(steps))
        # Cancelled only if the cancel cut something short, not if it came after the last batch.
        stopped = deadline.cancelled and any(r.get("complete") is False or "skipped" in r for r in result.values())
        # JSONB does not keep key order: the order the steps ran in is listed.
        return {
            **result,
            "order": [s.value for s in steps],
            "budget_ms": budget_ms,
            "elapsed_ms": deadline.elapsed_ms,
            **({"cancelled": True} if stopped else {}),
        }

    # ---- steps -------------------------------------------------------------------------------

    async def _dedup(self, p: Principal, ns: Namespace, deadline: Deadline, progress: Progress) -> dict[str, Any]:
        """Merge exact duplicates (same normalised text), then near-duplicates (cosine >= the
        threshold that state the same fact), each into its highest-priority memory."""
        stats: Counter[str] = Counter()
        async with self._db.tenant_tx(p.tenant_id) as tx:
            groups = await repo.exact_groups(tx.session, p.tenant_id, ns.id)
        for start in range(0, len(groups), 50):
            if deadline.passed:
                return {**self._dedup_out(stats), "complete": False}
            batch = [(g[0], g[1:]) for g in groups[start : start + 50]]
            await self._merge(p, ns, batch, "exact", stats)

        async with self._db.tenant_tx(p.tenant_id) as tx:
            total = await repo.count_live(tx.session, p.tenant_id, ns.id)
        after: uuid.UUID | None = None
        seen = 0
        while True:
            if deadline.passed:
                return {**self._dedup_out(stats), "complete": False}
            async with self._db.tenant_tx(p.tenant_id) as tx:
                pairs, after = await repo.near_pairs(
                    tx.session,
                    p.tenant_id,
                    ns.id,
                    model_id=self._embedder.model_id,
                    threshold=self._settings.dedup_threshold,
                    after=after,
                    batch=NEAR_BATCH,
                    use_index=total >= NEAR_INDEX_FROM,
                )
                found = await repo.candidates(tx.session, p.tenant_id, list({i for a, b, _ in pairs for i in (a, b)}))
            if after is None:
                break
            stats["near_pairs"] += len(pairs)
            await self._merge(p, ns, clusters(pairs, found, stats), "near", stats)
            seen += NEAR_BATCH
            await progress(min(seen / max(total, 1), 1.0))
        return {**self._dedup_out(stats), "complete": True}

    @staticmethod
    def _dedup_out(stats: Counter[str]) -> dict[str, Any]:
        base = {"merged_exact": 0, "merged_near": 0, "representatives": 0, "near_pairs": 0, "kept_distinct": 0}
        return {**base, **dict(stats)}

    async def _merge(
        self,
        p: Principal,
        ns: Namespace,
        groups: list[tuple[uuid.UUID, list[uuid.UUID]]],
        how: str,
        stats: Counter[str],
    ) -> None:
        if not groups:
            return
        async with self._db.tenant_tx(p.tenant_id) as tx:
            for rep_id, dup_ids in groups:
                live = await repo.lock_live(tx.session, p.tenant_id, ns.id, [rep_id, *dup_ids])
                rep = live.get(rep_id)
                dups = [live[d] for d in dup_ids if d in live]
                # Something merged or archived it since the pairs were found: leave it for a re-run.
                if rep is None or not dups:
                    continue
                kept, gone = await repo.merge(tx.session, p.tenant_id, rep, dups)
                gone_fields = ["superseded_at", "superseded_by"]
                await changes.record(tx, p.tenant_id, p.subject, gone, "merged", gone_fields, ns.name)
                await changes.record(tx, p.tenant_id, p.subject, [kept], "merged", MERGE_FIELDS, ns.name)
                await self._audit(
                    tx,
                    p,
                    "memory.merge",
                    namespace_id=ns.id,
                    target_id=str(rep_id),
                    detail={"merged": [str(d.id) for d in gone], "how": how},
                )
                stats[f"merged_{how}"] += len(gone)
                stats["representatives"] += 1

    async def _decay(self, p: Principal, ns: Namespace, deadline: Deadline, progress: Progress) -> dict[str, Any]:
        """Archive (never delete) current memories whose strength fell below the threshold."""
        s = self._settings
        archived = 0
        while not deadline.passed:
            async with self._db.tenant_tx(p.tenant_id) as tx:
                rows = await repo.archive_weak(
                    tx.session,
                    p.tenant_id,
                    ns.id,
                    half_life_days=s.decay_half_life_days,
                    below=s.decay_archive_below,
                    batch=UPDATE_BATCH,
                )
                await self._record_batch(p, ns, tx, rows, "archived", "memory.archive", "decay")
            archived += len(rows)
            if len(rows) < UPDATE_BATCH:
                return {"archived": archived, "complete": True}
        return {"archived": archived, "complete": False}

    async def _promote(self, p: Principal, ns: Namespace, deadline: Deadline, progress: Progress) -> dict[str, Any]:
        """Make tentative memories stable once mentioned or recalled often enough."""
        s = self._settings
        promoted = 0
        while not deadline.passed:
            async with self._db.tenant_tx(p.tenant_id) as tx:
                rows = await repo.promote_reinforced(
                    tx.session,
                    p.tenant_id,
                    ns.id,
                    min_mentions=s.promote_min_mentions,
                    min_accesses=s.promote_min_accesses,
                    batch=UPDATE_BATCH,
                )
                await self._record_batch(p, ns, tx, rows, "promoted", "memory.promote", "promote")
            promoted += len(rows)
            if len(rows) < UPDATE_BATCH:
                return {"promoted": promoted, "complete": True}
        return {"promoted": promoted, "complete": False}

    async def _record_batch(
        self, p: Principal, ns: Namespace, tx: TenantTx, rows: list[Any], action: str, audit_action: str, by: str
    ) -> None:
        if not rows:
            return
        await changes.record(tx, p.tenant_id, p.subject, rows, action, ["state"], ns.name)
        await audit.record(
            tx.session,
            p.tenant_id,
            p.subject,
            audit_action,
            namespace_id=ns.id,
            target_id=None,
            detail={"count": len(rows), "by": by},
        )

    async def _reembed(self, p: Principal, ns: Namespace, deadline: Deadline, progress: Progress) -> dict[str, Any]:
        """Re-embed, in batches, the namespace's memories (every version and state) whose vector is
        of another model than the current one."""
        model = self._embedder.model_id
        async with self._db.tenant_tx(p.tenant_id) as tx:
            total = await repo.count_other_model(tx.session, p.tenant_id, ns.id, model)
        done = 0
        seen: set[uuid.UUID] = set()
        while not deadline.passed:
            async with self._db.tenant_tx(p.tenant_id) as tx:
                todo = await repo.next_to_reembed(
                    tx.session, p.tenant_id, ns.id, model, self._settings.embedding_batch_size
                )
            if not todo:
                return {"model": model, "reembedded": done, "remaining": 0, "complete": True}
            if seen.intersection(i for i, _ in todo):
                raise RuntimeError("re-embedded memories still show another model")  # never loop forever
            seen.update(i for i, _ in todo)
            vectors = await self._embedder.embed([c for _, c in todo], tenant=p.tenant_id)
            async with self._db.tenant_tx(p.tenant_id) as tx:
                await repo.set_vectors(
                    tx.session, p.tenant_id, model, list(zip([i for i, _ in todo], vectors, strict=True))
                )
                await self._audit(
                    tx,
                    p,
                    "memory.reembed",
                    namespace_id=ns.id,
                    detail={"count": len(todo), "model": model},
                )
            done += len(todo)
            await progress(done / max(total, 1))
        return {"model": model, "reembedded": done, "remaining": max(total - done, 0), "complete": False}
