"""The SSRF guard: which destinations a webhook may reach, and that the checked address is used."""

from __future__ import annotations

import asyncio
import ssl
import subprocess
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import pytest
import uvicorn

from memvault.webhooks.delivery import sender
from memvault.webhooks.delivery.addresses import AddressRefused, GuardedBackend, check
from tests.servers import free_port
from tests.webhooks.delivery.conftest import Receiver, new_secret, receiving


class TestRefused:
    @pytest.mark.parametrize(
        ("url", "reason"),
        [
            ("https://127.0.0.1/in", "loopback"),
            ("https://[::1]/in", "loopback"),
            ("https://[::ffff:127.0.0.1]/in", "loopback"),
            ("https://10.1.2.3/in", "private"),
            ("https://192.168.0.10/in", "private"),
            ("https://172.16.5.5/in", "private"),
            ("https://169.254.169.254/latest/meta-data", "metadata"),
            ("https://[fd00:ec2::254]/", "metadata"),
            ("https://169.254.10.10/", "link-local"),
            ("https://0.0.0.0/", "unspecified"),
            ("https://224.0.0.1/", "multicast"),
            ("https://100.64.0.1/", "not a public address"),
            ("https://localhost/in", "loopback"),
        ],
    )
    async def test_internal_addresses(self, url: str, reason: str) -> None:
        with pytest.raises(AddressRefused, match=reason):
            await check(url, allow_private=False)

    async def test_plain_http_is_refused_unless_allowed(self) -> None:
        with pytest.raises(AddressRefused, match="plain http"):
            await check("http://93.184.215.14/in", allow_private=False)
        assert await check("http://127.0.0.1:9/in", allow_private=True) == "127.0.0.1"

    @pytest.mark.parametrize("url", ["ftp://example.com/", "https://user:pw@93.184.215.14/", "https:///nohost"])
    async def test_other_shapes(self, url: str) -> None:
        with pytest.raises(AddressRefused):
            await check(url, allow_private=True)


class TestCheckedAtConnect:
    async def test_the_transport_refuses_an_internal_name_at_connect(self) -> None:
        with pytest.raises(AddressRefused, match="loopback"):
            await GuardedBackend(allow_private=False).connect_tcp("localhost", 9)

    async def test_a_request_by_name_reaches_the_checked_address_with_its_host(self) -> None:
        receiver = Receiver(new_secret())
        async with receiving(receiver) as base, sender.client(allow_private=True) as client:
            url = base.replace("127.0.0.1", "localhost") + "/in"
            message = sender.Message("msg_x", {"type": "t", "data": {}}, url, (receiver.secret,))
            result = await sender.send(client, message, allow_private=True, timeout_s=5)
        assert result.outcome == "succeeded", result
        assert receiver.requests[0][1]["host"] == url.split("/")[2]

    async def test_the_sender_records_a_refusal_from_the_connect(self) -> None:
        async with sender.client(allow_private=False) as client:
            message = sender.Message("msg_y", {}, "https://localhost:9/in", (new_secret(),))
            result = await sender.send(client, message, allow_private=False, timeout_s=5)
        assert result.outcome == "failed"
        assert result.error is not None and result.error.startswith("refused: localhost resolves to")

    async def test_a_public_literal_passes(self) -> None:
        assert await check("https://93.184.215.14/in", allow_private=False) == "93.184.215.14"


def _certificate(folder: Path, name: str) -> tuple[Path, Path]:
    cert, key = folder / f"{name}.pem", folder / f"{name}.key"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "rsa:2048", "-nodes", "-days", "1", "-subj", f"/CN={name}",
         "-addext", f"subjectAltName=DNS:{name}", "-keyout", str(key), "-out", str(cert)],
        check=True, capture_output=True,
    )  # fmt: skip
    return cert, key


@asynccontextmanager
async def _https(receiver: Receiver, cert: Path, key: Path) -> AsyncIterator[int]:
    port = free_port()
    config = uvicorn.Config(
        receiver, host="127.0.0.1", port=port, lifespan="off", log_level="warning",
        ssl_certfile=str(cert), ssl_keyfile=str(key),
    )  # fmt: skip
    server = uvicorn.Server(config)
    task = asyncio.create_task(server.serve())
    while not server.started:  # noqa: ASYNC110 - uvicorn offers a flag, not an event
        await asyncio.sleep(0.02)
    try:
        yield port
    finally:
        server.should_exit = True
        await task


class TestHttps:
    async def test_tls_is_checked_against_the_name_on_the_pinned_connection(self, tmp_path: Path) -> None:
        receiver = Receiver(new_secret())
        cert, key = _certificate(tmp_path, "localhost")
        roots = ssl.create_default_context(cafile=str(cert))
        async with _https(receiver, cert, key) as port, sender.client(allow_private=True, ssl_context=roots) as c:
            url = f"https://localhost:{port}/in"
            message = sender.Message("msg_tls", {"type": "t", "data": {}}, url, (receiver.secret,))
            result = await sender.send(c, message, allow_private=True, timeout_s=5)
        assert result.outcome == "succeeded", result

    async def test_a_certificate_for_another_name_fails(self, tmp_path: Path) -> None:
        receiver = Receiver(new_secret())
        cert, key = _certificate(tmp_path, "other.example")
        roots = ssl.create_default_context(cafile=str(cert))
        async with _https(receiver, cert, key) as port, sender.client(allow_private=True, ssl_context=roots) as c:
            message = sender.Message("msg_tls2", {}, f"https://localhost:{port}/in", (receiver.secret,))
            result = await sender.send(c, message, allow_private=True, timeout_s=5)
        assert result.outcome == "failed" and receiver.requests == []
        assert result.error is not None and "CERTIFICATE" in result.error.upper()
