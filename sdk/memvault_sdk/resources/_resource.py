"""Each resource method is written once, as a builder of its request (or of its flow, for a call
made of several requests such as ``jobs.wait``). ``@endpoint`` and ``@paginated`` turn a builder
into the method the clients expose: on a resource of MemVault it returns the result, on one of
AsyncMemVault an awaitable of it. A resource area is then one shared class and two one-line
subclasses:

    class _Memories(APIResource):
        @endpoint
        def get(self, memory_id: str) -> APIRequest[Memory]: ...

    class Memories(_Memories, SyncAPIResource): ...
    class AsyncMemories(_Memories, AsyncAPIResource): ...
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Coroutine
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, TypeVar, overload

from memvault_sdk._request import APIRequest
from memvault_sdk.pagination import AsyncPaginator, PageData, SyncPage

if TYPE_CHECKING:
    from memvault_sdk._base import AsyncAPIClient, BaseClient, Flow, SyncAPIClient

P = ParamSpec("P")
T = TypeVar("T")
D = TypeVar("D")


class APIResource:
    _client: BaseClient

    def __init__(self, client: BaseClient) -> None:
        self._client = client

    def _ns(self, namespace: str | None) -> str:
        return self._client.namespace_path(namespace)


class SyncAPIResource(APIResource):
    _client: SyncAPIClient


class AsyncAPIResource(APIResource):
    _client: AsyncAPIClient


def _signature(build: Callable[..., Any], page: bool) -> inspect.Signature:
    """The builder's signature as the caller sees it (help(), IDEs): without ``self``, returning
    the result instead of the request."""
    sig = inspect.signature(build)
    returns = str(sig.return_annotation).removeprefix("APIRequest[").removeprefix("Flow[").removesuffix("]")
    if page:
        returns = "page of " + returns.removeprefix("PageData[").removesuffix("]")
    return sig.replace(parameters=list(sig.parameters.values())[1:], return_annotation=returns)


def _bound(call: Callable[..., Any], build: Callable[..., Any], signature: inspect.Signature) -> Callable[..., Any]:
    functools.update_wrapper(call, build)
    del call.__wrapped__  # type: ignore[attr-defined]
    call.__signature__ = signature  # type: ignore[attr-defined]
    return call


class endpoint(Generic[P, T]):
    """A method that sends the request its builder describes and returns the parsed response."""

    def __init__(self, build: Callable[Concatenate[Any, P], APIRequest[T] | Flow[T]]) -> None:
        self.build = build
        functools.update_wrapper(self, build)  # type: ignore[arg-type]

    @overload
    def __get__(self, obj: SyncAPIResource, owner: type | None = None) -> Callable[P, T]: ...
    @overload
    def __get__(self, obj: AsyncAPIResource, owner: type | None = None) -> Callable[P, Coroutine[Any, Any, T]]: ...
    @overload
    def __get__(self, obj: None, owner: type | None = None) -> endpoint[P, T]: ...
    def __get__(self, obj: APIResource | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        build, client = self.build, obj._client

        def call(*args: P.args, **kwargs: P.kwargs) -> Any:
            return client.run(build(obj, *args, **kwargs))  # type: ignore[attr-defined]

        return _bound(call, build, self._signature)

    @functools.cached_property
    def _signature(self) -> inspect.Signature:
        return _signature(self.build, page=False)


class paginated(Generic[P, D]):
    """A list method: its builder describes the first page's request; MemVault returns that page
    (iterable through every page), AsyncMemVault a paginator to await or ``async for`` over."""

    def __init__(self, build: Callable[Concatenate[Any, P], APIRequest[PageData[D]]]) -> None:
        self.build = build
        functools.update_wrapper(self, build)  # type: ignore[arg-type]

    @overload
    def __get__(self, obj: SyncAPIResource, owner: type | None = None) -> Callable[P, SyncPage[D]]: ...
    @overload
    def __get__(self, obj: AsyncAPIResource, owner: type | None = None) -> Callable[P, AsyncPaginator[D]]: ...
    @overload
    def __get__(self, obj: None, owner: type | None = None) -> paginated[P, D]: ...
    def __get__(self, obj: APIResource | None, owner: type | None = None) -> Any:
        if obj is None:
            return self
        build = self.build

        def call(*args: P.args, **kwargs: P.kwargs) -> Any:
            request = build(obj, *args, **kwargs)
            if isinstance(obj, AsyncAPIResource):
                return AsyncPaginator(obj._client, request)
            assert isinstance(obj, SyncAPIResource)
            return SyncPage.fetch(obj._client, request)

        return _bound(call, build, self._signature)

    @functools.cached_property
    def _signature(self) -> inspect.Signature:
        return _signature(self.build, page=True)
