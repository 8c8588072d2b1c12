from __future__ import annotations

from memvault.facade import FacadeBase


class TraceOps(FacadeBase):
    """Reasoning traces."""
