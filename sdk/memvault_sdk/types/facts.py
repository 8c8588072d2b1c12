from __future__ import annotations

from datetime import datetime

from memvault_sdk.types._model import Model, Params
from memvault_sdk.types.entities import Relation
from memvault_sdk.types.memories import Memory, ScopeLevel


class PreferenceCreate(Params):
    category: str
    preference: str
    context: str | None = None
    confidence: float | None = None
    scope: ScopeLevel | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


class FactCreate(Params):
    subject: str
    predicate: str
    object: str
    confidence: float | None = None
    valid_from: datetime | None = None
    valid_until: datetime | None = None
    scope: ScopeLevel | None = None
    user_id: str | None = None
    agent_id: str | None = None
    session_id: str | None = None


class Fact(Model):
    memory: Memory
    relation: Relation | None = None
