"""Lean input schemas keep the contract: what may be sent, what must be, and what each thing means."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from memvault.mcp.schema import lean


class Kind(BaseModel):
    name: str


class Node(BaseModel):
    children: list[Node] = []


class Args(BaseModel):
    query: Annotated[str, Field(description="What to look for.")]
    title: str | None = Field(default=None, description="An argument that happens to be called title.")
    limit: int = Field(default=10, ge=1, le=50)
    since: str | None = None
    must_say: str | None = Field(description="Required, and null is a value.")
    kind: Kind | None = None
    tree: Node | None = None
    extra: dict[str, Any] = Field(default={"title": "data, not a keyword"})


def test_the_contract_survives() -> None:
    schema = lean(Args.model_json_schema())
    props = schema["properties"]
    assert schema["required"] == ["query", "must_say"]
    assert "title" not in schema and all("title" not in p for p in props.values())
    assert props["title"] == {"type": "string", "description": "An argument that happens to be called title."}
    assert props["limit"] == {"default": 10, "maximum": 50, "minimum": 1, "type": "integer"}
    # Optional with a null default: not being required already says it may be left out.
    assert props["since"] == {"type": "string"}
    # Required but nullable: null stays allowed.
    assert {"type": "null"} in props["must_say"]["anyOf"]
    # Definitions are inlined where they are used, unless they refer to themselves.
    assert props["kind"] == {"properties": {"name": {"type": "string"}}, "required": ["name"], "type": "object"}
    assert props["tree"] == {"$ref": "#/$defs/Node"} and set(schema["$defs"]) == {"Node"}
    # Data is left alone, even where it looks like a keyword.
    assert props["extra"]["default"] == {"title": "data, not a keyword"}


def test_it_is_much_shorter() -> None:
    full = Args.model_json_schema()
    assert len(str(lean(full))) < 0.75 * len(str(full))
