"""Our stylesheets as a browser reads them: one unclosed block swallows every rule after it
(a merge once left the jobs page's @media block open, and the overview's charts lost their
colours), so each file's blocks must close, and each file must be served."""

from __future__ import annotations

from importlib import resources

import pytest

from memvault.web.render import STATIC, static_file

SHEETS = [name for name in STATIC if name.endswith(".css")]


def _blocks_close(css: str) -> bool:
    depth, i = 0, 0
    while i < len(css):
        if css.startswith("/*", i):
            i = css.index("*/", i) + 2
            continue
        depth += {"{": 1, "}": -1}.get(css[i], 0)
        if depth < 0:
            return False
        i += 1
    return depth == 0


@pytest.mark.parametrize("name", SHEETS)
def test_every_block_of_the_stylesheet_closes(name: str) -> None:
    css = resources.files("memvault.web").joinpath("static", name).read_text()
    assert "<<<<<<<" not in css and ">>>>>>>" not in css
    assert _blocks_close(css)


def test_an_open_block_is_caught() -> None:
    assert not _blocks_close("@media (max-width: 480px) { a { color: red; }\n.b { fill: blue; }")


@pytest.mark.parametrize("name", list(STATIC))
def test_every_static_file_is_served(name: str) -> None:
    assert static_file(name) is not None
