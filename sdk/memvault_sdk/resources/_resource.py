from __future__ import annotations

from typing import TYPE_CHECKING, Any, TypeVar

from memvault_sdk._base import APIRequest
from memvault_sdk.pagination import AsyncPaginator, SyncPage

if TYPE_CHECKING:
    from memvault_sdk._base import AsyncAPIClient, SyncAPIClient

T = TypeVar("T")


class SyncAPIResource:
    def __init__(self, client: SyncAPIClient) -> None:
        self._client = client

    def _ns(self, namespace: str | None) -> str:
        return self._client.namespace_path(namespace)

    def _call(self, req: APIRequest, cast_to: Any) -> Any:
        return self._client.request(req, cast_to)

    def _page(self, req: APIRequest, item: type[T]) -> SyncPage[T]:
        return SyncPage.fetch(self._client, req, item)


class AsyncAPIResource:
    def __init__(self, client: AsyncAPIClient) -> None:
        self._client = client

    def _ns(self, namespace: str | None) -> str:
        return self._client.namespace_path(namespace)

    async def _call(self, req: APIRequest, cast_to: Any) -> Any:
        return await self._client.request(req, cast_to)

    def _page(self, req: APIRequest, item: type[T]) -> AsyncPaginator[T]:
        return AsyncPaginator(self._client, req, item)
