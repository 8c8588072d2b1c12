"""Lists come back a page at a time (``data`` + ``next_cursor``); iterating a page object walks
every item of every page, fetching the next page only when it is reached."""

from __future__ import annotations

from collections.abc import AsyncIterator, Generator, Iterator
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from pydantic import BaseModel, ConfigDict

from memvault_sdk._errors import MemVaultError
from memvault_sdk._request import APIRequest

if TYPE_CHECKING:
    from memvault_sdk._base import AsyncAPIClient, SyncAPIClient

T = TypeVar("T")


class PageData(BaseModel, Generic[T]):
    """One page as the server sends it."""

    model_config = ConfigDict(extra="allow")

    data: list[T]
    next_cursor: str | None = None


class _Page(Generic[T]):
    def __init__(self, request: APIRequest[PageData[T]], raw: PageData[T]) -> None:
        self._request = request
        self.data: list[T] = raw.data
        self.next_cursor: str | None = raw.next_cursor

    def has_next_page(self) -> bool:
        return self.next_cursor is not None

    def _next_request(self) -> APIRequest[PageData[T]]:
        if self.next_cursor is None:
            raise MemVaultError("This is the last page; check has_next_page() first.")
        return self._request.with_params(cursor=self.next_cursor)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(data=<{len(self.data)} items>, next_cursor={self.next_cursor!r})"


class SyncPage(_Page[T]):
    """One page of a list. ``for item in page`` goes on through the following pages."""

    def __init__(self, client: SyncAPIClient, request: APIRequest[PageData[T]], raw: PageData[T]) -> None:
        super().__init__(request, raw)
        self._client = client

    @classmethod
    def fetch(cls, client: SyncAPIClient, request: APIRequest[PageData[T]]) -> SyncPage[T]:
        return cls(client, request, client.run(request))

    def get_next_page(self) -> SyncPage[T]:
        return self.fetch(self._client, self._next_request())

    def iter_pages(self) -> Iterator[SyncPage[T]]:
        page: SyncPage[T] = self
        yield page
        while page.has_next_page():
            page = page.get_next_page()
            yield page

    def __iter__(self) -> Iterator[T]:
        for page in self.iter_pages():
            yield from page.data


class AsyncPage(_Page[T]):
    """One page of a list. ``async for item in page`` goes on through the following pages."""

    def __init__(self, client: AsyncAPIClient, request: APIRequest[PageData[T]], raw: PageData[T]) -> None:
        super().__init__(request, raw)
        self._client = client

    @classmethod
    async def fetch(cls, client: AsyncAPIClient, request: APIRequest[PageData[T]]) -> AsyncPage[T]:
        return cls(client, request, await client.run(request))

    async def get_next_page(self) -> AsyncPage[T]:
        return await self.fetch(self._client, self._next_request())

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


class AsyncPaginator(Generic[T]):
    """What an async ``list()`` returns: ``await`` it for the first page, or ``async for`` over it
    for every item of every page."""

    def __init__(self, client: AsyncAPIClient, request: APIRequest[PageData[T]]) -> None:
        self._client = client
        self._request = request

    def __await__(self) -> Generator[Any, None, AsyncPage[T]]:
        return AsyncPage.fetch(self._client, self._request).__await__()

    async def __aiter__(self) -> AsyncIterator[T]:
        page = await self
        async for item in page:
            yield item
