"""Lists come back a page at a time (``data`` + ``next_cursor``); iterating a page object walks
every item of every page, fetching the next page only when it is reached."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from memvault_sdk._base import APIRequest, cast
from memvault_sdk._errors import MemVaultError

if TYPE_CHECKING:
    from memvault_sdk._base import AsyncAPIClient, SyncAPIClient

T = TypeVar("T")


class SyncPage(Generic[T]):
    """One page of a list. ``for item in page`` goes on through the following pages."""

    def __init__(self, client: SyncAPIClient, request: APIRequest, item: type[T], raw: dict[str, Any]) -> None:
        self._client = client
        self._request = request
        self._item = item
        self.data: list[T] = cast(list[item], raw.get("data") or [])  # type: ignore[valid-type]
        self.next_cursor: str | None = raw.get("next_cursor")

    @classmethod
    def fetch(cls, client: SyncAPIClient, request: APIRequest, item: type[T]) -> SyncPage[T]:
        return cls(client, request, item, client.request(request, dict))

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def get_next_page(self) -> SyncPage[T]:
        if self.next_cursor is None:
            raise MemVaultError("This is the last page; check has_next_page() first.")
        return self.fetch(self._client, self._request.with_params(cursor=self.next_cursor), self._item)

    def iter_pages(self) -> Iterator[SyncPage[T]]:
        page: SyncPage[T] = self
        yield page
        while page.has_next_page():
            page = page.get_next_page()
            yield page

    def __iter__(self) -> Iterator[T]:  # type: ignore[override]
        for page in self.iter_pages():
            yield from page.data

    def __repr__(self) -> str:
        return f"SyncPage(data=<{len(self.data)} items>, next_cursor={self.next_cursor!r})"


class AsyncPage(Generic[T]):
    """One page of a list. ``async for item in page`` goes on through the following pages."""

    def __init__(self, client: AsyncAPIClient, request: APIRequest, item: type[T], raw: dict[str, Any]) -> None:
        self._client = client
        self._request = request
        self._item = item
        self.data: list[T] = cast(list[item], raw.get("data") or [])  # type: ignore[valid-type]
        self.next_cursor: str | None = raw.get("next_cursor")

    @classmethod
    async def fetch(cls, client: AsyncAPIClient, request: APIRequest, item: type[T]) -> AsyncPage[T]:
        return cls(client, request, item, await client.request(request, dict))

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    async def get_next_page(self) -> AsyncPage[T]:
        if self.next_cursor is None:
            raise MemVaultError("This is the last page; check has_next_page() first.")
        return await self.fetch(self._client, self._request.with_params(cursor=self.next_cursor), self._item)

    async def iter_pages(self) -> AsyncIterator[AsyncPage[T]]:
        page: AsyncPage[T] = self
        yield page
        while page.has_next_page():
            page = await page.get_next_page()
            yield page

    async def __aiter__(self) -> AsyncIterator[T]:
        async for page in self.iter_pages():
            for item in page.data:
                yield item

    def __repr__(self) -> str:
        return f"AsyncPage(data=<{len(self.data)} items>, next_cursor={self.next_cursor!r})"


class AsyncPaginator(Generic[T]):
    """What an async ``list()`` returns: ``await`` it for the first page, or ``async for`` over it
    for every item of every page."""

    def __init__(self, client: AsyncAPIClient, request: APIRequest, item: type[T]) -> None:
        self._client = client
        self._request = request
        self._item = item

    def __await__(self) -> Generator[Any, None, AsyncPage[T]]:
        return AsyncPage.fetch(self._client, self._request, self._item).__await__()

    async def __aiter__(self) -> AsyncIterator[T]:
        page = await self
        async for item in page:
            yield item
