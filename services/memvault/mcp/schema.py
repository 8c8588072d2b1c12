"""Tool input schemas as lean as their meaning allows.

A client sends every tool's name, description and input schema to its model on every turn, so
each character is paid for again and again (docs/mcp.md: the core profile stays under 1,500
tokens, tests/mcp/test_budgets.py). Pydantic's schemas carry what a model does not need: a
`title` repeating each argument's name, `anyOf [X, null]` with `default: null` for every optional
argument (not being in `required` already says it may be left out), and `$defs` reached through
`$ref` (some clients do not resolve them). What is left is the same contract: names, types,
enums, bounds, defaults that are not null, descriptions, and what is required or forbidden.
Arguments are still validated by the tool's own pydantic model, which this does not touch.
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer

Schema = dict[str, Any]

# Keywords whose value is a map of names to schemas: the names are data, never keywords.
_NAMED = ("properties", "patternProperties", "$defs", "definitions")
# Keywords whose value is data (a default, the allowed values), walked no further.
_DATA = ("default", "enum", "const", "examples")
_NULL: Schema = {"type": "null"}


def lean(schema: Schema) -> Schema:
    """The same input contract in fewer characters (see the module docstring)."""
    defs: dict[str, Schema] = schema.get("$defs", {})
    out = _walk({k: v for k, v in schema.items() if k != "$defs"}, defs, ())
    # A $def that refers to itself cannot be inlined; it stays where it was.
    kept = {name: _walk(d, defs, (name,)) for name, d in defs.items() if _recursive(name, defs)}
    if kept:
        out["$defs"] = kept
    return out


def lean_tools(server: MCPServer) -> None:
    """Rewrite the input schema of every tool registered on ``server`` (once, at build time)."""
    # The SDK derives each schema from the tool's signature and offers no hook to shape it; its
    # registry is the one place the schema a client lists comes from.
    for tool in server._tool_manager.list_tools():
        tool.parameters = lean(tool.parameters)


def _walk(node: Any, defs: dict[str, Schema], inlining: tuple[str, ...]) -> Any:
    if isinstance(node, list):
        return [_walk(item, defs, inlining) for item in node]
    if not isinstance(node, dict):
        return node
    node = _inline(_drop_null_option(node), defs, inlining)
    out: Schema = {}
    for key, value in node.items():
        if key == "title" and isinstance(value, str):
            continue
        if key == "additionalProperties" and value is True:
            continue  # JSON Schema's default
        if key in _DATA:
            out[key] = value
        elif key in _NAMED and isinstance(value, dict):
            out[key] = {name: _walk(sub, defs, inlining) for name, sub in value.items()}
        else:
            out[key] = _walk(value, defs, inlining)
    return out


def _inline(node: Schema, defs: dict[str, Schema], inlining: tuple[str, ...]) -> Schema:
    ref = node.get("$ref")
    if not isinstance(ref, str) or not ref.startswith("#/$defs/"):
        return node
    name = ref.removeprefix("#/$defs/")
    if name not in defs or name in inlining or _recursive(name, defs):
        return node
    # The argument's own keywords (its description, default) win over the definition's.
    merged = {**defs[name], **{k: v for k, v in node.items() if k != "$ref"}}
    return _walk(merged, defs, (*inlining, name))


def _drop_null_option(node: Schema) -> Schema:
    options = node.get("anyOf")
    # Only an optional argument whose default is null: a required one may have to be sent as null.
    if not isinstance(options, list) or _NULL not in options or "default" not in node or node["default"] is not None:
        return node
    rest = [o for o in options if o != _NULL]
    out = {k: v for k, v in node.items() if k not in ("anyOf", "default")}
    if len(rest) == 1 and isinstance(rest[0], dict):
        # The argument's own keywords (its description) after the option's.
        return {**rest[0], **out}
    return {**out, "anyOf": rest}


def _refs(node: Any) -> set[str]:
    if isinstance(node, list):
        return set().union(*(_refs(item) for item in node)) if node else set()
    if not isinstance(node, dict):
        return set()
    found = {node["$ref"].removeprefix("#/$defs/")} if isinstance(node.get("$ref"), str) else set()
    return found.union(*(_refs(v) for v in node.values()))


def _recursive(name: str, defs: dict[str, Schema]) -> bool:
    seen: set[str] = set()
    todo = list(_refs(defs.get(name, {})))
    while todo:
        ref = todo.pop()
        if ref == name:
            return True
        if ref in seen or ref not in defs:
            continue
        seen.add(ref)
        todo.extend(_refs(defs[ref]))
    return False
