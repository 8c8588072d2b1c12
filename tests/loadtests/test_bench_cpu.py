"""loadtests/bench_cpu_per_request.py: the CPU it reads includes processes that have ended (a
PostgreSQL backend that closed is reaped by the postmaster), and the mix it weighs is the locust
mixed scenario's."""

from __future__ import annotations

import ast
import os
import subprocess
import sys
from pathlib import Path

LOADTESTS = Path(__file__).resolve().parents[2] / "loadtests"
if str(LOADTESTS) not in sys.path:
    sys.path.append(str(LOADTESTS))

import bench_cpu_per_request as bench  # noqa: E402


def test_a_reaped_childs_cpu_is_counted_in_its_parents_tree() -> None:
    before = bench.tree_cpu(os.getpid())
    burn = "import time\nend = time.process_time() + 0.3\nwhile time.process_time() < end: pass"
    subprocess.run([sys.executable, "-c", burn], check=True)  # started, ended and reaped by this process

    assert bench.tree_cpu(os.getpid()) - before >= 0.25


def test_the_mix_is_the_mixed_scenarios_weights() -> None:
    tree = ast.parse((LOADTESTS / "scenarios" / "mixed.py").read_text())
    weights = {}
    for fn in ast.walk(tree):
        if isinstance(fn, ast.FunctionDef):
            for d in fn.decorator_list:
                if isinstance(d, ast.Call) and getattr(d.func, "id", None) == "task":
                    weights[fn.name] = d.args[0].value  # type: ignore[attr-defined]
    names = {"search": "search", "recall_context": "context", "store": "store", "batch": "batch10"}
    names |= {"get": "get", "list_memories": "list", "mcp_search": "mcp_search"}

    assert {names[k]: v for k, v in weights.items()} == bench.MIX
    assert set(bench.MIX) <= set(bench.OPS)
