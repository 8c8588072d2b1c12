"""Each exception class from a real response: the server's own where it has one, the
fault-injecting proxy's for a 429 (the server has no rate limits yet), a stall and a closed port."""

from __future__ import annotations

import socket
import uuid
from typing import Any

import pytest

import memvault_sdk
from memvault_sdk import (
    APIStatusError,
    AsyncMemVault,
    AuthenticationError,
    ConflictError,
    MemVault,
    MemVaultError,
    NotFoundError,
    PermissionDeniedError,
    RateLimitError,
    SecretDetectedError,
    ServerError,
    ValidationError,
)
from tests.conftest import Tenant
from tests.sdk.conftest import FaultProxy, call


def assert_carries(exc: APIStatusError, status: int, code: str) -> None:
    assert (exc.status, exc.code) == (status, code)
    assert exc.request_id
    assert exc.response.status_code == status
    assert code in str(exc) and exc.request_id in str(exc)


async def test_authentication_error(server_url: str) -> None:
    bad = MemVault(api_key="mv_live_0123456789abcdefNOTAKEY", base_url=server_url)
    with bad as c, pytest.raises(AuthenticationError) as exc:
        c.memories.list()
    assert_carries(exc.value, 401, "invalid_api_key")


async def test_permission_denied_error(client: Any, server_url: str) -> None:
    key = await call(client.keys.create(name="reader", scopes=["read"]))
    async with AsyncMemVault(api_key=key.key, base_url=server_url) as reader:
        with pytest.raises(PermissionDeniedError) as exc:
            await reader.memories.create("not allowed")
    assert_carries(exc.value, 403, "forbidden")


async def test_not_found_error(client: Any) -> None:
    with pytest.raises(NotFoundError) as exc:
        await call(client.memories.get(str(uuid.uuid4())))
    assert_carries(exc.value, 404, "memory_not_found")


async def test_validation_error_names_the_field(client: Any) -> None:
    with pytest.raises(ValidationError) as exc:
        await call(client.memories.create_many([{"content": "fine"}, {"content": " "}]))
    assert_carries(exc.value, 422, "validation_error")
    assert exc.value.field == "memories[1].content"
    assert exc.value.errors and exc.value.errors[0]["field"] == "memories[1].content"


async def test_secret_detected_error(client: Any) -> None:
    with pytest.raises(SecretDetectedError) as exc:
        await call(client.memories.create("my key is AKIAIOSFODNN7EXAMPLE wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY"))
    assert_carries(exc.value, 422, "secret_detected")
    assert isinstance(exc.value, ValidationError)
    assert exc.value.kind and exc.value.field == "content"
    assert "AKIA" not in str(exc.value)


async def test_conflict_error(client: Any) -> None:
    with pytest.raises(ConflictError) as exc:
        await call(client.namespaces.create("default"))
    assert_carries(exc.value, 409, "namespace_exists")


async def test_rate_limit_error_carries_retry_after(proxy: FaultProxy, tenant_a: Tenant) -> None:
    proxy.add("reject", "GET", "/v1/namespaces/default/memories", status=429, headers={"Retry-After": "7"})
    with MemVault(api_key=tenant_a.key, base_url=proxy.url, max_retries=0) as c, pytest.raises(RateLimitError) as exc:
        c.memories.list()
    assert_carries(exc.value, 429, "rate_limited")
    assert exc.value.retry_after == 7


async def test_server_error(proxy: FaultProxy, tenant_a: Tenant) -> None:
    proxy.add("reject", "GET", "/v1/namespaces/default/memories", status=503)
    async with AsyncMemVault(api_key=tenant_a.key, base_url=proxy.url, max_retries=0) as c:
        with pytest.raises(ServerError) as exc:
            await c.memories.list()
    assert_carries(exc.value, 503, "unavailable")


async def test_connection_error() -> None:
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    sock.close()  # nothing listens there now
    closed = MemVault(api_key="mv_x", base_url=f"http://127.0.0.1:{port}", max_retries=1)
    with closed as c, pytest.raises(memvault_sdk.MemVaultConnectionError) as exc:
        c.status()
    assert not isinstance(exc.value, memvault_sdk.MemVaultTimeoutError)
    assert isinstance(exc.value, MemVaultError)


async def test_timeout_error(proxy: FaultProxy, tenant_a: Tenant) -> None:
    proxy.add("stall", "GET", "/v1/status")
    async with AsyncMemVault(api_key=tenant_a.key, base_url=proxy.url, timeout=0.5, max_retries=0) as c:
        with pytest.raises(memvault_sdk.MemVaultTimeoutError) as exc:
            await c.status()
    assert isinstance(exc.value, memvault_sdk.MemVaultConnectionError)


def test_a_client_needs_a_key(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("MEMVAULT_API_KEY", raising=False)
    with pytest.raises(MemVaultError, match="MEMVAULT_API_KEY"):
        MemVault()


def test_settings_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_API_KEY", "mv_from_env")
    monkeypatch.setenv("MEMVAULT_BASE_URL", "http://memvault.example:9000/")
    monkeypatch.setenv("MEMVAULT_NAMESPACE", "prod")
    with MemVault() as c:
        assert (c.api_key, c.base_url, c.namespace) == ("mv_from_env", "http://memvault.example:9000", "prod")


def test_no_name_shadows_a_builtin_and_the_old_names_still_resolve() -> None:
    """`from memvault_sdk import *` must not replace Python's ConnectionError and TimeoutError;
    code written against the pre-0.2 names still gets the same classes, with a warning."""
    star: dict[str, Any] = {}
    exec("from memvault_sdk import *", star)
    assert star.get("ConnectionError", ConnectionError) is ConnectionError
    assert star.get("TimeoutError", TimeoutError) is TimeoutError
    assert "ConnectionError" not in vars(memvault_sdk) and "TimeoutError" not in vars(memvault_sdk)
    with pytest.warns(DeprecationWarning, match="MemVaultConnectionError"):
        assert memvault_sdk.ConnectionError is memvault_sdk.MemVaultConnectionError
    with pytest.warns(DeprecationWarning, match="MemVaultTimeoutError"):
        from memvault_sdk import TimeoutError as Old
    assert Old is memvault_sdk.MemVaultTimeoutError
    assert issubclass(Old, memvault_sdk.MemVaultConnectionError) and not issubclass(Old, TimeoutError)
    with pytest.raises(AttributeError):
        memvault_sdk.NoSuchError  # noqa: B018
