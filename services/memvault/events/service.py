from __future__ import annotations

from memvault.facade import FacadeBase


class EventOps(FacadeBase):
    """Events and sessions."""
