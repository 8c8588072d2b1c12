"""The README and docs promise things; these keep the promises true."""

from __future__ import annotations

import re
from pathlib import Path

from memvault.cli import build_parser
from memvault.config import Settings

ROOT = Path(__file__).resolve().parents[1]


class TestReadme:
    def test_every_setting_is_in_the_configuration_table(self) -> None:
        readme = (ROOT / "README.md").read_text()
        documented = set(re.findall(r"`(MEMVAULT_[A-Z0-9_]+)`", readme))
        settings = {f"MEMVAULT_{name.upper()}" for name in Settings.model_fields}
        assert settings - documented == set(), "settings missing from the README table"
        assert documented - settings == set(), "README documents settings that do not exist"

    def test_first_two_commands_are_serve_then_test(self) -> None:
        readme = (ROOT / "README.md").read_text()
        blocks = re.findall(r"```bash\n(.*?)```", readme, flags=re.S)
        assert blocks[0].strip() == "bash infra/scripts/serve.sh"
        assert blocks[1].strip() == "bash infra/scripts/test.sh"

    def test_ci_runs_the_readme_test_command(self) -> None:
        assert "infra/scripts/test.sh" in (ROOT / ".ci" / "run").read_text()

    def test_documented_admin_commands_exist(self) -> None:
        parser = build_parser()
        admin = next(a for a in parser._subparsers._group_actions[0].choices.items() if a[0] == "admin")[1]
        known = set(admin._subparsers._group_actions[0].choices)
        for doc in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
            for cmd in re.findall(r"memvault admin ([a-z-]+)", doc.read_text()):
                assert cmd in known, f"{doc.relative_to(ROOT)}: memvault admin {cmd}"


def _anchors(markdown: str) -> set[str]:
    """GitHub's heading anchors: lowercased, punctuation dropped, spaces to hyphens."""
    text = re.sub(r"```.*?```", "", markdown, flags=re.S)
    slugs = set()
    for heading in re.findall(r"^#{1,6} +(.+?) *$", text, flags=re.M):
        slug = re.sub(r"[^\w\- ]", "", heading.strip().lower()).replace(" ", "-")
        slugs.add(slug)
    return slugs


class TestLinks:
    def test_every_relative_link_and_anchor_resolves(self) -> None:
        """Moving a section (docs/benchmarks.md into its journal) must not leave a dead link."""
        broken = []
        for page in [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]:
            text = re.sub(r"```.*?```", "", page.read_text(), flags=re.S)
            for target in re.findall(r"\]\(([^)\s]+)\)", text):
                if re.match(r"[a-z]+:", target):
                    continue
                path, _, anchor = target.partition("#")
                linked = (page.parent / path).resolve() if path else page
                dead_anchor = bool(anchor) and linked.suffix == ".md" and linked.exists()
                dead_anchor = dead_anchor and anchor not in _anchors(linked.read_text())
                if not linked.exists() or dead_anchor:
                    broken.append(f"{page.name}: {target}")
        assert broken == []
