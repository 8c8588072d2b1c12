from __future__ import annotations

from memvault.facade import FacadeBase


class EntityOps(FacadeBase):
    """Entities, relations and memory links (filled in by the entities work)."""
