"""Malformed bearers and registration bodies, over one real keep-alive connection: each gets a clear
4xx, never a 500, and the connection stays usable for the next request (a 500 made uvicorn drop it)."""

from __future__ import annotations

import asyncio
import base64
import json
from urllib.parse import urlencode, urlsplit

import httpx
import pytest

from tests.oauth.conftest import Browser, Server, User, authorization_url, hidden_fields, pkce, register


def _b64(raw: bytes) -> str:
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


# JWT headers that decode to JSON but not to an object, and a few other shapes a parser must survive.
BAD_BEARERS = [
    _b64(header) + ".e30.c2ln" for header in (b"[]", b"1", b'"x"', b"null", b'{"kid": [1]}', b"[" * 5000, b"\xff\xfe")
] + ["a.b", "....", "%%%.%%%.%%%"]


class Connection:
    """One HTTP/1.1 connection kept alive across requests, as a browser or SDK holds it."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, host: str) -> None:
        self.reader, self.writer, self.host = reader, writer, host

    @classmethod
    async def open(cls, base: str) -> Connection:
        parts = urlsplit(base)
        reader, writer = await asyncio.open_connection(parts.hostname, parts.port)
        return cls(reader, writer, parts.netloc)

    async def request(
        self, method: str, path: str, *, body: bytes = b"", headers: dict[str, str] | None = None
    ) -> tuple[int, dict[str, str], bytes]:
        lines = [f"{method} {path} HTTP/1.1", f"Host: {self.host}", f"Content-Length: {len(body)}"]
        lines += [f"{k}: {v}" for k, v in (headers or {}).items()]
        self.writer.write(("\r\n".join(lines) + "\r\n\r\n").encode() + body)
        await self.writer.drain()
        head = await asyncio.wait_for(self.reader.readuntil(b"\r\n\r\n"), 10)
        status_line, *header_lines = head.decode("latin-1").split("\r\n")
        got = {}
        for line in header_lines:
            if line:
                k, _, v = line.partition(":")
                got[k.strip().lower()] = v.strip()
        data = await self.reader.readexactly(int(got.get("content-length", "0")))
        return int(status_line.split()[1]), got, data

    async def close(self) -> None:
        self.writer.close()
        await self.writer.wait_closed()


async def _still_alive(conn: Connection) -> None:
    status, headers, _ = await conn.request("GET", "/.well-known/oauth-authorization-server")
    assert status == 200 and headers.get("connection") != "close"


class TestMalformedBearers:
    @pytest.mark.parametrize("bearer", BAD_BEARERS)
    async def test_mcp_answers_401_with_a_challenge_and_keeps_the_connection(
        self, oauth_server: Server, bearer: str
    ) -> None:
        conn = await Connection.open(oauth_server.base)
        try:
            status, headers, body = await conn.request(
                "POST",
                "/mcp",
                body=json.dumps({"jsonrpc": "2.0", "id": 1, "method": "ping"}).encode(),
                headers={
                    "Authorization": f"Bearer {bearer}",
                    "Content-Type": "application/json",
                    "Accept": "application/json, text/event-stream",
                },
            )
            assert status == 401, body
            assert 'error="invalid_token"' in headers["www-authenticate"]
            assert json.loads(body)["code"] == "invalid_token"
            await _still_alive(conn)
        finally:
            await conn.close()

    async def test_revocation_ignores_them(self, oauth_server: Server) -> None:
        conn = await Connection.open(oauth_server.base)
        try:
            for bearer in BAD_BEARERS:
                status, _, body = await conn.request(
                    "POST",
                    "/oauth/revoke",
                    body=urlencode({"token": bearer}).encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded"},
                )
                # RFC 7009: a token the server does not know is answered like a revoked one.
                assert status == 200, (bearer, body)
            await _still_alive(conn)
        finally:
            await conn.close()

    async def test_consent_step_sends_a_bad_ticket_back_to_sign_in(
        self, oauth_server: Server, http: httpx.AsyncClient, user_a: User
    ) -> None:
        registered = await register(http, oauth_server)
        _, challenge = pkce()
        url = authorization_url(oauth_server, registered["client_id"], challenge)
        page = await Browser(http, user_a).sign_in(url)
        fields = [(k, v) for k, v in hidden_fields(page.text) if k != "ticket"]
        conn = await Connection.open(oauth_server.base)
        try:
            for bearer in BAD_BEARERS:
                form = [*fields, ("ticket", bearer), ("namespace", "default"), ("decision", "allow")]
                status, _, body = await conn.request(
                    "POST",
                    "/oauth/authorize",
                    body=urlencode(form).encode(),
                    headers={"Content-Type": "application/x-www-form-urlencoded", "Origin": oauth_server.base},
                )
                assert status == 401 and b"sign in again" in body, (bearer, status)
            await _still_alive(conn)
        finally:
            await conn.close()


BAD_REGISTRATIONS = [
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "grant_types": [[]]}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "grant_types": [{}]}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "a\\u0000b"}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "client_name": "\\ud800"}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "contacts": ["\\udfff@example.com"]}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb\\u0000"]}',
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "tos_uri": ' + b"[" * 100_000 + b"]" * 100_000 + b"}",
    b'{"redirect_uris": ["http://127.0.0.1:9/cb"], "x": ' + b"[" * 50 + b"]" * 50 + b"}",
    b"[" * 100_000,
    b"\xff\xfe",
    b"null",
]


class TestMalformedRegistration:
    async def test_each_gets_400_and_the_connection_stays(self, oauth_server: Server) -> None:
        conn = await Connection.open(oauth_server.base)
        try:
            for body in BAD_REGISTRATIONS:
                status, _, answer = await conn.request(
                    "POST", "/oauth/register", body=body, headers={"Content-Type": "application/json"}
                )
                assert status == 400, (body[:80], status, answer[:200])
                assert json.loads(answer)["error"] in ("invalid_client_metadata", "invalid_redirect_uri")
            await _still_alive(conn)
        finally:
            await conn.close()

    async def test_nul_in_an_oauth_parameter_is_a_400(self, oauth_server: Server) -> None:
        conn = await Connection.open(oauth_server.base)
        try:
            status, _, body = await conn.request("GET", "/oauth/authorize?client_id=a%00b&response_type=code")
            assert status == 400, body
            status, _, body = await conn.request(
                "POST",
                "/oauth/token",
                body=b"grant_type=authorization_code&client_id=a%00b&code=x&code_verifier=y",
                headers={"Content-Type": "application/x-www-form-urlencoded"},
            )
            assert status == 400 and json.loads(body)["error"] == "invalid_request", body
            await _still_alive(conn)
        finally:
            await conn.close()
