"""A call described once, with no I/O: method, path, query, body, how a retry is made safe, and what
the response becomes. Resources build these; the sync and async clients execute them."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace
from datetime import date, datetime
from functools import lru_cache
from typing import Any, Generic, Literal, TypeVar
from urllib.parse import quote

import httpx
from pydantic import BaseModel, TypeAdapter

T = TypeVar("T")
U = TypeVar("U")
M = TypeVar("M", bound=BaseModel)

# How a request may be repeated after an attempt that may have reached the server:
#   read  - freely, it changes nothing (GET, and the POST queries search and context);
#   write - with the first attempt's Idempotency-Key, so the server replays the first outcome;
#   once  - never (the answer holds a secret the server keeps no copy of).
Retry = Literal["read", "write", "once"]


class NotGiven:
    """Marks an argument that was left out, where ``None`` means "clear this field"."""

    def __bool__(self) -> bool:
        return False

    def __repr__(self) -> str:
        return "NOT_GIVEN"


NOT_GIVEN = NotGiven()


@lru_cache(maxsize=256)
def _adapter(tp: Any) -> TypeAdapter[Any]:
    return TypeAdapter(tp)


@dataclass(frozen=True)
class Returns(Generic[T]):
    """What a response becomes: its JSON body validated as ``type`` (None: no body is read), then
    passed through ``pick``. ``type`` is public so a test can hold it against the server's schema."""

    type: Any
    pick: Callable[[Any], T]
    json_lines: bool = False

    def parse(self, response: httpx.Response) -> T:
        if self.type is None or response.status_code == 204:
            return self.pick(None)
        if self.json_lines:
            lines = [json.loads(line) for line in response.text.splitlines() if line.strip()]
            return self.pick(_adapter(self.type).validate_python(lines))
        return self.pick(_adapter(self.type).validate_json(response.content))

    def then(self, pick: Callable[[T], U]) -> Returns[U]:
        first = self.pick
        return Returns(self.type, lambda value: pick(first(value)), self.json_lines)


def returns(tp: type[T]) -> Returns[T]:
    return Returns(tp, _same)


def returns_lines(tp: type[T]) -> Returns[list[T]]:
    """A JSON Lines body, one ``tp`` a line."""
    return Returns(list[tp], _same, json_lines=True)  # type: ignore[valid-type]


def _same(value: Any) -> Any:
    return value


def _nothing(_: Any) -> None:
    return None


NOTHING: Returns[None] = Returns(None, _nothing)


@dataclass(frozen=True)
class APIRequest(Generic[T]):
    method: str
    path: str
    returns: Returns[T]
    params: Mapping[str, Any] | None = None
    # A request model, sent as JSON with only the fields that were given (a PATCH's None clears).
    body: BaseModel | None = None
    content: bytes | None = None
    headers: Mapping[str, str] = field(default_factory=dict)
    # None: "read" for GET, "write" for everything else.
    retry: Retry | None = None
    # The caller's own key for a write, e.g. to make retries across processes safe too.
    idempotency_key: str | None = None

    @property
    def retry_mode(self) -> Retry:
        return self.retry or ("read" if self.method == "GET" else "write")

    def json(self) -> Any:
        return None if self.body is None else self.body.model_dump(mode="json", exclude_unset=True)

    def with_params(self, **values: Any) -> APIRequest[T]:
        return replace(self, params={**(self.params or {}), **values})


def body(model: type[M], **fields: Any) -> M:
    """A request body from keyword arguments: left-out (None or NOT_GIVEN) fields are not sent,
    so the server applies its defaults."""
    return model.model_validate({k: v for k, v in fields.items() if v is not None and not isinstance(v, NotGiven)})


def patch_body(model: type[M], **fields: Any) -> M:
    """A PATCH body: NOT_GIVEN fields stay as they are, None clears a field."""
    return model.model_validate({k: v for k, v in fields.items() if not isinstance(v, NotGiven)})


def params(**values: Any) -> dict[str, Any]:
    """Query parameters: None left out, lists repeated, times in ISO 8601, dicts as JSON."""
    out: dict[str, Any] = {}
    for k, v in values.items():
        if v is None or isinstance(v, NotGiven):
            continue
        if isinstance(v, bool):
            out[k] = "true" if v else "false"
        elif isinstance(v, datetime | date):
            out[k] = v.isoformat()
        elif isinstance(v, dict):
            out[k] = json.dumps(v)
        elif isinstance(v, list | tuple):
            out[k] = [str(x) for x in v]
        else:
            out[k] = str(v)
    return out


def segment(value: object) -> str:
    return quote(str(value), safe="")
