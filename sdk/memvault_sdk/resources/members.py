"""The organisation's members and invitations (admin scope; docs/accounts.md)."""

from __future__ import annotations

from memvault_sdk._request import APIRequest, body, params, returns, segment
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint, paginated
from memvault_sdk.types.members import Invitation, InvitationCreate, Member, Role, RoleChange


class _Members(APIResource):
    @paginated
    def list(self, *, limit: int | None = None) -> APIRequest[PageData[Member]]:
        """Members newest first, with their roles."""
        return APIRequest("GET", "/v1/members", returns(PageData[Member]), params=params(limit=limit))

    @endpoint
    def invite(
        self, email: str, *, role: Role | None = None, idempotency_key: str | None = None
    ) -> APIRequest[Invitation]:
        """Mail ``email`` a signed link that makes them a member with ``role`` (default member)."""
        payload = body(InvitationCreate, email=email, role=role)
        return APIRequest(
            "POST", "/v1/members/invitations", returns(Invitation), body=payload, idempotency_key=idempotency_key
        )

    @paginated
    def invitations(self, *, pending: bool | None = None, limit: int | None = None) -> APIRequest[PageData[Invitation]]:
        """Invitations newest first; by default only those that may still be accepted."""
        query = params(pending=pending, limit=limit)
        return APIRequest("GET", "/v1/members/invitations", returns(PageData[Invitation]), params=query)

    @endpoint
    def revoke_invitation(self, invitation_id: str, *, idempotency_key: str | None = None) -> APIRequest[Invitation]:
        """End an invitation: its link stops working."""
        path = f"/v1/members/invitations/{segment(invitation_id)}"
        return APIRequest("DELETE", path, returns(Invitation), idempotency_key=idempotency_key)

    @endpoint
    def set_role(self, member_id: str, role: Role, *, idempotency_key: str | None = None) -> APIRequest[Member]:
        """Change a member's role (only owners make or unmake owners; the last owner stays)."""
        payload = body(RoleChange, role=role)
        path = f"/v1/members/{segment(member_id)}"
        return APIRequest("PATCH", path, returns(Member), body=payload, idempotency_key=idempotency_key)

    @endpoint
    def remove(self, member_id: str, *, idempotency_key: str | None = None) -> APIRequest[Member]:
        """Remove a member; their OAuth grants end at once."""
        return APIRequest(
            "DELETE", f"/v1/members/{segment(member_id)}", returns(Member), idempotency_key=idempotency_key
        )


class Members(_Members, SyncAPIResource):
    pass


class AsyncMembers(_Members, AsyncAPIResource):
    pass
