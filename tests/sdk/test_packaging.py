"""`pip install memvault-sdk` brings httpx and pydantic and nothing of the server: the wheel's
requirements, its files, its imports, and an import with the server's packages made unimportable."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
import sysconfig
import zipfile
from pathlib import Path

import pytest

# Builds the SDK's wheel and imports it in fresh interpreters.
pytestmark = pytest.mark.slow

SDK = Path(__file__).resolve().parents[2] / "sdk"
ALLOWED = {"httpx", "pydantic", "memvault_sdk"}
SERVER_ONLY = ["memvault", "fastapi", "starlette", "sqlalchemy", "psycopg", "redis", "rq", "torch", "mcp", "uvicorn"]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("wheel")
    # A copy, so the build leaves nothing in the checkout; no build isolation, so this machine's
    # setuptools builds it without reaching an index.
    src = shutil.copytree(SDK, out / "src", ignore=shutil.ignore_patterns("build", "*.egg-info", "__pycache__"))
    subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w", str(out), str(src)],
        check=True,
        timeout=300,
    )
    (built,) = out.glob("memvault_sdk-*.whl")
    return built


def test_the_wheel_requires_only_httpx_and_pydantic(wheel: Path) -> None:
    with zipfile.ZipFile(wheel) as zf:
        (meta,) = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
        text = zf.read(meta).decode()
        names = zf.namelist()
    assert "Name: memvault-sdk" in text
    requires = [line.split(":", 1)[1].strip() for line in text.splitlines() if line.startswith("Requires-Dist:")]
    assert sorted(r.split(">")[0].split("<")[0].split("=")[0].strip() for r in requires) == ["httpx", "pydantic"]
    packages = {n.split("/")[0] for n in names if not n.split("/")[0].endswith(".dist-info")}
    assert packages == {"memvault_sdk"}
    assert "memvault_sdk/py.typed" in names


def test_the_sdk_imports_nothing_else() -> None:
    stdlib = set(sys.stdlib_module_names)
    for path in (SDK / "memvault_sdk").rglob("*.py"):
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                roots = {a.name.split(".")[0] for a in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                roots = {node.module.split(".")[0]}
            else:
                continue
            assert roots <= stdlib | ALLOWED | {"__future__"}, f"{path.name} imports {roots - stdlib - ALLOWED}"


def test_it_imports_and_works_without_the_server_packages(tmp_path: Path) -> None:
    """A fresh interpreter where importing any server package fails, and only the wheel's
    contents on the path besides the standard library, httpx and pydantic."""
    script = f"""
import sys
BLOCKED = {SERVER_ONLY!r}
class Block:
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in BLOCKED:
            raise ImportError(f"{{name}} is a server package")
sys.meta_path.insert(0, Block())
import memvault_sdk
from memvault_sdk import AsyncMemVault, MemVault
client = MemVault(api_key="mv_test", base_url="http://127.0.0.1:1")
assert client.memories and client.search and AsyncMemVault(api_key="mv_test")
assert not [m for m in sys.modules if m.split(".")[0] in BLOCKED]
print("ok")
"""
    site = sysconfig.get_paths()["purelib"]
    env = {"PYTHONPATH": f"{SDK}:{site}", "PATH": "/usr/bin:/bin"}
    r = subprocess.run([sys.executable, "-S", "-c", script], env=env, capture_output=True, text=True, timeout=60)
    assert r.returncode == 0, r.stderr
    assert r.stdout.strip() == "ok"
