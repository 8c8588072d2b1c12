"""Client rules (mcp/setup.py): the `memory_setup` tool and prompt hand out the block,
`memvault mcp setup` writes it into a project idempotently and respects the opt-out marker, and
`memory_status` says whether it is installed where it can see the project (stdio) and null over HTTP."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from memvault import cli
from memvault.config import Settings
from memvault.mcp import setup
from tests.conftest import Tenant
from tests.mcp.conftest import call, mcp_session
from tests.mcp.test_stdio import MEMVAULT


def run_setup(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str]:
    code = cli.main(["mcp", "setup", *args])
    return code, capsys.readouterr().out


class TestTheBlock:
    async def test_tool_prompt_and_status_over_http(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            out = await call(s, "memory_setup")
            assert out["block"] == setup.block()
            assert out["block"].startswith(setup.BEGIN) and out["block"].rstrip().endswith(setup.END)
            assert "Never store secrets" in out["block"] and "memory_get_context" in out["block"]
            assert out["files"] == {
                "claude": "CLAUDE.md",
                "agents": "AGENTS.md",
                "cursor": ".cursor/rules/memvault.mdc",
            }
            # Over HTTP the server cannot see the client's project: it says so rather than guess.
            assert out["installed"] is None
            assert (await call(s, "memory_status"))["rules"] is None
            prompt = await s.get_prompt("memory-setup", {"target": "claude"})
            text = prompt.messages[0].content.text  # type: ignore[union-attr]
            assert "`CLAUDE.md`" in text and setup.block() in text and setup.OPT_OUT in text
            assert {p.name for p in (await s.list_prompts()).prompts} >= {"memory-setup", "memory-reasoning"}

    async def test_reasoning_prompt(self, base_url: str, tenant_a: Tenant) -> None:
        async with mcp_session(base_url, tenant_a.key) as s:
            prompt = await s.get_prompt("memory-reasoning", {"question": "Where does Ana live?", "user_id": "ana"})
        text = prompt.messages[0].content.text  # type: ignore[union-attr]
        assert "Where does Ana live?" in text and "user_id `ana`" in text
        for step in (
            "memory_get_context",
            "memory_search",
            "memory_history",
            "trace_start",
            "confidence",
            "memory_store",
        ):
            assert step in text


class TestSetupCommand:
    def test_writes_once_and_replaces_in_place(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        claude = tmp_path / "CLAUDE.md"
        claude.write_text("# Project\n\nUse tabs.\n")
        code, out = run_setup(capsys, "--dir", str(tmp_path))
        # The default is the rule files the project has: here CLAUDE.md only.
        assert code == 0 and out == "CLAUDE.md: updated\n"
        first = claude.read_text()
        assert first == "# Project\n\nUse tabs.\n\n" + setup.block()
        assert run_setup(capsys, "--dir", str(tmp_path)) == (0, "CLAUDE.md: unchanged\n")
        assert claude.read_text() == first
        # An older block (edited, or from an earlier version) is replaced where it stands, text after it kept.
        claude.write_text(f"# Project\n\n{setup.BEGIN}\nold rules\n{setup.END}\n\nMore notes.\n")
        assert run_setup(capsys, "--dir", str(tmp_path)) == (0, "CLAUDE.md: updated\n")
        assert claude.read_text() == f"# Project\n\n{setup.block()}\nMore notes.\n"
        assert claude.read_text().count(setup.BEGIN) == 1

    def test_all_targets_and_the_default_for_an_empty_project(
        self, tmp_path: Path, capsys: pytest.CaptureFixture[str]
    ) -> None:
        assert run_setup(capsys, "--dir", str(tmp_path)) == (0, "AGENTS.md: created\n")
        code, out = run_setup(capsys, "--dir", str(tmp_path), "--target", "all")
        assert code == 0
        assert out.splitlines() == ["CLAUDE.md: created", "AGENTS.md: unchanged", ".cursor/rules/memvault.mdc: created"]
        cursor = (tmp_path / ".cursor/rules/memvault.mdc").read_text()
        assert cursor.startswith("---\n") and "alwaysApply: true" in cursor and cursor.endswith(setup.block())
        assert setup.state(tmp_path) == {
            n: "installed" for n in ("CLAUDE.md", "AGENTS.md", ".cursor/rules/memvault.mdc")
        }

    def test_opt_out_is_respected_and_said(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        agents = tmp_path / "AGENTS.md"
        agents.write_text(f"# Rules\n{setup.OPT_OUT}\n")
        code, out = run_setup(capsys, "--dir", str(tmp_path), "--target", "agents")
        assert code == 0 and "AGENTS.md: left alone" in out and setup.OPT_OUT in out
        assert agents.read_text() == f"# Rules\n{setup.OPT_OUT}\n"
        assert setup.state(tmp_path)["AGENTS.md"] == "opted_out"

    def test_a_begin_marker_without_end_is_refused(self, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
        agents = tmp_path / "AGENTS.md"
        agents.write_text(f"{setup.BEGIN}\nhalf a block\n")
        assert cli.main(["mcp", "setup", "--dir", str(tmp_path)]) == 1
        assert "without" in capsys.readouterr().err and agents.read_text() == f"{setup.BEGIN}\nhalf a block\n"


@pytest.mark.slow
async def test_status_reports_the_rules_of_the_project_stdio_runs_in(
    settings: Settings, tenant_a: Tenant, tmp_path: Path
) -> None:
    setup.install(tmp_path, "claude")
    env = {
        **os.environ,
        "MEMVAULT_DATABASE_URL": str(settings.database_url),
        "MEMVAULT_API_KEY": tenant_a.key,
        "HF_HUB_OFFLINE": "1",
        "MEMVAULT_LOG_LEVEL": "WARNING",
    }
    params = StdioServerParameters(command=MEMVAULT, args=["mcp", "--profile", "extended"], env=env, cwd=tmp_path)
    async with stdio_client(params) as (read, write), ClientSession(read, write) as s:
        await s.initialize()
        status = await call(s, "memory_status")
        assert status["rules"] == {
            "CLAUDE.md": "installed",
            "AGENTS.md": "missing",
            ".cursor/rules/memvault.mdc": "missing",
        }
        assert (await call(s, "memory_setup"))["installed"]["CLAUDE.md"] == "installed"
