"""Declaring a capability's MCP tools: a tool body names its arguments and makes its facade call,
nothing more. ``Tools`` adds what every tool shares: the MCP Context the SDK hands in, the
caller's Principal taken from it, the namespace rule, and ``Runtime.call``'s error reading.

    tool = Tools(server, rt)

    @tool(name="memory_get", title="Read a memory", annotations=READ, description="...")
    async def memory_get(call: ToolCall, memory_id: MemoryId, namespace: Namespace = None) -> MemoryOut:
        return await call.api.get_memory(call.p, call.ns(namespace), memory_id)

The tool the server lists has the body's signature with ``ctx: Context`` in place of ``call``,
so its name, input schema and output schema are the body's own. Its arguments are strict: one the
body does not name (``userId`` for ``user_id``) is refused, never dropped, since a dropped
``user_id`` turned a private fact into a shared one; and a refusal reads like REST's,
``validation_error: field <name>: <message>``, not pydantic's dump.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.server.mcpserver.utilities.func_metadata import ArgModelBase, FuncMetadata
from mcp.types import CallToolResult, ToolAnnotations
from pydantic import BaseModel, ConfigDict, ValidationError

from memvault.fields import iso_instant, loc_name, takes_time
from memvault.mcp.results import one_line
from memvault.mcp.runtime import Runtime
from memvault.principal import Principal

if TYPE_CHECKING:
    from memvault.api import NamespaceAPI

Body = TypeVar("Body", bound=Callable[..., Awaitable[Any]])

# The one keyword the SDK passes a tool's arguments under, unvalidated (see _Unchecked).
_RAW = "memvault_arguments"


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
            strict: list[type[ArgModelBase]] = []
            self._server.tool(name=name, title=title, annotations=annotations, description=description)(
                self._wrap(body, strict)
            )
            # The SDK built the arguments model from the body's signature; a strict copy of it
            # validates them in the tool, so the refusal is ours to word.
            tool = self._server._tool_manager.get_tool(name)
            assert tool is not None
            metadata = tool.fn_metadata
            model = metadata.arg_model
            strict.append(
                type(model.__name__, (model,), {"model_config": ConfigDict(**model.model_config, extra="forbid")})
            )
            tool.fn_metadata = _Unchecked(
                arg_model=strict[0],
                output_schema=metadata.output_schema,
                output_model=metadata.output_model,
                wrap_output=metadata.wrap_output,
            )
            # Clients see it too: `additionalProperties: false`.
            tool.parameters = strict[0].model_json_schema(by_alias=True)
            return body

        return register

    def _wrap(
        self, body: Callable[..., Awaitable[Any]], strict: list[type[ArgModelBase]]
    ) -> Callable[..., Awaitable[Any]]:
        rt = self._rt
        # Evaluated now, in the body's module: the SDK reads the wrapper's annotations as objects.
        signature = inspect.signature(body, eval_str=True)
        _call, *params = signature.parameters.values()
        # Arguments that take a time: ISO 8601 text, never a number (fields.iso_instant).
        times = [p.name for p in params if takes_time(p.annotation)]

        async def tool(ctx: Context, **raw: Any) -> Any:
            sent = raw.get(_RAW, {})
            for name in times:
                if isinstance(sent, dict) and sent.get(name) is not None:
                    try:
                        iso_instant(sent[name])
                    except ValueError as exc:
                        raise ToolError(f"validation_error: field {name}: {exc}") from exc
            try:
                arguments = strict[0].model_validate(sent).model_dump_one_level()
            except ValidationError as exc:
                raise ToolError(argument_error(exc, strict[0])) from exc
            call = ToolCall(rt, rt.principal(ctx))
            out = await rt.call(lambda: body(call, **arguments))
            # A model's text as one line of JSON: the SDK indents it, 15-30 % more tokens for a
            # model to read the same (results.one_line).
            return one_line(out) if isinstance(out, BaseModel) and not isinstance(out, CallToolResult) else out

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


class _Unchecked(FuncMetadata):
    """Hands a tool its arguments as sent (JSON strings inside them parsed, as the SDK does), for
    the tool to validate against its strict model."""

    def validate_arguments(self, arguments_to_validate: dict[str, Any]) -> dict[str, Any]:
        return {_RAW: self.pre_parse_json(arguments_to_validate)}


def argument_error(exc: ValidationError, model: type[ArgModelBase]) -> str:
    """The first bad argument, as REST words a bad field: ``validation_error: field <name>: ...``."""
    first = exc.errors(include_url=False, include_input=False)[0]
    name = loc_name(first["loc"]) or "arguments"
    if first["type"] == "extra_forbidden":
        known = ", ".join(f.alias or n for n, f in model.model_fields.items())
        return f"validation_error: field {name}: unknown argument; this tool takes: {known}"
    return f"validation_error: field {name}: {first['msg']}"
