"""The SDK's webhook endpoint methods against the real server, sync and async."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from memvault_sdk import NotFoundError
from tests.sdk.conftest import call, first_page


async def test_subscribe_list_rotate_replay_delete(client: Any) -> None:
    made = await call(client.webhooks.create("https://hooks.example.com/in", ["memory.created"], description="sdk"))
    assert made.secret.startswith("whsec_") and made.events == ["memory.created"]
    page = await first_page(client.webhooks.list())
    assert [e.id for e in page.data] == [made.id]
    changed = await call(client.webhooks.update(made.id, enabled=False))
    assert (changed.enabled, changed.disabled_reason) == (False, "manual")
    assert (await call(client.webhooks.get(made.id))).description == "sdk"
    rotated = await call(client.webhooks.rotate(made.id, grace_seconds=60))
    assert rotated.secret != made.secret and rotated.previous_secret_expires_at is not None
    log = await first_page(client.webhooks.deliveries(made.id))
    assert log.data == []
    replayed = await call(client.webhooks.replay(made.id, datetime.now(UTC) - timedelta(hours=1)))
    assert replayed.requeued == 0
    await call(client.webhooks.delete(made.id))
    with pytest.raises(NotFoundError):
        await call(client.webhooks.get(made.id))
