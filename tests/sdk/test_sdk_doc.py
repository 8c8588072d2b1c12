"""docs/sdk.md's ```python blocks run here, in order and in one namespace, against the real
server with MEMVAULT_API_KEY and MEMVAULT_BASE_URL set as a user would set them."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from tests.conftest import Tenant

DOC = Path(__file__).resolve().parents[2] / "docs" / "sdk.md"


def blocks() -> list[str]:
    return re.findall(r"```python\n(.*?)```", DOC.read_text(), re.S)


def test_the_document_covers_every_resource() -> None:
    text = "".join(blocks())
    for call in (
        "memories.create(", "memories.create_many(", "memories.list(", "memories.update(", "memories.history(",
        "memories.archive(", "memories.promote(", "memories.link_entities(", "client.search(", "client.context(",
        "events.ingest(", "jobs.wait(", "sessions.get(", "sessions.messages(", "entities.create(", "entities.get(",
        "relations.create(", "traces.start(", "traces.step(", "traces.complete(", "traces.search(",
        "namespaces.create(", "keys.create(", "keys.rotate(", "keys.revoke(", "audit.list(", ".export(", "import_(",
        "forget(", "status(", "AsyncMemVault(",
    ):  # fmt: skip
        assert call in text, f"docs/sdk.md has no example of {call}"


def test_every_example_runs(tenant_a: Tenant, server_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_API_KEY", tenant_a.key)
    monkeypatch.setenv("MEMVAULT_BASE_URL", server_url)
    monkeypatch.delenv("MEMVAULT_NAMESPACE", raising=False)
    scope: dict[str, object] = {"__name__": "sdk_doc"}
    for n, code in enumerate(blocks(), 1):
        try:
            exec(compile(code, f"docs/sdk.md block {n}", "exec"), scope)
        except Exception as exc:
            pytest.fail(f"docs/sdk.md block {n} failed: {exc!r}\n{code}")
    client = scope["client"]
    client.close()  # type: ignore[attr-defined]
