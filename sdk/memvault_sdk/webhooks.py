"""Verifying a memvault webhook in your receiver (the Standard Webhooks scheme).

memvault signs each delivery's body with HMAC-SHA256 over ``"{webhook-id}.{webhook-timestamp}.{body}"``
keyed by the endpoint's secret (``whsec_`` + base64), and sends ``webhook-signature`` as one or
more ``v1,<base64>`` values separated by spaces (two during a secret rotation). This is that check
with the standard library only, so the SDK keeps its two dependencies; the ``standardwebhooks``
package verifies the same deliveries.

    payload = verify(request_body, request.headers, secret)   # raises WebhookVerificationError
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import time
from collections.abc import Mapping
from typing import Any

# A delivery older or newer than this is refused, so a captured request cannot be replayed later.
TOLERANCE_S = 5 * 60
_PREFIX = "whsec_"


class WebhookVerificationError(Exception):
    """The delivery is not from memvault, was altered, or is too old or too new."""


def _key(secret: str) -> bytes:
    raw = secret[len(_PREFIX) :] if secret.startswith(_PREFIX) else secret
    try:
        key = base64.b64decode(raw + "==")  # tolerate unpadded secrets, as standardwebhooks does
    except (binascii.Error, ValueError) as exc:
        raise WebhookVerificationError("the secret is not base64") from exc
    if not key:
        raise WebhookVerificationError("the secret is empty")
    return key


def verify(
    payload: bytes | str, headers: Mapping[str, str], secret: str, *, tolerance_s: int = TOLERANCE_S
) -> dict[str, Any]:
    """The delivery's JSON body once its signature checks out; else WebhookVerificationError.

    ``payload``: the raw request body exactly as received (bytes; a str is taken as its UTF-8), not
    a re-serialised parse of it. ``headers``: the request's headers (any case). ``secret``: the
    endpoint's ``whsec_...`` secret."""
    body = payload.encode() if isinstance(payload, str) else bytes(payload)
    lower = {k.lower(): v for k, v in headers.items()}
    msg_id, stamp, signatures = lower.get("webhook-id"), lower.get("webhook-timestamp"), lower.get("webhook-signature")
    if not (msg_id and stamp and signatures):
        raise WebhookVerificationError("missing webhook-id, webhook-timestamp or webhook-signature")
    try:
        sent_at = int(stamp)
    except ValueError as exc:
        raise WebhookVerificationError("webhook-timestamp is not a number") from exc
    if abs(time.time() - sent_at) > tolerance_s:
        raise WebhookVerificationError("webhook-timestamp is outside the tolerance")
    digest = hmac.new(_key(secret), f"{msg_id}.{sent_at}.".encode() + body, hashlib.sha256).digest()
    expected = base64.b64encode(digest).decode()
    for candidate in signatures.split(" "):
        version, _, value = candidate.partition(",")
        if version == "v1" and hmac.compare_digest(value.encode(), expected.encode()):
            return dict(json.loads(body))
    raise WebhookVerificationError("no matching signature")
