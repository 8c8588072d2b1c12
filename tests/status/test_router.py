"""Liveness, /v1/status (anonymous and with a key), request ids and the published API description."""

from __future__ import annotations

import asyncio
import re
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from dataclasses import replace
from typing import Any

import httpx
import pytest
from sqlalchemy.engine import URL

from memvault import __version__
from memvault.api import NamespaceAPI
from memvault.app import create_app
from memvault.config import Settings
from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder
from memvault.keys.schemas import KeyIn
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant, running


async def store(client: httpx.AsyncClient, tenant: Tenant, content: str, ns: str | None = None) -> None:
    r = await client.post(
        f"/v1/namespaces/{ns or tenant.namespace}/memories", json={"content": content}, headers=tenant.headers
    )
    assert r.status_code == 201, r.text


@asynccontextmanager
async def app_client(
    settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder, **overrides: Any
) -> AsyncIterator[httpx.AsyncClient]:
    """A second app over the same database, with some settings changed."""
    application = create_app(settings.model_copy(update=overrides), urls=pg_urls, embedder=embedder)
    async with running(application):
        transport = httpx.ASGITransport(app=application)
        async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
            yield c


class Relay:
    """A TCP relay on loopback to the PostgreSQL of ``target`` (its host and port, or the socket
    folder in its ``host`` query), which ``cut`` closes with every connection through it."""

    def __init__(self, target: URL) -> None:
        self._target = target
        self._server: asyncio.Server | None = None
        self._writers: set[asyncio.StreamWriter] = set()

    async def __aenter__(self) -> Relay:
        self._server = await asyncio.start_server(self._relay, "127.0.0.1", 0)
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.cut()

    def url(self, url: URL) -> URL:
        assert self._server is not None
        port = self._server.sockets[0].getsockname()[1]
        query = {k: v for k, v in url.query.items() if k != "host"}
        return url.set(host="127.0.0.1", port=port, query=query)

    async def _open(self) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        t = self._target
        if t.host:
            return await asyncio.open_connection(t.host, t.port or 5432)
        folder = t.query["host"]
        return await asyncio.open_unix_connection(f"{folder}/.s.PGSQL.{t.port or 5432}")

    async def _relay(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        up_reader, up_writer = await self._open()
        self._writers |= {writer, up_writer}

        async def pipe(src: asyncio.StreamReader, dst: asyncio.StreamWriter) -> None:
            try:
                while data := await src.read(65536):
                    dst.write(data)
                    await dst.drain()
            except (ConnectionError, OSError):
                pass
            finally:
                dst.close()

        await asyncio.gather(pipe(reader, up_writer), pipe(up_reader, writer))

    async def cut(self) -> None:
        if self._server is not None:
            self._server.close()
            self._server = None
        for w in self._writers:
            w.close()
        self._writers.clear()


class TestHealthz:
    async def test_answers_ok_without_a_key(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/healthz")

        assert r.status_code == 200
        assert r.json() == {"status": "ok"}


@pytest.mark.slow  # apps with a stopped database or Redis, waiting out their timeouts
class TestReadyz:
    async def test_ready_while_the_database_answers(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/readyz")

        assert r.status_code == 200, r.text
        assert r.json() == {
            "status": "ready",
            "database": {"ok": True},
            "redis": {"configured": True, "ok": True},
        }

    async def test_not_ready_when_the_database_stops_answering(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        # The app reaches PostgreSQL through a loopback relay the test can cut, as a network
        # partition or a database failover would.
        async with Relay(pg_urls.app) as relay:
            urls = replace(pg_urls, owner=relay.url(pg_urls.owner), app=relay.url(pg_urls.app))
            application = create_app(settings.model_copy(update={"redis_url": None}), urls=urls, embedder=embedder)
            async with running(application):
                transport = httpx.ASGITransport(app=application)
                async with httpx.AsyncClient(transport=transport, base_url="http://memvault.test") as c:
                    before = await c.get("/readyz")
                    await relay.cut()
                    ready = await c.get("/readyz")
                    alive = await c.get("/healthz")
                    status = await c.get("/v1/status")

        assert before.status_code == 200, before.text
        assert ready.status_code == 503, ready.text
        assert ready.headers["content-type"].startswith("application/problem+json")
        body = ready.json()
        assert body["code"] == "not_ready"
        assert body["database"] == {"ok": False}
        # The process itself is alive, and the dashboard says what is wrong.
        assert alive.status_code == 200
        assert status.json()["status"] == "degraded"
        assert status.json()["database"]["ok"] is False

    async def test_a_redis_outage_leaves_the_replica_ready(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        async with app_client(settings, pg_urls, embedder, redis_url="redis://127.0.0.1:1/0") as c:
            r = await c.get("/readyz")

        assert r.status_code == 200, r.text
        assert r.json()["redis"] == {"configured": True, "ok": False}


class TestStatusWithoutKey:
    async def test_reports_version_and_dependencies(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status")

        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "ok"
        assert body["version"] == __version__
        assert body["database"] == {"ok": True, "embedded": True}
        assert body["redis"] == {"configured": True, "ok": True}
        assert body["jobs"] == "redis"
        assert body["embedding_model"] == "sentence-transformers/all-MiniLM-L6-v2"

    async def test_tells_nothing_about_tenants(self, client: httpx.AsyncClient, tenant_a: Tenant) -> None:
        await store(client, tenant_a, "Ana prefers window seats")

        r = await client.get("/v1/status")

        assert r.status_code == 200
        assert "principal" not in r.json()
        assert str(tenant_a.id) not in r.text
        assert tenant_a.name not in r.text


class TestStatusWithKey:
    async def test_includes_the_callers_tenant_scopes_namespaces_and_memory_count(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        await store(client, tenant_a, "Ana prefers window seats")
        await store(client, tenant_a, "The user prefers dark roast coffee")

        r = await client.get("/v1/status", headers=tenant_a.headers)

        assert r.status_code == 200, r.text
        principal = r.json()["principal"]
        assert principal["tenant_id"] == str(tenant_a.id)
        assert principal["scopes"] == ["admin", "read", "write"]
        assert principal["namespaces"] == [tenant_a.namespace]
        assert principal["memories"] == 2
        assert principal["subject"].startswith("key:")

    async def test_a_limited_key_sees_only_its_scopes_and_namespaces(
        self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.create_namespace(tenant_a.principal, NamespaceIn(name="private"))
        await store(client, tenant_a, "shared fact")
        await store(client, tenant_a, "private fact one", ns="private")
        await store(client, tenant_a, "private fact two", ns="private")
        limited = await api.create_key(tenant_a.principal, KeyIn(scopes=["read"], namespaces=[tenant_a.namespace]))

        r = await client.get("/v1/status", headers={"Authorization": f"Bearer {limited.key}"})

        assert r.status_code == 200, r.text
        principal = r.json()["principal"]
        assert principal["scopes"] == ["read"]
        assert principal["namespaces"] == [tenant_a.namespace]
        assert principal["memories"] == 1

    async def test_other_tenant_sees_nothing(
        self, client: httpx.AsyncClient, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        await store(client, tenant_a, "Ana prefers window seats")

        r = await client.get("/v1/status", headers=tenant_b.headers)

        principal = r.json()["principal"]
        assert principal["tenant_id"] == str(tenant_b.id)
        assert principal["memories"] == 0
        assert str(tenant_a.id) not in r.text


class TestStatusWithBadKey:
    async def test_an_unknown_key_is_401(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status", headers={"Authorization": "Bearer mv_" + "x" * 40})

        assert r.status_code == 401
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.headers["www-authenticate"].startswith("Bearer")
        assert r.json()["code"] == "invalid_api_key"

    async def test_a_malformed_token_is_401(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status", headers={"Authorization": "Bearer not-a-key"})

        assert r.status_code == 401
        assert r.json()["code"] == "invalid_api_key"

    async def test_a_non_bearer_header_is_401(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status", headers={"Authorization": "Basic dXNlcjpwYXNz"})

        assert r.status_code == 401
        assert r.json()["code"] == "missing_credentials"

    async def test_a_revoked_key_is_401(self, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant) -> None:
        key = await api.create_key(tenant_a.principal, KeyIn(scopes=["read"]))
        await api.revoke_key(tenant_a.principal, key.id)

        r = await client.get("/v1/status", headers={"Authorization": f"Bearer {key.key}"})

        assert r.status_code == 401
        assert r.json()["code"] == "api_key_revoked"


@pytest.mark.slow  # apps with an unreachable Redis, waiting out its timeouts
class TestStatusDependencies:
    async def test_unreachable_redis_reports_degraded(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        # Port 1 on loopback: nothing listens there.
        async with app_client(settings, pg_urls, embedder, redis_url="redis://127.0.0.1:1/0") as c:
            r = await c.get("/v1/status")

        assert r.status_code == 200, r.text
        body = r.json()
        assert body["status"] == "degraded"
        assert body["redis"] == {"configured": True, "ok": False}
        assert body["database"]["ok"] is True

    async def test_without_redis_jobs_run_in_process(
        self, settings: Settings, pg_urls: DatabaseUrls, embedder: LocalEmbedder
    ) -> None:
        async with app_client(settings, pg_urls, embedder, redis_url=None) as c:
            r = await c.get("/v1/status")

        body = r.json()
        assert body["status"] == "ok"
        assert body["redis"] == {"configured": False, "ok": None}
        assert body["jobs"] == "in-process"


class TestRequestId:
    async def test_a_sent_request_id_is_echoed(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status", headers={"X-Request-ID": "agent-42.call:7"})

        assert r.headers["x-request-id"] == "agent-42.call:7"

    async def test_one_is_made_when_none_is_sent(self, client: httpx.AsyncClient) -> None:
        first = await client.get("/healthz")
        second = await client.get("/healthz")

        assert re.fullmatch(r"[0-9a-f]{32}", first.headers["x-request-id"])
        assert first.headers["x-request-id"] != second.headers["x-request-id"]

    async def test_an_unsafe_request_id_is_replaced(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/healthz", headers={"X-Request-ID": "evil id\twith spaces" + "x" * 200})

        assert re.fullmatch(r"[0-9a-f]{32}", r.headers["x-request-id"])

    async def test_an_error_names_the_request_id(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/v1/status", headers={"Authorization": "Bearer nope", "X-Request-ID": "trace-1"})

        assert r.status_code == 401
        assert r.headers["x-request-id"] == "trace-1"
        assert r.json()["request_id"] == "trace-1"


class TestApiDescription:
    async def test_openapi_lists_the_memory_routes(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/openapi.json")

        assert r.status_code == 200
        spec = r.json()
        assert spec["info"]["version"] == __version__
        paths = spec["paths"]
        assert {"post", "get"} <= set(paths["/v1/namespaces/{ns}/memories"])
        assert {"get", "patch", "delete"} <= set(paths["/v1/namespaces/{ns}/memories/{memory_id}"])
        assert "post" in paths["/v1/namespaces/{ns}/memories/batch"]
        assert "post" in paths["/v1/namespaces/{ns}/search"]
        assert "get" in paths["/v1/status"]

    async def test_docs_serve_html(self, client: httpx.AsyncClient) -> None:
        r = await client.get("/docs")

        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/html")
        assert "/openapi.json" in r.text
