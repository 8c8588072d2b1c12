"""Whom a call acts for: the signed-in person's identity applied to every facade call in one place.

A Principal signed in by a person (an OAuth grant, ``Principal.user_id``) acts as that person.
``@operation`` (operations.py) passes each call's arguments through ``bind_arguments`` before the
method runs, so every door (MCP, REST, any later one) and every method that takes a ``user_id``,
directly or in a request model at any depth, follows one rule (``Principal.bind_user``):

- no ``user_id``: the signed-in user's. Reads walk that user's scope chain (their memories and
  the shared ones, never another user's); writes are theirs (memories/schemas.py
  ``MemoryIn.bind_owner`` decides the scope).
- another user's ``user_id``: refused (``user_mismatch``) unless the Principal may act for others.

A read that leaves its filters out altogether (``filters=None``, as an argument or inside a request
model) gets empty filters bound to the user: "no filters" must not mean "every user's".

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


class Binding:
    """How one facade method's arguments are bound: its ``user_id`` parameter, and its parameters
    that may be None but are models carrying a user (filters). Type hints are read at the first
    call, when every name they mention exists."""

    def __init__(self, fn: Any) -> None:
        self._fn = fn
        self.signature = inspect.signature(fn)
        self.takes_user_id = "user_id" in self.signature.parameters
        self._optional: dict[str, type[BaseModel]] | None = None

    @property
    def optional_models(self) -> dict[str, type[BaseModel]]:
        if self._optional is None:
            hints = typing.get_type_hints(self._fn)
            found = {name: _user_model(hints.get(name)) for name in self.signature.parameters}
            self._optional = {name: cls for name, cls in found.items() if cls is not None}
        return self._optional


def bind_arguments(
    p: Principal, binding: Binding, args: tuple[Any, ...], kwargs: dict[str, Any]
) -> tuple[tuple[Any, ...], dict[str, Any]]:
    """``args`` and ``kwargs`` of a call by ``p`` (after self and p) with its user bound."""
    if p.user_id is None:
        return args, kwargs
    for value in (*args, *kwargs.values()):
        _bind_value(p, value)
    if not binding.takes_user_id and not binding.optional_models:
        return args, kwargs
    bound = binding.signature.bind_partial(None, p, *args, **kwargs)
    if binding.takes_user_id:
        bound.arguments["user_id"] = p.bind_user(bound.arguments.get("user_id"))
    for name, cls in binding.optional_models.items():
        if bound.arguments.get(name) is None:
            bound.arguments[name] = _bound_default(p, cls)
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
        elif value is None and (cls := _user_model(info.annotation)) is not None:
            setattr(m, name, _bound_default(p, cls))
        else:
            _bind_value(p, value)


def _bound_default(p: Principal, cls: type[BaseModel]) -> BaseModel:
    empty = cls()
    bind_model(p, empty)
    return empty


def _user_model(annotation: Any) -> type[BaseModel] | None:
    """The model an optional parameter or field holds when that model selects by user (filters)
    and can be made empty; None for anything else."""
    for a in typing.get_args(annotation) if typing.get_origin(annotation) in (typing.Union, types.UnionType) else ():
        if (
            isinstance(a, type)
            and issubclass(a, BaseModel)
            and "user_id" in a.model_fields
            and getattr(a, "binds_user", True)
            and all(not f.is_required() for f in a.model_fields.values())
        ):
            return a
    return None


def _admits_str(annotation: Any) -> bool:
    if annotation is str:
        return True
    origin = typing.get_origin(annotation)
    if origin is typing.Annotated:
        return _admits_str(typing.get_args(annotation)[0])
    if origin in (typing.Union, types.UnionType):
        return any(_admits_str(a) for a in typing.get_args(annotation))
    return False
