"""Both halves together, as a customer meets them: subscribe over REST, write over REST, and a
real receiver gets the signed event within moments (the commit's NOTIFY wakes the in-process
sender; its sweep interval here is far longer than the wait)."""

from __future__ import annotations

import httpx

from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import Tenant, running
from tests.webhooks.delivery.conftest import Receiver, receiving, until


async def test_a_stored_memory_reaches_the_subscriber_signed(
    tenant_a: Tenant, tenant_b: Tenant, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
) -> None:
    local = settings.model_copy(
        update={"redis_url": None, "webhook_allow_private": True, "webhook_sweep_interval_s": 60}
    )
    ours, theirs = Receiver("whsec_placeholder"), Receiver("whsec_placeholder")
    async with (
        receiving(ours) as our_url,
        receiving(theirs) as their_url,
        running(create_app(local, urls=pg_urls, embedder=embedder)) as app,
    ):
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as rest:
            for tenant, receiver, url in ((tenant_a, ours, our_url), (tenant_b, theirs, their_url)):
                r = await rest.post(
                    "/v1/webhooks",
                    json={"url": f"{url}/hooks", "events": ["memory.created"]},
                    headers=tenant.headers,
                )
                assert r.status_code == 201, r.text
                receiver.secret = r.json()["secret"]
            r = await rest.post(
                f"/v1/namespaces/{tenant_a.namespace}/memories",
                json={"content": "The customer's parcel goes to the back door"},
                headers=tenant_a.headers,
            )
            assert r.status_code == 201, r.text
            memory = r.json()

            async def arrived() -> bool:
                return len(ours.received) >= 1

            await until(arrived, timeout_s=10)
    [event] = ours.received  # verified against the secret by the receiver
    assert event["type"] == "memory.created" and event["data"]["id"] == memory["id"]
    assert event["data"]["content"] == "The customer's parcel goes to the back door"
    assert theirs.received == [] and theirs.requests == []  # tenant B's endpoint heard nothing
