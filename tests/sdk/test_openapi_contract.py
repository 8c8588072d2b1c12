"""Every request the SDK can send, held against the server's own OpenAPI document: the operation
exists with that method and path, every query parameter the SDK sends is declared, the SDK's body
model and the server's request schema agree field by field, the SDK's response model has exactly
the fields the server declares (and requires only ones it always sends), and a write the SDK
retries with an Idempotency-Key goes to a route that replays it.

The requests come from the SDK's own builders (each resource method is described once), called
with every argument filled, so a new SDK method or argument is checked without editing this file."""

from __future__ import annotations

import inspect
import re
import types
import typing
import uuid
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute, iter_route_contexts
from pydantic import BaseModel

import memvault_sdk.resources as sdk_resources
from memvault.gateway.idempotency import IDEMPOTENT, NOT_IDEMPOTENT
from memvault_sdk import MemVault
from memvault_sdk._base import Attempt
from memvault_sdk._request import APIRequest, NotGiven
from memvault_sdk.pagination import PageData
from memvault_sdk.resources._resource import APIResource, endpoint, paginated

Schema = dict[str, Any]
NOT_QUERY = {"namespace", "idempotency_key"}
# Operations whose response the server declares as a free-form object, so there is nothing to hold
# the SDK's model against. Once the server declares a model, the test fails until the entry goes.
UNTYPED_RESPONSES = {"GET /v1/status"}


# ---- every request the SDK builds -------------------------------------------------------------


def sample(tp: Any, name: str) -> Any:
    """A valid value of an argument's type (the first arm of a union, the first literal)."""
    origin, args = get_origin(tp), get_args(tp)
    if origin in (Union, types.UnionType):
        arms = [a for a in args if a not in (type(None), NotGiven)]
        return sample(arms[0], name)
    if origin is Literal:
        return args[0]
    if origin in (list, Sequence, Iterable):
        return [sample(args[0], name)]
    if origin in (dict, Mapping):
        return {"k": sample(args[1], "v")}
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp.model_validate(
            {f: sample(info.annotation, f) for f, info in tp.model_fields.items() if info.is_required()}
        )
    if tp is str or tp is Any:
        return str(uuid.uuid4()) if name.endswith("_id") else "x"
    return {bool: True, int: 1, float: 0.5, datetime: datetime(2026, 1, 1, tzinfo=UTC)}[tp]


@dataclass
class Built:
    name: str
    request: APIRequest[Any]
    query: set[str]


def _methods() -> Iterator[tuple[str, type[APIResource], str, endpoint[Any, Any] | paginated[Any, Any]]]:
    for cls_name in sdk_resources.__all__:
        cls = getattr(sdk_resources, cls_name)
        if cls_name.startswith("Async"):
            continue
        for attr in dir(cls):
            described = inspect.getattr_static(cls, attr)
            if isinstance(described, endpoint | paginated):
                yield cls_name, cls, attr, described


def built_requests() -> list[Built]:
    client = MemVault(api_key="mv_contract", base_url="http://sdk.invalid")
    out = []
    for cls_name, cls, attr, described in _methods():
        build = described.build
        hints = typing.get_type_hints(build)
        sig = inspect.signature(build)
        kwargs = {
            n: sample(hints[n], n)
            for n, p in list(sig.parameters.items())[1:]
            if n not in NOT_QUERY and n not in {"timeout", "poll_interval"}
        }
        made = build(cls(client), **kwargs)
        if not isinstance(made, APIRequest):  # a flow (jobs.wait): its first attempt's request
            step = next(made)
            assert isinstance(step, Attempt)
            made = step.request
        out.append(Built(f"{cls_name}.{attr}", made, set(made.params or {})))
    return out


BUILT = built_requests()


# ---- the server's side ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def spec(app: FastAPI) -> Schema:
    return app.openapi()


def operation(spec: Schema, method: str, path: str) -> tuple[str, Schema]:
    """The operation a concrete path reaches: a literal segment beats a {parameter}."""
    candidates = []
    for template, ops in spec["paths"].items():
        pattern = re.sub(r"\{[^}]+\}", "[^/]+", template)
        if re.fullmatch(pattern, path) and method.lower() in ops:
            candidates.append((template.count("{"), template))
    assert candidates, f"no {method} {path} in the server's OpenAPI"
    template = min(candidates)[1]
    return template, spec["paths"][template][method.lower()]


def resolve(spec: Schema, schema: Schema) -> Schema:
    while "$ref" in schema:
        schema = spec["components"]["schemas"][schema["$ref"].rsplit("/", 1)[1]]
    arms = [a for a in schema.get("anyOf", []) if a.get("type") != "null"]
    return resolve(spec, arms[0]) if len(arms) == 1 else schema


def model_of(tp: Any) -> type[BaseModel] | None:
    """The model inside an annotation: Memory, list[Memory], Memory | None."""
    if isinstance(tp, type) and issubclass(tp, BaseModel):
        return tp
    models = [m for a in get_args(tp) if (m := model_of(a)) is not None]
    return models[0] if len(models) == 1 else None


def mismatches(spec: Schema, model: type[BaseModel], schema: Schema, where: str, *, request: bool) -> list[str]:
    """Where the SDK's model and the server's schema disagree, nested models included."""
    schema = resolve(spec, schema)
    if schema.get("type") == "array":
        return mismatches(spec, model, schema["items"], f"{where}[]", request=request)
    if isinstance(schema.get("additionalProperties"), dict) and "properties" not in schema:
        return mismatches(spec, model, schema["additionalProperties"], f"{where}{{}}", request=request)
    props, required = schema.get("properties", {}), set(schema.get("required", []))
    out = [f"{where}.{f}: not in the server's schema" for f in model.model_fields if f not in props]
    if request:
        # The server needs these; the SDK must be able to send them.
        out += [f"{where}.{f}: required by the server, unknown to the SDK" for f in required - set(model.model_fields)]
    else:
        # The SDK needs these; the server must always send them. And the SDK types every field the
        # server sends (an unknown one would still be kept, untyped, in `model_extra`).
        out += [
            f"{where}.{f}: required by the SDK, optional on the server"
            for f, info in model.model_fields.items()
            if info.is_required() and f in props and f not in required
        ]
        out += [f"{where}.{f}: sent by the server, unknown to the SDK" for f in set(props) - set(model.model_fields)]
    for f, info in model.model_fields.items():
        inner = model_of(info.annotation)
        if inner is not None and f in props:
            out += mismatches(spec, inner, props[f], f"{where}.{f}", request=request)
    return out


def _route_calls(app: FastAPI, method: str, template: str) -> set[Any]:
    for route in iter_route_contexts(app.routes):
        if isinstance(route.original_route, APIRoute) and route.path_format == template and method in route.methods:
            calls, todo = set(), [route.dependant]
            while todo:
                d = todo.pop()
                calls.add(d.call)
                todo.extend(d.dependencies)
            return calls
    raise AssertionError(f"no route {method} {template}")


# ---- the checks -------------------------------------------------------------------------------


def test_every_resource_method_is_checked() -> None:
    names = {b.name for b in BUILT}
    assert len(names) >= 45, sorted(names)
    assert {"Memories.delete", "Memories.list", "Jobs.wait", "Portability.import_", "Recall.search"} <= names


@pytest.mark.parametrize("built", BUILT, ids=[b.name for b in BUILT])
def test_the_route_exists_with_the_same_shapes(built: Built, spec: Schema, app: FastAPI) -> None:
    req = built.request
    template, op = operation(spec, req.method, req.path)
    declared = {p["name"] for p in op.get("parameters", []) if p["in"] == "query"}
    assert built.query <= declared, f"{built.name} sends {built.query - declared}, not declared by the server"
    if issubclass(model_of(req.returns.type) or BaseModel, PageData):
        assert "cursor" in declared, f"{built.name} pages with ?cursor=, not declared by the server"

    problems: list[str] = []
    if req.body is not None:
        schema = op["requestBody"]["content"]["application/json"]["schema"]
        problems += mismatches(spec, type(req.body), schema, f"{built.name} body", request=True)
    if req.returns.type is not None and not req.returns.json_lines:
        [status] = [s for s in op["responses"] if s.startswith("2")][:1]
        schema = op["responses"][status]["content"]["application/json"]["schema"]
        model = model_of(req.returns.type)
        assert model is not None, req.returns.type
        free_form = "properties" not in resolve(spec, schema) and resolve(spec, schema).get("type") == "object"
        assert free_form == (f"{req.method} {template}" in UNTYPED_RESPONSES), (built.name, schema)
        if not free_form:
            problems += mismatches(spec, model, schema, f"{built.name} response", request=False)
    assert problems == []

    calls = _route_calls(app, req.method, template)
    if req.retry_mode == "write":
        assert IDEMPOTENT.dependency in calls, f"{built.name} retries with a key the route ignores"
    if req.retry_mode == "once":
        assert NOT_IDEMPOTENT.dependency in calls
