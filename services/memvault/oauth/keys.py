"""The keys that sign access tokens, kept in PostgreSQL so every gateway replica signs and verifies
with the same set, and rotated by age: the newest key signs; a retired key stays published at the
JWKS URL, and keeps verifying, until every token it signed has expired."""

from __future__ import annotations

import base64
import json
import time
from datetime import UTC, datetime, timedelta

from joserfc.jwk import ECKey, Key, KeySet

from memvault.db.session import Database
from memvault.oauth import repository as repo
from memvault.oauth.models import SigningKey

ALG = "ES256"
# Keys are re-read at most this often; an unknown `kid` triggers an earlier re-read (a key another
# replica just made), but no more than once per MIN_RELOAD_S.
CACHE_S = 60.0
MIN_RELOAD_S = 2.0


class KeyRing:
    def __init__(self, db: Database, *, rotation_s: int, token_ttl_s: int) -> None:
        self._db = db
        self._rotation = timedelta(seconds=rotation_s)
        # A retired key verifies for as long as a token it signed can live, plus clock leeway.
        self._grace = timedelta(seconds=token_ttl_s + 60)
        self._keys: list[tuple[SigningKey, ECKey]] = []
        self._loaded_at = 0.0

    async def _load(self) -> None:
        async with self._db.unscoped() as s:
            rows = await repo.signing_keys(s)
        self._keys = [(r, ECKey.import_key(r.private_pem, {"kid": r.kid, "alg": r.alg, "use": "sig"})) for r in rows]
        self._loaded_at = time.monotonic()

    async def _fresh(self) -> None:
        if time.monotonic() - self._loaded_at > CACHE_S:
            await self._load()

    async def signing_key(self) -> ECKey:
        """The key to sign with now; makes one (and retires the others) when the newest is too old."""
        await self._fresh()
        now = datetime.now(UTC)
        current = next((k for r, k in self._keys if r.retired_at is None and now - r.created_at < self._rotation), None)
        if current is not None:
            return current
        await self.rotate()
        return self._keys[0][1]

    async def rotate(self) -> str:
        """Make a new signing key now; the previous ones retire but keep verifying. Returns its kid."""
        key = ECKey.generate_key("P-256", auto_kid=True)
        pem = key.as_pem(private=True)
        async with self._db.unscoped() as s:
            now = datetime.now(UTC)
            await repo.rotate_signing_keys(
                s,
                kid=str(key.kid),
                alg=ALG,
                private_pem=pem.decode() if isinstance(pem, bytes) else pem,
                now=now,
                # Keys retired long enough ago that no token they signed can still be valid.
                drop_retired_before=now - self._grace,
            )
        await self._load()
        return str(key.kid)

    def _live(self) -> list[ECKey]:
        now = datetime.now(UTC)
        return [k for r, k in self._keys if r.retired_at is None or now - r.retired_at < self._grace]

    async def verification_keys(self, kid: str | None = None) -> KeySet:
        await self._fresh()
        unknown = kid is not None and all(k.kid != kid for k in self._live())
        if unknown and time.monotonic() - self._loaded_at > MIN_RELOAD_S:
            await self._load()
        live: list[Key] = list(self._live())
        return KeySet(live)

    async def jwks(self) -> dict[str, object]:
        """The public halves, for /oauth/jwks.json."""
        await self._fresh()
        return {"keys": [{**k.as_dict(private=False), "alg": ALG, "use": "sig"} for k in self._live()]}


class MalformedToken(ValueError):
    """Whatever a presented token's shape gets wrong; every caller already answers ValueError with 401."""


def kid_of(raw: str) -> str | None:
    """The `kid` of a compact JWS, read before its signature is checked. Everything in it is the
    sender's choice: a header that is JSON but not an object (a list, number, string, null), a `kid`
    that is not a string, bad base64 or a part count other than three all end as MalformedToken."""
    parts = raw.split(".")
    if len(parts) != 3:
        raise MalformedToken("a JWT has three parts")
    try:
        header = json.loads(base64.urlsafe_b64decode(parts[0] + "=" * (-len(parts[0]) % 4)))
    except (ValueError, RecursionError) as exc:  # binascii.Error and UnicodeDecodeError are ValueErrors
        raise MalformedToken("the JWT header is not base64url JSON") from exc
    if not isinstance(header, dict):
        raise MalformedToken("the JWT header is not a JSON object")
    kid = header.get("kid")
    if kid is not None and not isinstance(kid, str):
        raise MalformedToken("the JWT kid is not a string")
    return kid
