"""Mail over TLS, at the protocol level against the loopback stub (tests/members/smtp.py) with a
certificate of a test CA (trustme): implicit TLS (SMTPS) and STARTTLS deliver, and log in only
once the connection is encrypted; a server whose certificate the system does not trust, or that
does not offer the STARTTLS asked for, gets neither the password nor the message."""

from __future__ import annotations

import ssl
from collections.abc import AsyncIterator

import pytest
import trustme
from pydantic import SecretStr

from memvault.config import Settings
from memvault.mail import MailFailed, Message, SmtpMailer
from tests.members.smtp import SmtpStub

MAIL = Message(to="ana@example.com", subject="Verify your address", text="http://x/signup/verify?token=t")


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def trusted(ca: trustme.CA, tmp_path: object, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test CA as the system's trust store, as an operator with a private CA would set it."""
    path = f"{tmp_path}/ca.pem"
    ca.cert_pem.write_to_path(path)
    monkeypatch.setenv("SSL_CERT_FILE", path)


def server_context(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    return context


async def stub(tls: ssl.SSLContext | None, *, implicit: bool = False) -> AsyncIterator[SmtpStub]:
    server = SmtpStub(tls, implicit=implicit)
    await server.start()
    try:
        yield server
    finally:
        await server.stop()


@pytest.fixture
async def smtps(ca: trustme.CA) -> AsyncIterator[SmtpStub]:
    async for server in stub(server_context(ca), implicit=True):
        yield server


@pytest.fixture
async def starttls(ca: trustme.CA) -> AsyncIterator[SmtpStub]:
    async for server in stub(server_context(ca)):
        yield server


@pytest.fixture
async def plain() -> AsyncIterator[SmtpStub]:
    async for server in stub(None):
        yield server


def mailer(settings: Settings, server: SmtpStub, **tls: bool) -> SmtpMailer:
    own = settings.model_copy(
        update={
            "mailer": "smtp",
            "smtp_host": "127.0.0.1",
            "smtp_port": server.port,
            "smtp_user": "memvault",
            "smtp_timeout_s": 5.0,
            **tls,
        }
    )
    own.smtp_password = SecretStr("s3cret-mail")
    return SmtpMailer(own)


@pytest.mark.usefixtures("trusted")
async def test_implicit_tls_delivers_and_logs_in_encrypted(settings: Settings, smtps: SmtpStub) -> None:
    await mailer(settings, smtps, smtp_tls=True).send(MAIL)
    [got] = smtps.to("ana@example.com")
    assert got.encrypted and got.subject == MAIL.subject and got.text.strip() == MAIL.text
    assert smtps.logins == [("memvault", "s3cret-mail", True)]


@pytest.mark.usefixtures("trusted")
async def test_starttls_delivers_and_logs_in_encrypted(settings: Settings, starttls: SmtpStub) -> None:
    await mailer(settings, starttls, smtp_starttls=True).send(MAIL)
    [got] = starttls.to("ana@example.com")
    assert got.encrypted
    assert starttls.logins == [("memvault", "s3cret-mail", True)]


async def test_an_untrusted_certificate_gets_nothing(settings: Settings, smtps: SmtpStub, starttls: SmtpStub) -> None:
    # No SSL_CERT_FILE: the test CA is not in the system's trust store.
    with pytest.raises(MailFailed):
        await mailer(settings, smtps, smtp_tls=True).send(MAIL)
    with pytest.raises(MailFailed):
        await mailer(settings, starttls, smtp_starttls=True).send(MAIL)
    assert smtps.messages == starttls.messages == [] and smtps.logins == starttls.logins == []


async def test_a_server_without_starttls_gets_nothing_in_clear_text(settings: Settings, plain: SmtpStub) -> None:
    with pytest.raises(MailFailed):
        await mailer(settings, plain, smtp_starttls=True).send(MAIL)
    assert plain.messages == [] and plain.logins == []
