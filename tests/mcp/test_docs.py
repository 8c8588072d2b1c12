"""docs/mcp.md's reference section is the server's own description of its tools, resources and
prompts, so the document cannot drift from what clients see."""

from __future__ import annotations

import re
from pathlib import Path

from memvault.mcp.reference import render
from memvault.mcp.server import INSTRUCTIONS

DOC = Path(__file__).resolve().parents[2] / "docs" / "mcp.md"


async def test_reference_matches_the_server() -> None:
    text = DOC.read_text()
    m = re.search(r"<!-- reference:start -->\n(.*)<!-- reference:end -->", text, re.S)
    assert m, "docs/mcp.md lacks its reference markers"
    assert m[1].strip() == (await render()).strip(), "regenerate: python -m memvault.mcp.reference"


def test_instructions_are_quoted_verbatim() -> None:
    assert INSTRUCTIONS.strip() in DOC.read_text()
