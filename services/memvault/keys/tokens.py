"""API key format: ``mv_`` + 40 base62 characters. Only a SHA-256 of the key is stored.

SHA-256 rather than a slow password hash: the key has ~238 bits of entropy, so there is nothing
to brute-force, and every request pays for the check.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import string

KEY_PREFIX = "mv_"
_ALPHABET = string.ascii_letters + string.digits
_BODY_LEN = 40
LOOKUP_LEN = len(KEY_PREFIX) + 12  # the non-secret part used to find the row


def new_key() -> str:
    return KEY_PREFIX + "".join(secrets.choice(_ALPHABET) for _ in range(_BODY_LEN))


def lookup_prefix(key: str) -> str:
    return key[:LOOKUP_LEN]


def hash_key(key: str) -> str:
    return hashlib.sha256(key.encode()).hexdigest()


def looks_like_key(key: str) -> bool:
    return (
        key.startswith(KEY_PREFIX)
        and len(key) == len(KEY_PREFIX) + _BODY_LEN
        and all(c in _ALPHABET for c in key[len(KEY_PREFIX) :])
    )


def matches(key: str, stored_hash: str) -> bool:
    return hmac.compare_digest(hash_key(key), stored_hash)
