"""Whom a call acts for: the signed-in person's identity applied to every facade call in one place.

A Principal signed in by a person (an OAuth grant, ``Principal.user_id``) acts as that person.
``@operation`` (operations.py) passes each call's arguments through ``bind_arguments`` before the
method runs, so every door (MCP, REST, any later one) and every method that takes a ``user_id``,
directly or in a request model at any depth, follows one rule (``Principal.bind_user``):

- no ``user_id``: the signed-in user's. Reads walk that user's scope chain (their memories and
  the shared ones, never another user's); writes are theirs (memories/schemas.py
  ``MemoryIn.bind_owner`` decides the scope).
- another user's ``user_id``: refused (``user_mismatch``) unless the Principal may act for others.

A model whose ``user_id`` changes what it selects rather than whom it reads as (a patch that moves
a memory to a user, a forget by user) sets ``binds_user = False``: its ``user_id`` is checked but
never filled in. A Principal bound to no user (API keys, jobs) passes through untouched.
"""

from __future__ import annotations

import inspect
import types
import typing
from typing import Any

from pydantic import BaseModel

from memvault.principal import Principal


def takes_user_id(fn: Any) -> inspect.Signature | None:
    """The signature of a facade method with a ``user_id`` parameter, else None."""
    signature = inspect.signature(fn)
    return signature if "user_id" in signature.parameters else None


def bind_arguments(
    p: Principal, signature: inspect.Signature | None, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` of a call by ``p`` (after self and p) with its user bound."""
    if p.user_id is None:
        return args, kwargs
    for value in (*args, *kwargs.values()):
        _bind_value(p, value)
    if signature is None:
        return args, kwargs
    bound = signature.bind_partial(None, p, *args, **kwargs)
    bound.arguments["user_id"] = p.bind_user(bound.arguments.get("user_id"))
    return bound.args[2:], bound.kwargs


def _bind_value(p: Principal, value: Any) -> None:
    if isinstance(value, BaseModel):
        bind_model(p, value)
    elif isinstance(value, list | tuple):
        for item in value:
            if isinstance(item, BaseModel):
                bind_model(p, item)


def bind_model(p: Principal, m: BaseModel) -> None:
    """Bind every ``user_id`` of a request model, and of the models inside it, to ``p``'s user."""
    for name, info in type(m).model_fields.items():
        value = getattr(m, name)
        if name == "user_id" and (value is None or isinstance(value, str)) and _admits_str(info.annotation):
            bound = p.bind_user(value)
            owner = getattr(m, "bind_owner", None)
            if owner is not None:
                owner(bound)
            elif value is None and getattr(type(m), "binds_user", True):
                setattr(m, name, bound)
        else:
            _bind_value(p, value)


def _admits_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _admits_str(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_admits_str(a) for a in typing.get_args(annotation))
    return False
