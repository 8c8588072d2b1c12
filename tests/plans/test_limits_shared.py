"""Two gateway replicas on one Redis share one count per key and tenant, and one set of
concurrency slots; without Redis each process counts alone (the no-setup `memvault serve`)."""

from __future__ import annotations

import httpx

from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from tests.conftest import make_tenant, running


async def test_two_replicas_on_one_redis_share_the_limit(
    api: NamespaceAPI, client: httpx.AsyncClient, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
) -> None:
    t = await make_tenant(api, "replicas")
    await api.set_tenant_plan(t.id, "unlimited", {"key_searches_per_minute": 4})
    path, body = f"/v1/namespaces/{t.namespace}/search", {"query": "window seats"}
    async with running(create_app(settings, urls=pg_urls, embedder=embedder)) as second:
        transport = httpx.ASGITransport(app=second)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as other:
            answers = []
            for replica in (client, other, client, other, client, other):
                answers.append((await replica.post(path, json=body, headers=t.headers)).status_code)
            assert answers == [200, 200, 200, 200, 429, 429]
            r = await other.post(path, json=body, headers=t.headers)
            assert r.headers["ratelimit"].startswith('"key-search";r=0;')


async def test_without_redis_each_process_counts_alone(
    api: NamespaceAPI, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
) -> None:
    t = await make_tenant(api, "no-redis")
    await api.set_tenant_plan(t.id, "unlimited", {"key_searches_per_minute": 2, "concurrent_requests": 1})
    path, body = f"/v1/namespaces/{t.namespace}/search", {"query": "window seats"}
    local = settings.model_copy(update={"redis_url": None})
    async with running(create_app(local, urls=pg_urls, embedder=embedder)) as app:
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
            codes = [(await c.post(path, json=body, headers=t.headers)).status_code for _ in range(3)]
            assert codes == [200, 200, 429]
