"""Declaring a capability's MCP tools: a tool body names its arguments and makes its facade call,
nothing more. ``Tools`` adds what every tool shares: the MCP Context the SDK hands in, the
caller's Principal taken from it, the namespace rule, and ``Runtime.call``'s error reading.

    tool = Tools(server, rt)

    @tool(name="memory_get", title="Read a memory", annotations=READ, description="...")
    async def memory_get(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.get_memory(call.p, call.ns(namespace), memory_id)

The tool the server lists has the body's signature with ``ctx: Context`` in place of ``call``,
so its name, input schema and output schema are the body's own.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.types import ToolAnnotations

from memvault.mcp.runtime import Runtime
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

Body = TypeVar("Body", bound=Callable[..., Awaitable[Any]])


class ToolCall:
    """What a tool body gets before its arguments: the facade, the caller, its namespace."""

    def __init__(self, rt: Runtime, p: Principal) -> None:
        self._rt = rt
        self.p = p

    @property
    def api(self) -> NamespaceAPI:
        return self._rt.api()

    def ns(self, requested: str | None) -> str:
        """The call's `namespace`, else the caller's default (Runtime.namespace)."""
        return self._rt.namespace(self.p, requested)


class Tools:
    """Registers tool bodies on one server for one runtime."""

    def __init__(self, server: MCPServer, rt: Runtime) -> None:
        self._server = server
        self._rt = rt

    def __call__(
        self, *, name: str, title: str, annotations: ToolAnnotations, description: str
    ) -> Callable[[Body], Body]:
        def register(body: Body) -> Body:
            self._server.tool(name=name, title=title, annotations=annotations, description=description)(
                self._wrap(body)
            )
            return body

        return register

    def _wrap(self, body: Callable[..., Awaitable[Any]]) -> Callable[..., Awaitable[Any]]:
        rt = self._rt
        # Evaluated now, in the body's module: the SDK reads the wrapper's annotations as objects.
        signature = inspect.signature(body, eval_str=True)
        _call, *params = signature.parameters.values()

        async def tool(ctx: Context, **arguments: Any) -> Any:
            call = ToolCall(rt, rt.principal(ctx))
            return await rt.call(lambda: body(call, **arguments))

        context = inspect.Parameter("ctx", inspect.Parameter.POSITIONAL_OR_KEYWORD, annotation=Context)
        tool.__signature__ = signature.replace(parameters=[context, *params])  # type: ignore[attr-defined]
        tool.__annotations__ = {
            "ctx": Context,
            **{p.name: p.annotation for p in params},
            "return": signature.return_annotation,
        }
        tool.__name__ = tool.__qualname__ = body.__name__
        tool.__doc__ = body.__doc__
        return tool
