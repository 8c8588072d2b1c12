"""Print the MCP reference (tools, resources, prompts) from the server itself:
`python -m memvault.mcp.reference`. docs/mcp.md embeds this output and a test keeps them equal."""

from __future__ import annotations

import asyncio
import json
from typing import Any

from memvault.mcp.runtime import Runtime
from memvault.mcp.server import build_server


def _params(schema: dict[str, Any]) -> list[str]:
    required = set(schema.get("required", []))
    rows = []
    for name, spec in schema.get("properties", {}).items():
        kind = spec.get("type") or " | ".join(
            str(s.get("type") or s.get("$ref", "").rsplit("/", 1)[-1]) for s in spec.get("anyOf", [])
        )
        if not kind and "$ref" in spec:
            kind = spec["$ref"].rsplit("/", 1)[-1]
        values = spec.get("enum") or spec.get("items", {}).get("enum")
        if values:
            kind += ": " + " | ".join(f"`{v}`" for v in values)
        default = f" (default `{json.dumps(spec['default'])}`)" if "default" in spec else ""
        need = "required" if name in required else "optional"
        about = f": {spec['description']}" if spec.get("description") else ""
        rows.append(f"  - `{name}` ({kind or 'any'}, {need}){default}{about}")
    return rows


def _tokens(tools: list[Any]) -> int:
    """What a client sends its model for these tools on every turn, in tokens (characters / 4)."""
    sent = (json.dumps({"name": t.name, "description": t.description, "input_schema": t.input_schema}) for t in tools)
    return round(sum(len(s) for s in sent) / 4)


async def render() -> str:
    server = build_server(Runtime(api=lambda: None), "extended")
    core_server = build_server(Runtime(api=lambda: None), "core")
    core_tools = await core_server.list_tools()
    core_prompts = {p.name for p in await core_server.list_prompts()}
    core = {t.name for t in core_tools}
    tools = await server.list_tools()
    out = ["### Profiles", ""]
    out.append(
        f"- `core` (`/mcp/core`, and `/mcp` by default): {', '.join(f'`{t.name}`' for t in core_tools)}; "
        f"about {_tokens(core_tools)} tokens of tool definitions."
    )
    out.append(
        f"- `extended` (`/mcp/extended`): all {len(tools)} tools below; about {_tokens(tools)} tokens of tool "
        "definitions."
    )
    out += ["", "### Tools", ""]
    for tool in tools:
        a = tool.annotations
        hints = []
        if a is not None:
            hints = [
                n
                for n, on in (
                    ("read-only", a.read_only_hint),
                    ("destructive", a.destructive_hint),
                    ("idempotent", a.idempotent_hint),
                )
                if on
            ]
        profile = "core" if tool.name in core else "extended"
        out.append(f"#### `{tool.name}` ({profile}{', ' + ', '.join(hints) if hints else ''})")
        out.append("")
        out.append(tool.description or "")
        out.append("")
        out += _params(tool.input_schema)
        out.append("")
    out += ["### Resources", ""]
    for r in await server.list_resources():
        out.append(f"- `{r.uri}`: {r.description}")
    for t in await server.list_resource_templates():
        out.append(f"- `{t.uri_template}`: {t.description}")
    out += ["", "### Prompts", ""]
    for p in await server.list_prompts():
        args = ", ".join(f"`{a.name}`{'' if a.required else '?'}" for a in p.arguments or [])
        only = "" if p.name in core_prompts else " (extended)"
        out.append(f"- `{p.name}` ({args}){only}: {p.description}")
    return "\n".join(out).rstrip() + "\n"


if __name__ == "__main__":
    print(asyncio.run(render()), end="")
