from __future__ import annotations

from datetime import datetime
from typing import Literal

from memvault_sdk.types._model import Model, Params

ContradictionState = Literal["open", "resolved"]
Resolution = Literal["keep_one", "keep_both", "note"]


class ContradictionCreate(Params):
    memory_id: str
    other_id: str
    note: str | None = None


class ContradictionResolve(Params):
    resolution: Resolution
    contradiction_id: str | None = None
    memory_id: str | None = None
    other_id: str | None = None
    keep_id: str | None = None
    note: str | None = None


class Contradiction(Model):
    id: str
    namespace: str
    memory_id: str
    other_id: str
    note: str | None = None
    state: ContradictionState
    resolution: Resolution | None = None
    kept_id: str | None = None
    resolution_note: str | None = None
    created_by: str
    created_at: datetime
    resolved_by: str | None = None
    resolved_at: datetime | None = None
