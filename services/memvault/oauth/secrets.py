"""Passwords (Argon2id), opaque one-time secrets (codes, refresh tokens) and PKCE.

Codes and refresh tokens carry 256 random bits, so a SHA-256 of them is all that is stored (as for
API keys); passwords are chosen by people, so they get a slow, memory-hard KDF instead.
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import hmac
import os
import secrets as _secrets
from concurrent.futures import ThreadPoolExecutor

from argon2 import PasswordHasher
from argon2.exceptions import InvalidHashError, VerificationError

REFRESH_PREFIX = "mvr_"
_hasher = PasswordHasher()  # Argon2id with the library's (RFC 9106 "low memory") defaults
# Verified against when the email is unknown, so an unknown email costs as long as a wrong password.
_DUMMY_HASH = _hasher.hash(_secrets.token_urlsafe(16))

MIN_PASSWORD_LENGTH = 10
# Argon2id takes ~50 ms of CPU and 64 MiB per call. On the event loop's default pool a flood of wrong
# passwords filled every thread and queued other tenants' work behind it (their writes' latency rose
# 65x); on threads of its own, a flood waits for itself while the rest of the server runs. At most
# half the cores hash, so the other half keeps serving (docs/benchmarks.md: on 2 cores, 1 thread
# held a bystander's writes to 4x in a flood, 2 threads to 8x).
HASH_THREADS = max(1, (os.cpu_count() or 2) // 2)
_pool: ThreadPoolExecutor | None = ThreadPoolExecutor(max_workers=HASH_THREADS, thread_name_prefix="argon2")


def set_hash_executor(pool: ThreadPoolExecutor | None) -> None:
    """Where hashing runs; None is the event loop's default pool, as before issue 27. For
    loadtests/bench_signin_flood.py, which measures both in one run."""
    global _pool
    _pool = pool


def hash_executor() -> ThreadPoolExecutor | None:
    return _pool


async def hash_password(password: str) -> str:
    return await asyncio.get_running_loop().run_in_executor(_pool, _hasher.hash, password)


async def verify_password(stored_hash: str | None, password: str) -> bool:
    def check() -> bool:
        try:
            return _hasher.verify(stored_hash or _DUMMY_HASH, password) and stored_hash is not None
        except (VerificationError, InvalidHashError):
            return False

    return await asyncio.get_running_loop().run_in_executor(_pool, check)


def new_code() -> str:
    return _secrets.token_urlsafe(32)


def new_refresh_token() -> str:
    return REFRESH_PREFIX + _secrets.token_urlsafe(32)


def digest(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def s256(verifier: str) -> str:
    return base64.urlsafe_b64encode(hashlib.sha256(verifier.encode("ascii")).digest()).decode().rstrip("=")


def pkce_matches(verifier: str, challenge: str) -> bool:
    """RFC 7636 S256: 43-128 unreserved characters whose SHA-256 is the challenge."""
    if not 43 <= len(verifier) <= 128 or not verifier.isascii():
        return False
    if any(not (c.isalnum() or c in "-._~") for c in verifier):
        return False
    return hmac.compare_digest(s256(verifier), challenge)
