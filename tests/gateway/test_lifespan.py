"""What the app's start-up does for the searches after it: the statements a default search can
take are built, and what it loaded is left out of the garbage collector's full collections (at
700,000 objects, the models, the modules and the app, each full collection paused the process
for up to half a second, in the middle of whichever search was running)."""

from __future__ import annotations

import gc

import pytest

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.memories.schemas import MemoryIn
from memvault.retrieval.schemas import SearchIn
from memvault.retrieval.sql.statement import statement_for
from tests.conftest import Tenant, running

# Starts and stops the whole app, and walks the garbage collector's objects.
pytestmark = pytest.mark.slow


async def test_what_is_loaded_at_start_is_frozen_until_shutdown(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
) -> None:
    loaded = [object()]  # alive before the app starts, like a module or a model
    application = create_app(settings, urls=pg_urls, embedder=embedder)

    async with running(application):
        frozen = gc.get_freeze_count()
        scanned = any(o is loaded for o in gc.get_objects())
        made_later = [object()]
        scanned_later = any(o is made_later for o in gc.get_objects())

    assert frozen > 0 and not scanned
    assert scanned_later  # what requests create is collected as usual
    assert gc.get_freeze_count() == 0 and any(o is loaded for o in gc.get_objects())


async def test_a_first_search_finds_its_statement_ready(api: NamespaceAPI, tenant_a: Tenant) -> None:
    """Start-up builds each statement a default search can take, unfiltered and reading as a user:
    a process's first search of each kind would otherwise pay 25-40 ms of Python to build and
    compile it."""
    assert await api.warm_search() == 96
    await api.store(tenant_a.principal, tenant_a.namespace, MemoryIn(content="We decided to ship in March 2024"))
    before = statement_for.cache_info()

    for query, filters in [
        ("what did we decide about shipping in March 2024", None),  # an intent and a window
        ("what is the latest about shipping", None),  # newest
        ("zzxq qqzz", None),  # no word the namespace has
        ("what did we decide about shipping", {"user_id": "ada"}),  # an intent, as a user (small chain)
    ]:
        await api.search(tenant_a.principal, tenant_a.namespace, SearchIn(query=query, filters=filters))

    after = statement_for.cache_info()
    assert after.misses == before.misses
    assert after.hits == before.hits + 4
