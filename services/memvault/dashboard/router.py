"""Every dashboard page's router, in one list the app includes."""

from __future__ import annotations

from fastapi import APIRouter

from memvault.dashboard import overview, signin, usage

router = APIRouter(include_in_schema=False)
for module in (signin, overview, usage):
    router.include_router(module.router)
