"""A small SMTP server on loopback for tests: it speaks enough of RFC 5321 (EHLO, MAIL, RCPT, DATA
with dot-unstuffing, RSET, NOOP, QUIT) for smtplib, keeps every message it accepts, and can be told
to refuse mail, so the mailer is tested at the protocol level without a real mail server. Given a
TLS context it offers STARTTLS (RFC 3207), or speaks TLS from the first byte (``implicit``), and
AUTH PLAIN once the connection is encrypted, noting whether each message and login came over TLS."""

from __future__ import annotations

import asyncio
import base64
import email
import email.policy
import re
import ssl
from dataclasses import dataclass


@dataclass
class Received:
    sender: str
    recipients: list[str]
    subject: str
    text: str
    encrypted: bool = False

    def link(self, path: str) -> str:
        found = re.search(rf"(http://\S+{re.escape(path)}\?token=\S+)", self.text)
        assert found, self.text
        return found[1]

    def token(self, path: str) -> str:
        return self.link(path).split("?token=", 1)[1]


class SmtpStub:
    def __init__(self, tls: ssl.SSLContext | None = None, *, implicit: bool = False) -> None:
        self.messages: list[Received] = []
        self.logins: list[tuple[str, str, bool]] = []  # user, password, over TLS
        self.refuse = False
        self._tls = tls
        self._implicit = implicit
        self._server: asyncio.Server | None = None
        self.port = 0

    async def start(self) -> None:
        tls = self._tls if self._implicit else None
        self._server = await asyncio.start_server(self._session, "127.0.0.1", 0, ssl=tls)
        self.port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        if self._server is not None:
            self._server.close()
            await self._server.wait_closed()

    def to(self, address: str) -> list[Received]:
        return [m for m in self.messages if address in m.recipients]

    async def _session(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        def say(line: str) -> None:
            writer.write(line.encode() + b"\r\n")

        say("220 stub ESMTP")
        sender = ""
        recipients: list[str] = []
        encrypted = self._implicit
        try:
            while line := await reader.readline():
                verb = line[:4].decode(errors="replace").upper()
                if verb in ("EHLO", "HELO"):
                    say("250-stub" if verb == "EHLO" else "250 stub")
                    if verb == "EHLO":
                        if self._tls is not None and not encrypted:
                            say("250-STARTTLS")
                        if encrypted:
                            say("250-AUTH PLAIN")
                        say("250 8BITMIME")
                elif verb == "STAR" and self._tls is not None and not encrypted:
                    say("220 Ready to start TLS")
                    await writer.drain()
                    await writer.start_tls(self._tls)
                    encrypted = True
                elif verb == "AUTH" and encrypted:
                    _, user, password = base64.b64decode(line.split()[2]).decode().split("\0")
                    self.logins.append((user, password, encrypted))
                    say("235 Authentication successful")
                elif verb == "MAIL":
                    sender, recipients = line.decode().split(":", 1)[1].strip().strip("<>"), []
                    say("250 OK")
                elif verb == "RCPT":
                    recipients.append(line.decode().split(":", 1)[1].strip().strip("<>"))
                    say("250 OK")
                elif verb == "DATA":
                    say("354 End data with <CR><LF>.<CR><LF>")
                    chunks = []
                    while (data := await reader.readline()) not in (b".\r\n", b""):
                        chunks.append(data[1:] if data.startswith(b"..") else data)
                    if self.refuse:
                        say("554 Transaction failed")
                        continue
                    msg = email.message_from_bytes(b"".join(chunks), policy=email.policy.default)
                    body = msg.get_body(("plain",))
                    text = body.get_content() if body is not None else ""  # type: ignore[union-attr]
                    self.messages.append(Received(sender, recipients, str(msg["Subject"]), text, encrypted))
                    say("250 OK")
                elif verb in ("RSET", "NOOP"):
                    say("250 OK")
                elif verb == "QUIT":
                    say("221 Bye")
                    break
                else:
                    say("502 Command not implemented")
                await writer.drain()
        except (ssl.SSLError, ConnectionError):
            pass  # a client that did not trust the certificate hung up during the handshake
        finally:
            writer.close()
