"""Outgoing mail (sign-up verification, invitations), pluggable: the log mailer writes each
message to the server log, so a local install works with no mail server; the SMTP mailer sends
through the configured server (stdlib smtplib, run in a thread: one short conversation per mail),
over STARTTLS or implicit TLS."""

from __future__ import annotations

import asyncio
import logging
import smtplib
import ssl
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Protocol

from memvault.config import Settings
from memvault.errors import Unavailable

log = logging.getLogger(__name__)


class MailFailed(Unavailable):
    code = "mail_unavailable"
    title = "Mail could not be sent"


@dataclass(frozen=True)
class Message:
    to: str
    subject: str
    text: str


class Mailer(Protocol):
    async def send(self, message: Message) -> None:
        """Deliver one message, or raise MailFailed."""
        ...


class LogMailer:
    """Writes the whole message (and so its link) to the log, at WARNING so a default log shows it."""

    async def send(self, message: Message) -> None:
        log.warning("mail to %s (mailer=log): %s\n%s", message.to, message.subject, message.text)


class SmtpMailer:
    def __init__(self, settings: Settings) -> None:
        if not settings.smtp_host:
            raise ValueError("MEMVAULT_MAILER=smtp needs MEMVAULT_SMTP_HOST")
        self._s = settings

    def _send(self, message: Message) -> None:
        s = self._s
        mail = EmailMessage()
        mail["From"] = s.mail_from
        mail["To"] = message.to
        mail["Subject"] = message.subject
        mail.set_content(message.text)
        assert s.smtp_host is not None
        # The system's trust store (SSL_CERT_FILE / SSL_CERT_DIR name another) and the host name
        # checked: a server that cannot prove who it is gets no password and no link.
        tls = ssl.create_default_context()
        opened = (
            smtplib.SMTP_SSL(s.smtp_host, s.smtp_port, timeout=s.smtp_timeout_s, context=tls)
            if s.smtp_tls
            else smtplib.SMTP(s.smtp_host, s.smtp_port, timeout=s.smtp_timeout_s)
        )
        with opened as smtp:
            if s.smtp_starttls and not s.smtp_tls:
                # A server that does not offer STARTTLS fails the mail (SMTPNotSupportedError):
                # nothing goes out in clear text because the upgrade was missing.
                smtp.starttls(context=tls)
            if s.smtp_user:
                smtp.login(s.smtp_user, s.smtp_password.get_secret_value() if s.smtp_password else "")
            smtp.send_message(mail)

    async def send(self, message: Message) -> None:
        try:
            await asyncio.to_thread(self._send, message)
        except (OSError, smtplib.SMTPException) as exc:
            log.warning("sending mail to %s failed: %s", message.to, exc)
            raise MailFailed("The mail could not be sent; try again later.") from exc


def build_mailer(settings: Settings) -> Mailer:
    return SmtpMailer(settings) if settings.mailer == "smtp" else LogMailer()
