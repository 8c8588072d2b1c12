"""One rule for every text a request carries: defined here, applied by the base class of every request model.

PostgreSQL `text` and `jsonb` refuse NUL and unpaired surrogates, and a string nobody bounded turns a
request into a 500 or a row that breaks every later read of its namespace. Secrets must never be
stored (guard/). So every request model derives from `Body`, whose validator walks each field's
value (strings, dict keys, nested lists and dicts) and applies, by default:

- the text rule: no NUL, valid Unicode, at most `MAX_TEXT` characters (a field's own `max_length`
  may be tighter), JSON at most `MAX_DEPTH` deep, numbers finite;
- the secrets guard, on models whose strings are stored.

Opting out is explicit: a model that is never stored (a search, a filter) sets `guard_secrets =
False`; a field holding a credential the server only hashes or checks (a password) is annotated
with `NOT_STORED`. Nothing else needs to remember: a field added to a `Body` is covered, and
tests/test_fields.py fails if a request model is not a `Body`.
"""

from __future__ import annotations

import datetime as dt
import math
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from functools import cache
from typing import Annotated, Any, ClassVar, get_args

from pydantic import (
    AfterValidator,
    BaseModel,
    BeforeValidator,
    ConfigDict,
    Field,
    ValidationError,
    ValidationInfo,
    field_validator,
)
from pydantic_core import ErrorDetails, PydanticCustomError

from memvault.errors import InvalidInput, MemvaultError
from memvault.guard import SecretDetected, ensure_no_secrets

MAX_TEXT = 65_536  # a trace step's tool result, the longest string any field takes; most declare less
MAX_DEPTH = 32  # deeper JSON cannot be serialised back out by every client


class _NotStored:
    def __repr__(self) -> str:
        return "NOT_STORED"


# Annotated[str, NOT_STORED]: a secret the server hashes or checks and never keeps. The secrets
# guard skips it (a password is a secret by design); the text rule still applies.
NOT_STORED = _NotStored()


def check_text(s: str, *, limit: int | None = MAX_TEXT) -> None:
    """The text rule for one string (``limit`` None: no length bound); raises ValueError saying what
    is wrong."""
    if "\x00" in s:
        raise ValueError("must not contain NUL characters")
    try:
        s.encode("utf-8")
    except UnicodeEncodeError as exc:
        raise ValueError("must be valid Unicode (no unpaired surrogates)") from exc
    if limit is not None and len(s) > limit:
        raise ValueError(f"must be at most {limit} characters")


# PostgreSQL stores importance and confidence as `real`: a smaller non-zero value underflows on write
# (1e-300 was a 500), and ranking must never multiply two tiny ones in single precision either.
REAL_MIN = 1.1754943508222875e-38  # the smallest normal single-precision value


def _real_unit(v: float) -> float:
    if 0 < v < REAL_MIN:
        raise ValueError(f"must be 0 or at least {REAL_MIN:.2g} (single precision)")
    return v


# A weight between 0 and 1 that the database can hold: importance, confidence.
UnitFloat = Annotated[float, Field(ge=0, le=1, allow_inf_nan=False), AfterValidator(_real_unit)]


_NUMBER = re.compile(r"\s*[+-]?(\d+(\.\d*)?|\.\d+)([eE][+-]?\d+)?\s*")


def iso_instant(v: Any) -> Any:
    """A time as ISO 8601 text (or already a date or time), never a number: pydantic reads 1425168000
    and "1425168000" as seconds since 1970, and so "2015", a year, became 1970-01-01T00:33:35Z."""
    if (isinstance(v, int | float) and not isinstance(v, bool)) or (isinstance(v, str) and _NUMBER.fullmatch(v)):
        raise ValueError("must be a date or date-time in ISO 8601 (2015-03-01, 2015-03-01T10:00:00Z), not a number")
    return v


# A time a request gives: a query parameter, a tool argument. A `Body` field of a time type is
# checked the same way without saying so.
Instant = Annotated[dt.datetime, BeforeValidator(iso_instant)]


def takes_time(annotation: Any) -> bool:
    """Whether a field or argument of this type takes a date or a time (also inside Optional,
    Annotated or a list)."""
    return _takes_time(annotation)


@cache
def _takes_time(annotation: Any) -> bool:
    if annotation in (dt.datetime, dt.date):
        return True
    # Types and parametrised types only: Annotated's metadata (a FieldInfo) and Literal's values are neither.
    return any(_takes_time(a) for a in get_args(annotation) if isinstance(a, type) or get_args(a))


def check_value(value: Any, depth: int = 1, *, max_depth: int = MAX_DEPTH, limit: int | None = MAX_TEXT) -> None:
    """The text rule over a JSON-like value: every string and dict key, finite numbers, bounded depth.
    Models nested inside are `Body`s that checked themselves."""
    if depth > max_depth:
        raise ValueError(f"is nested deeper than {max_depth} levels")
    if isinstance(value, str):
        check_text(value, limit=limit)
    elif isinstance(value, float):
        if not math.isfinite(value):
            raise ValueError("numbers must be finite (no NaN or Infinity)")
    elif isinstance(value, Mapping):
        for k, v in value.items():
            if isinstance(k, str):
                check_text(k, limit=limit)
            check_value(v, depth + 1, max_depth=max_depth, limit=limit)
    elif isinstance(value, list | tuple | set | frozenset):
        for v in value:
            check_value(v, depth + 1, max_depth=max_depth, limit=limit)


def check_argument(value: Any) -> None:
    """The text rule for a plain argument of a facade call (operations.py): a session id, a user id,
    a name handed over as a string rather than inside a request model. As ``check_value``, but the
    sizes are the doors' (a body's limit), not ``MAX_TEXT``."""
    check_value(value, limit=None)


class Body(BaseModel):
    """Base of every request model: the text rule on every field, and the secrets guard unless the
    model is never stored (`guard_secrets = False`) or the field is `NOT_STORED`."""

    # Errors travel to logs and to MCP clients as text: never with the refused value (a secret) in them.
    model_config = ConfigDict(hide_input_in_errors=True)
    guard_secrets: ClassVar[bool] = True

    @field_validator("*", mode="before")
    @classmethod
    def _times_as_text(cls, v: Any, info: ValidationInfo) -> Any:
        name = info.field_name
        if name is not None and takes_time(cls.model_fields[name].annotation):
            iso_instant(v)
        return v

    @field_validator("*", mode="after")
    @classmethod
    def _storable(cls, v: Any, info: ValidationInfo) -> Any:
        check_value(v)
        name = info.field_name
        # A member of an enum is one of our own words (a type, a scope), never a secret.
        if (
            cls.guard_secrets
            and name is not None
            and not isinstance(v, Enum)
            and NOT_STORED not in cls.model_fields[name].metadata
        ):
            try:
                ensure_no_secrets(v, field=name)
            except SecretDetected as exc:
                # A pydantic error, so the location of this model inside the request (messages[3])
                # comes with it; secret_error() puts the problem back together.
                raise PydanticCustomError("secret_detected", "{detail}", {"detail": exc.detail, **exc.extra}) from None
        return v


def secret_error(error: ErrorDetails, where: str) -> SecretDetected:
    """The `secret_detected` problem of a pydantic error raised by `Body`. `where` is the error's
    location as the door names it (`messages[3].metadata`); the guard's path inside the field
    (`metadata.db.url`) is grafted on, so the problem names `messages[3].metadata.db.url`."""
    ctx = dict(error.get("ctx") or {})
    inner = str(ctx.get("field") or "")
    name = str(error["loc"][-1]) if error.get("loc") else ""
    full = where[: len(where) - len(name)] + inner if inner.startswith(name) and where.endswith(name) else where
    detail = str(ctx.get("detail") or SecretDetected.title).replace(inner, full, 1) if inner else str(ctx.get("detail"))
    return SecretDetected(detail, extra={"field": full, "kind": ctx.get("kind")})


def loc_name(loc: Sequence[Any]) -> str:
    """("messages", 3, "content") -> "messages[3].content"."""
    out = ""
    for part in loc:
        out += f"[{part}]" if isinstance(part, int) else (f".{part}" if out else str(part))
    return out


def as_error(exc: ValidationError, *, prefix: str = "") -> MemvaultError:
    """A pydantic failure as the error every door renders: `secret_detected` when the guard refused
    a value, else `validation_error` naming the first bad field. `prefix` names where the model sat
    (an import line)."""
    errors = exc.errors()
    for e in errors:
        if e["type"] == "secret_detected":
            err = secret_error(e, loc_name(e["loc"]))
            if prefix:
                err.detail = f"{prefix}: {err.detail}"
            return err
    first = errors[0] if errors else None
    field = loc_name(first["loc"]) if first else ""
    message = first["msg"] if first else "invalid input"
    detail = f"{field}: {message}" if field else message
    return InvalidInput(f"{prefix}: {detail}" if prefix else detail, extra={"field": field})
