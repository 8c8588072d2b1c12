"""Every call a door makes on the facade is an *operation*: a name and a kind (read, write or
search). Marking the facade's public methods with ``@operation`` is what puts each call through the
gates (rate limits and concurrency of the caller's plan, usage metering) in one place, so REST, MCP,
the SDK and any later door are limited and counted alike and act for the same user (acting.py), and
a new method is covered by being marked (tests/test_operations.py fails on one that is not).

A call made inside another operation (tenant_summary listing namespaces) passes through: the outer
call was admitted and is the one counted.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from contextlib import AbstractAsyncContextManager, AsyncExitStack
from contextvars import ContextVar
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from memvault.acting import Binding, bind_arguments
from memvault.errors import InvalidInput
from memvault.fields import check_argument
from memvault.plans.limits import RequestKind
from memvault.principal import Principal


@dataclass(frozen=True)
class Operation:
    name: str
    kind: RequestKind


class Gate(Protocol):
    """Something every operation passes through: entered before the call, left after it (also
    when it fails). Raising on entry refuses the call before it does anything."""

    def admit(self, p: Principal, op: Operation) -> AbstractAsyncContextManager[None]: ...


_current: ContextVar[Operation | None] = ContextVar("memvault_operation", default=None)


def current_operation() -> Operation | None:
    """The operation this task is running, for what is counted deep inside it (tokens embedded)."""
    return _current.get()


Method = TypeVar("Method", bound=Callable[..., Awaitable[Any]])


def operation(kind: RequestKind, name: str | None = None) -> Callable[[Method], Method]:
    def wrap(fn: Method) -> Method:
        op = Operation(name or fn.__name__, kind)
        binding = Binding(fn)

        @functools.wraps(fn)
        async def run(self: Any, p: Principal, *args: Any, **kwargs: Any) -> Any:
            refuse_bad_text(binding, args, kwargs)
            # Whom the call acts for is settled before anything else, inner calls included (acting.py).
            args, kwargs = bind_arguments(p, binding, args, kwargs)
            gates: list[Gate] = self._gates
            if not gates or _current.get() is not None:
                return await fn(self, p, *args, **kwargs)
            token = _current.set(op)
            try:
                async with AsyncExitStack() as stack:
                    for gate in gates:
                        await stack.enter_async_context(gate.admit(p, op))
                    return await fn(self, p, *args, **kwargs)
            finally:
                _current.reset(token)

        run.memvault_operation = op  # type: ignore[attr-defined]
        return run  # type: ignore[return-value]

    return wrap


def refuse_bad_text(binding: Binding, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """The text rule (fields.check_argument) on a call's plain arguments, for every door: a NUL in a
    session id given to an MCP tool reached PostgreSQL, which cannot hold it, and failed as an
    internal error. Request models (fields.Body) check their own fields."""
    for i, value in enumerate((*args, *kwargs.values())):
        try:
            check_argument(value)
        except ValueError as exc:
            names = [*list(binding.signature.parameters)[2 : 2 + len(args)], *kwargs]
            name = names[i] if i < len(names) else "arguments"
            # The facade's `ns` is every door's namespace (REST's path, MCP's argument).
            name = "namespace" if name == "ns" else name
            raise InvalidInput(f"{name}: {exc}", extra={"field": name}) from None


def operation_of(method: Any) -> Operation | None:
    return getattr(method, "memvault_operation", None)
