"""docs/accounts.md's walk-through runs here, block by block in one namespace, against a real
server whose mail goes over SMTP to the stub: what the page promises a new customer is what they get."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest

from tests.members.smtp import SmtpStub
from tests.oauth.conftest import Server

DOC = Path(__file__).resolve().parents[2] / "docs" / "accounts.md"


def blocks() -> list[str]:
    walk = DOC.read_text().split("## A walk through", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```python\n(.*?)```", walk, re.S)


def test_the_walk_through_covers_each_part_of_an_account() -> None:
    text = "".join(blocks())
    for route in (
        "/v1/signup", "/v1/signup/verify", "/v1/members/invitations", "/v1/invitations/accept", "/v1/members",
        "/v1/keys", "/rotate", "/v1/account", "RateLimit-Policy", "quota_exceeded", "/v1/account/usage", "text/csv",
    ):  # fmt: skip
        assert route in text, f"docs/accounts.md's walk-through shows no {route}"


async def test_the_walk_through_runs(mserver: Server, smtp: SmtpStub, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MEMVAULT_URL", mserver.base)

    def latest_link(address: str) -> str:
        text = smtp.to(address)[-1].text
        found = re.search(r"(http://\S+\?token=\S+)", text)
        assert found, text
        return found[1]

    scope: dict[str, object] = {"__name__": "accounts_doc", "latest_link": latest_link}

    def run() -> None:
        # On a thread: the examples use a blocking client, and the server answers on this loop.
        for n, code in enumerate(blocks(), 1):
            try:
                exec(compile(code, f"docs/accounts.md block {n}", "exec"), scope)
            except Exception as exc:
                pytest.fail(f"docs/accounts.md block {n} failed: {exc!r}\n{code}")

    await asyncio.to_thread(run)
    scope["mv"].close()  # type: ignore[attr-defined]
