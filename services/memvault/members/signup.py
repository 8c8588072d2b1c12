"""SignupOps: self-serve sign-up. An organisation is a tenant on the plan of signup_plan, with
its first namespace and its owner; the owner proves the address by a signed link before anything
works (they cannot sign in, and the organisation has no API key, until then).

What an answer tells: sign-up never says whether an address has an account. Users are per
tenant, so signing up again with the same address simply makes another organisation (sign-in
then offers the choice of account). The only refusal about existing things is an organisation
name already taken, which is public by nature (it is what people choose at sign-in).
"""

from __future__ import annotations

import contextlib
import uuid
from datetime import UTC, datetime, timedelta

from memvault import operator
from memvault.errors import Forbidden
from memvault.keys import repository as keys_repo
from memvault.mail import MailFailed, Message
from memvault.members.links import VERIFY_TYP, InvalidLink, LinkOps
from memvault.members.schemas import ResendIn, SignupIn, SignupOut, VerifiedOut
from memvault.members.service import check_password
from memvault.oauth import repository as oauth_repo
from memvault.oauth import secrets
from memvault.principal import Principal
from memvault.ratelimit import Limit, client_address
from memvault.tenants import repository as tenants_repo
from memvault.tenants.service import NewOrganisation

VERIFY_PATH = "/signup/verify"


class SignupClosed(Forbidden):
    code = "signup_closed"
    title = "Sign-up is closed"


class SignupOps(LinkOps):
    @property
    def signup_closed(self) -> bool:
        return self._settings.signup != "open"

    async def _limit_signup(self, address: str | None) -> None:
        if self._settings.signup != "open":
            raise SignupClosed("This server does not take sign-ups; ask its operator for an account.")
        limit = Limit("signup", self._settings.signup_limit)
        await self._limiter.hit(limit, client_address(address), what="sign-ups")

    async def _send_verification(self, email: str, organisation: str, tenant_id: uuid.UUID, user_id: uuid.UUID) -> None:
        ttl = self._settings.signup_verify_ttl_s
        token = await self._sign_link(VERIFY_TYP, VERIFY_PATH, {"tid": str(tenant_id), "sub": str(user_id)}, ttl)
        until = datetime.now(UTC) + timedelta(seconds=ttl)
        await self._mailer.send(
            Message(
                to=email,
                subject=f"Verify your email for {organisation} on memvault",
                text=(
                    f"Someone (we hope you) signed up for memvault as {organisation}.\n\n"
                    f"Verify your email address to start:\n{self._endpoint(VERIFY_PATH)}?token={token}\n\n"
                    f"The link works until {until:%Y-%m-%d %H:%M} UTC. If this was not you, ignore this mail."
                ),
            )
        )

    async def signup(self, body: SignupIn, *, address: str | None = None) -> SignupOut:
        """Create an organisation and its unverified owner, and mail the verification link. A
        mail that cannot be sent undoes the sign-up (503 mail_unavailable)."""
        await self._limit_signup(address)
        check_password(body.password)
        password_hash = await secrets.hash_password(body.password)

        async def mail(org: NewOrganisation) -> None:
            await self._send_verification(org.owner_email, org.name, org.id, org.owner_id)

        await operator.create_organisation(
            self._db,
            body.organisation,
            namespace=body.namespace,
            plan=self._settings.signup_plan,
            owner_email=body.email,
            owner_password_hash=password_hash,
            then=mail,
        )
        return SignupOut(
            organisation=body.organisation, namespace=body.namespace, email=body.email, verification="sent"
        )

    async def resend_verification(self, body: ResendIn, *, address: str | None = None) -> None:
        """Mail a new link for each organisation this address signed up and has not verified.
        The answer is the same whether there was any, so it tells nobody who has an account."""
        await self._limit_signup(address)
        async with self._db.unscoped() as s:
            found = await oauth_repo.find_users_by_email(s, body.email)
        for f in found:
            if not f.email_verified and f.disabled_at is None:
                # Logged by the mailer; a 503 here would say that the address has an account.
                with contextlib.suppress(MailFailed):
                    await self._send_verification(body.email, f.tenant_name, f.tenant_id, f.id)

    async def verify_signup(self, token: str) -> VerifiedOut:
        """Follow the link: the owner's address is verified, and the organisation's first admin
        key is issued and shown once. Following it again verifies nothing more and shows no key."""
        claims = await self._read_link(token, VERIFY_TYP, VERIFY_PATH, ("tid", "sub"))
        try:
            tenant_id, user_id = uuid.UUID(str(claims["tid"])), uuid.UUID(str(claims["sub"]))
        except ValueError as exc:
            raise InvalidLink("This link is not valid.") from exc
        async with self._db.tenant_tx(tenant_id) as tx:
            user = await oauth_repo.get_user(tx.session, tenant_id, user_id)
            tenant = await tenants_repo.get(tx.session, tenant_id)
            if user is None or tenant is None:
                raise InvalidLink("This link is not valid.")
            names = await oauth_repo.namespace_names(tx.session, tenant_id)
            namespace = names[0] if names else None
            key_id, raw = None, None
            first = await oauth_repo.verify_email(tx.session, tenant_id, user_id)
            if first:
                key, raw = await keys_repo.create(
                    tx.session,
                    tenant_id,
                    name=f"admin (issued to {user.email} at sign-up)",
                    scopes=["read", "write", "admin"],
                    namespaces=None,
                    default_namespace=namespace,
                )
                key_id = key.id
                me = Principal(tenant_id=tenant_id, scopes=frozenset(), subject=f"user:{user_id}")
                await self._audit(tx, me, "signup.verify", target_id=str(user_id), detail={"key_id": str(key.id)})
        return VerifiedOut(
            organisation=tenant.name,
            tenant_id=tenant_id,
            namespace=namespace,
            email=user.email,
            already_verified=not first,
            key_id=key_id,
            api_key=raw,
        )
