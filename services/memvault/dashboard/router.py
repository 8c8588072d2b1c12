"""Every dashboard page's router, in one list the app includes."""

from __future__ import annotations

from fastapi import APIRouter

from memvault.dashboard import (
    accounts,
    apps,
    audit,
    explorer,
    jobs,
    keys,
    members,
    namespaces,
    overview,
    signin,
    usage,
    webhooks,
)

router = APIRouter(include_in_schema=False)
for module in (signin, accounts, overview, usage, namespaces, explorer, keys, members, apps, webhooks, jobs, audit):
    router.include_router(module.router)
