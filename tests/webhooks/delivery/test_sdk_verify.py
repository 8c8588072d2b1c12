"""memvault_sdk.webhooks.verify against signatures made by the standardwebhooks library, and by
the sender itself."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from standardwebhooks.webhooks import Webhook

from memvault.webhooks.delivery import sender
from memvault_sdk.webhooks import WebhookVerificationError, verify
from tests.webhooks.delivery.conftest import new_secret

PAYLOAD = {"type": "memory.created", "timestamp": "2026-12-04T21:00:00Z", "data": {"content": "Ana likes tea ☕"}}


def signed(secret: str, when: datetime | None = None, body: str | None = None) -> tuple[str, dict[str, str]]:
    when = when or datetime.now(UTC)
    body = body if body is not None else sender.body_of(PAYLOAD)
    headers = {
        "Webhook-Id": "msg_1",
        "Webhook-Timestamp": str(int(when.timestamp())),
        "Webhook-Signature": Webhook(secret).sign("msg_1", when, body),
    }
    return body, headers


class TestVerify:
    def test_a_standardwebhooks_signature_verifies(self) -> None:
        secret = new_secret()
        body, headers = signed(secret)
        assert verify(body.encode(), headers, secret) == PAYLOAD
        assert verify(body, headers, secret) == PAYLOAD

    def test_the_senders_headers_verify_with_either_secret_during_a_rotation(self) -> None:
        old, new = new_secret(), new_secret()
        message = sender.Message("msg_2", PAYLOAD, "https://example.com", (new, old))
        body = sender.body_of(PAYLOAD)
        headers = sender.headers_for(message, body)
        for secret in (old, new):
            assert verify(body, headers, secret) == PAYLOAD
            assert Webhook(secret).verify(body, headers) == PAYLOAD

    def test_an_altered_body_fails(self) -> None:
        secret = new_secret()
        body, headers = signed(secret)
        with pytest.raises(WebhookVerificationError):
            verify(body.replace("tea", "coffee"), headers, secret)

    def test_another_secret_fails(self) -> None:
        body, headers = signed(new_secret())
        with pytest.raises(WebhookVerificationError):
            verify(body, headers, new_secret())

    @pytest.mark.parametrize("minutes", [-6, 6])
    def test_outside_five_minutes_fails(self, minutes: int) -> None:
        secret = new_secret()
        body, headers = signed(secret, datetime.now(UTC) + timedelta(minutes=minutes))
        with pytest.raises(WebhookVerificationError, match="tolerance"):
            verify(body, headers, secret)

    def test_missing_headers_fail(self) -> None:
        secret = new_secret()
        body, headers = signed(secret)
        del headers["Webhook-Signature"]
        with pytest.raises(WebhookVerificationError, match="missing"):
            verify(body, headers, secret)
