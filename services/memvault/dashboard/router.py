"""Every dashboard page's router, in one list the app includes."""

from __future__ import annotations

from fastapi import APIRouter

from memvault.dashboard import audit, jobs, overview, signin

router = APIRouter(include_in_schema=False)
for module in (signin, overview, jobs, audit):
    router.include_router(module.router)
