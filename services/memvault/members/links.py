"""Signed, expiring links (sign-up verification, invitations): JWTs signed by the OAuth key ring,
so every replica signs and checks them with the same keys and no new secret is configured. Each
kind has its own `typ` and audience, so a link of one kind is never taken for another, nor for an
access token or a sign-in ticket."""

from __future__ import annotations

import time
import uuid
from typing import Any

from joserfc import jwt
from joserfc.errors import ExpiredTokenError, JoseError

from memvault.errors import MemvaultError
from memvault.mail import Mailer, build_mailer
from memvault.oauth.issuer import IssuerOps
from memvault.oauth.keys import ALG

VERIFY_TYP = "memvault-verify+jwt"
INVITE_TYP = "memvault-invite+jwt"


class InvalidLink(MemvaultError):
    status = 400
    code = "invalid_link"
    title = "Link not valid"


class LinkExpired(MemvaultError):
    status = 410
    code = "link_expired"
    title = "Link expired"


class LinkOps(IssuerOps):
    @property
    def _mailer(self) -> Mailer:
        mailer = self.__dict__.get("_members_mailer")
        if mailer is None:
            mailer = build_mailer(self._settings)
            self.__dict__["_members_mailer"] = mailer
        return mailer

    async def _sign_link(self, typ: str, path: str, claims: dict[str, Any], ttl_s: int) -> str:
        """A link to ``path`` on the public URL carrying a token of kind ``typ``."""
        now = int(time.time())
        full = {
            "iss": self.oauth_issuer,
            "aud": self._endpoint(path),
            "jti": uuid.uuid4().hex,
            "iat": now,
            "exp": now + ttl_s,
            **claims,
        }
        key = await self._keyring.signing_key()
        return jwt.encode({"alg": ALG, "kid": key.kid, "typ": typ}, full, key, algorithms=[ALG])

    async def _read_link(self, token: str, typ: str, path: str, required: tuple[str, ...]) -> dict[str, Any]:
        """The claims of a link's token, or InvalidLink / LinkExpired."""
        try:
            return await self._verified(
                token,
                typ,
                {"iss": self.oauth_issuer, "aud": self._endpoint(path), **dict.fromkeys(required)},
            )
        except ExpiredTokenError as exc:
            raise LinkExpired("This link has expired.") from exc
        except (JoseError, ValueError, KeyError, IndexError, TypeError) as exc:
            raise InvalidLink("This link is not valid.") from exc
