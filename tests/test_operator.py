"""The owner role bypasses row-level security, so its sessions and connections are opened in one
module (memvault/operator.py) that can be read whole. This walks the server's code for any other
place that reaches for them."""

from __future__ import annotations

import ast
from pathlib import Path

import memvault

PACKAGE = Path(memvault.__file__).parent

# db/ defines the owner session; operator.py is the one module that opens it.
ALLOWED = {"db/session.py", "operator.py"}


def owner_uses(path: Path) -> list[int]:
    tree = ast.parse(path.read_text(), filename=str(path))
    return [
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Attribute)
        and node.attr in ("owner", "owner_engine", "_owner_sessions")
        and not (isinstance(node.value, ast.Name) and node.value.id == "urls")  # a URL, not a session
    ]


def test_only_the_operator_module_opens_owner_sessions() -> None:
    found = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        rel = path.relative_to(PACKAGE).as_posix()
        if rel in ALLOWED or rel.startswith("db/migrations/"):
            continue
        if lines := owner_uses(path):
            found[rel] = lines
    assert found == {}, f"owner sessions outside memvault/operator.py: {found}"


def test_the_operators_paths_load_no_metrics() -> None:
    """`memvault serve`'s parent imports memvault.operator before it sets up the metrics' folder
    for its worker processes: a metric made at import would open a file in a folder not yet there
    (the parent then died at start with FileNotFoundError)."""
    import subprocess
    import sys

    code = "import sys, memvault.operator, memvault.cli; sys.exit('memvault.observability.metrics' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], check=False).returncode == 0
