"""The app's lifespan leaves what it loaded at start out of the garbage collector's full
collections: at 700,000 objects (the models, the modules, the app) each full collection paused
the process for up to 450 ms, in the middle of whichever search was running."""

from __future__ import annotations

import gc

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import running


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
