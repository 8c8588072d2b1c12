from __future__ import annotations

from datetime import datetime
from typing import Literal

from memvault_sdk._request import APIRequest, params, returns
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint
from memvault_sdk.types.account import UsageSeries
from memvault_sdk.types.admin import Account as AccountView


class _Account(APIResource):
    @endpoint
    def get(self) -> APIRequest[AccountView]:
        """The account (admin key): its plan and limits, each quota's use (``used`` / ``limit`` /
        ``resets_at``), its users, and the OAuth clients and grants they gave."""
        return APIRequest("GET", "/v1/account", returns(AccountView))

    @endpoint
    def usage(
        self,
        *,
        start: datetime | None = None,
        end: datetime | None = None,
        granularity: Literal["hour", "day"] | None = None,
        group_by: Literal["door", "namespace", "key", "operation"] | None = None,
    ) -> APIRequest[UsageSeries]:
        """What the account used per hour or day from ``start`` (inclusive, with a time zone) to
        ``end`` (exclusive, default now): requests, memories written, searches, events ingested,
        tokens embedded and bytes stored, optionally per door, namespace, key or operation."""
        query = params(**{"from": start, "to": end, "granularity": granularity, "group_by": group_by})
        return APIRequest("GET", "/v1/account/usage", returns(UsageSeries), params=query)

    # ``client.account()``, as before this resource had methods of its own.
    __call__ = get


class Account(_Account, SyncAPIResource):
    pass


class AsyncAccount(_Account, AsyncAPIResource):
    pass
