"""docs/memory-model.md's worked examples are executed here, in order, against the real app in a
fresh tenant, so the document cannot drift from what the API does.

An example is an ```http block (`METHOD /path`, optionally `as NAME` to keep the response, then a
JSON body) followed by a ```json block whose first line is `// STATUS` and whose JSON must be
contained in the response: objects by subset, lists element by element with the same length
(unless the expected list ends with "…+": any further elements), and "…" matches any value.
`{{NAME.field.0.field}}` is replaced by a kept response's value, `{{now}}` by the time the example
runs; a body `@jsonl NAME` sends a kept JSON Lines response back.
"""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.conftest import Tenant

DOC = Path(__file__).resolve().parents[1] / "docs" / "memory-model.md"
BLOCK = re.compile(r"```(http|json)\n(.*?)```", re.S)
PLACEHOLDER = re.compile(r"\{\{([\w.]+)\}\}")
ANY = "…"


def examples() -> list[tuple[str, str, str | None, Any, int, Any]]:
    blocks = BLOCK.findall(DOC.read_text())
    out = []
    for (lang1, req), (lang2, resp) in zip(blocks[::2], blocks[1::2], strict=True):
        assert (lang1, lang2) == ("http", "json"), f"an http block must be followed by a json block: {req!r}"
        first, _, body = req.strip().partition("\n")
        m = re.fullmatch(r"(GET|POST|PATCH|DELETE) (\S+)(?: as (\w+))?", first.strip())
        assert m, f"bad request line {first!r}"
        status_line, _, expected = resp.strip().partition("\n")
        sm = re.fullmatch(r"// (\d{3})", status_line.strip())
        assert sm, f"a json block starts with `// STATUS`: {status_line!r}"
        out.append((m[1], m[2], m[3], body.strip() or None, int(sm[1]), expected.strip() or None))
    return out


def lookup(saved: dict[str, Any], path: str) -> Any:
    if path == "now":
        return saved["now"]
    value: Any = saved
    for part in path.split("."):
        value = value[int(part)] if isinstance(value, list) else value[part]
    return value


def fill(text: str, saved: dict[str, Any]) -> str:
    return PLACEHOLDER.sub(lambda m: str(lookup(saved, m[1])), text)


def contains(actual: Any, expected: Any, where: str = "$") -> None:
    if expected == ANY:
        return
    if isinstance(expected, dict):
        assert isinstance(actual, dict), f"{where}: expected an object, got {actual!r}"
        for k, v in expected.items():
            assert k in actual, f"{where}: no field {k!r} in {sorted(actual)}"
            contains(actual[k], v, f"{where}.{k}")
    elif isinstance(expected, list):
        open_ended = bool(expected) and expected[-1] == ANY + "+"
        if open_ended:
            expected = expected[:-1]
        assert isinstance(actual, list), f"{where}: expected a list, got {actual!r}"
        assert len(actual) >= len(expected) if open_ended else len(actual) == len(expected), (
            f"{where}: {len(actual)} items, expected {len(expected)}{' or more' if open_ended else ''}: {actual!r}"
        )
        for i, (a, e) in enumerate(zip(actual, expected, strict=False)):
            contains(a, e, f"{where}[{i}]")
    else:
        assert actual == expected, f"{where}: {actual!r} != {expected!r}"


def test_the_document_has_an_example_for_every_point() -> None:
    text = DOC.read_text()
    for n in range(1, 12):
        assert re.search(rf"^## {n}\. ", text, re.M), f"docs/memory-model.md lacks section {n}"
    assert len(examples()) >= 11


async def test_every_example_runs_as_written(client: httpx.AsyncClient, tenant_a: Tenant) -> None:
    saved: dict[str, Any] = {}
    for method, path, name, body, status, expected in examples():
        saved["now"] = datetime.now(UTC).isoformat()
        url = fill(path, saved)
        if body and body.startswith("@jsonl "):
            content: bytes | None = "\n".join(json.dumps(r) for r in saved[body.split()[1]]).encode()
        else:
            content = fill(body, saved).encode() if body else None
        headers = {**tenant_a.headers, "content-type": "application/json"}
        r = await client.request(method, url, content=content, headers=headers)
        assert r.status_code == status, f"{method} {url}: {r.status_code} {r.text}"
        try:
            got = r.json()
        except ValueError:
            got = [json.loads(line) for line in r.text.splitlines()] if r.text else None
        if expected:
            try:
                want = json.loads(fill(expected, saved))
            except ValueError as exc:
                pytest.fail(f"the expected JSON after {method} {path} does not parse: {exc}")
            contains(got, want, f"{method} {path}")
        if name:
            saved[name] = got
