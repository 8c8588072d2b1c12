from __future__ import annotations

import uuid
from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field, field_validator

from memvault.fields import Body


class Step(StrEnum):
    dedup = "dedup"
    decay = "decay"
    promote = "promote"
    reembed = "reembed"


# Re-embedding first lets dedup compare every memory by the current model; promotion before
# decay, so a reinforced memory is kept stable rather than weighed as tentative.
DEFAULT_STEPS = [Step.reembed, Step.dedup, Step.promote, Step.decay]
MAX_BUDGET_MS = 600_000


class OrganizeIn(Body):
    model_config = ConfigDict(extra="forbid")

    jobs: list[Step] = Field(
        default_factory=lambda: list(DEFAULT_STEPS),
        min_length=1,
        max_length=len(Step),
        description="Maintenance steps to run, in this order (each at most once). Default: reembed, dedup, "
        "promote, decay.",
    )
    budget_ms: int = Field(
        default=60_000,
        ge=1,
        le=MAX_BUDGET_MS,
        description="Time for all the steps together. A step stops between batches when it runs out "
        "(reported `complete: false`); steps not reached are reported `skipped`.",
    )

    @field_validator("jobs")
    @classmethod
    def _once_each(cls, v: list[Step]) -> list[Step]:
        if len(set(v)) != len(v):
            raise ValueError("each step may be named once")
        return v


class OrganizeOut(BaseModel):
    job_id: uuid.UUID = Field(description="The organize job; poll GET /v1/jobs/{job_id} for what each step did.")
    jobs: list[Step]
    budget_ms: int


class ScheduledRun(BaseModel):
    tenant_id: uuid.UUID
    namespace_id: uuid.UUID
    job_id: uuid.UUID


class MaintenanceTick(BaseModel):
    """What one scheduler tick did: namespaces found due, the organize jobs it queued, and the
    namespaces it could not queue (logged; the next tick tries them again)."""

    due: int = 0
    queued: list[ScheduledRun] = Field(default_factory=list)
    failed: int = 0
    # Organisations deleted because their owner never verified (settings.signup_unverified_days).
    purged_signups: list[str] = Field(default_factory=list)
