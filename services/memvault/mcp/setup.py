"""The rules an agent keeps in its project (CLAUDE.md, AGENTS.md, .cursor/rules) so that it uses
memvault well: when to recall, what to store, never secrets. One text, read by the `memory_setup`
tool and prompt and written by `memvault mcp setup`.

The block sits between stable markers, so writing it again replaces it in place (never a second
copy) and the rest of the file is left as it was. A file that holds the opt-out marker is never
touched: a project (or a person) that does not want the rules says so in the file itself.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

BEGIN = "<!-- memvault:begin -->"
END = "<!-- memvault:end -->"
OPT_OUT = "<!-- memvault: no-setup -->"

Target = Literal["claude", "agents", "cursor"]
TARGETS: dict[Target, str] = {
    "claude": "CLAUDE.md",
    "agents": "AGENTS.md",
    "cursor": ".cursor/rules/memvault.mdc",
}
# Cursor reads a rule file's front matter to decide when the rule applies: always.
_CURSOR_HEAD = "---\ndescription: How to use memvault, the project's long-term memory\nalwaysApply: true\n---\n\n"

RULES = """\
## Memory (memvault)

This project keeps long-term memory in memvault, reached through the MCP tools named `memory_*`.

- **Recall first.** At the start of a task call `memory_get_context` with a short query about the \
task (and the user's `user_id` when you know it); call `memory_search` when you need something \
specific. Prefer what memory says over guessing, and say when a memory looks out of date.
- **Store what lasts.** Call `memory_store` for decisions and their reasons, preferences, \
conventions, corrections and facts about the project or the people in it that the repository does \
not already record. One self-contained statement each; give a stable `key` to anything that may \
change, so the new value replaces the old one (which stays in `memory_history`).
- **Check before you trust.** When two memories disagree, look at `memory_history`, say which one \
you rely on and why, and store the resolution.
- **Never store secrets**: passwords, API keys, tokens, private keys, connection strings, or \
personal data the user did not ask you to keep. Do not store code, diffs or chatter either.
- **Forget on request** with `memory_forget`.
"""

Outcome = Literal["created", "updated", "unchanged", "opted_out"]
State = Literal["installed", "outdated", "missing", "opted_out"]


class SetupError(ValueError):
    """A file whose markers are broken: writing would risk the text around them."""


def block() -> str:
    """The rule block as it goes into a file, markers included."""
    return f"{BEGIN}\n{RULES}{END}\n"


@dataclass(frozen=True)
class Written:
    path: Path
    outcome: Outcome


def _span(text: str, path: Path) -> tuple[int, int] | None:
    start = text.find(BEGIN)
    if start < 0:
        return None
    end = text.find(END, start)
    if end < 0:
        raise SetupError(f"{path}: '{BEGIN}' without '{END}'; fix the file by hand")
    end += len(END)
    if text.startswith("\n", end):
        end += 1
    return start, end


def install(directory: Path, target: Target) -> Written:
    """Write the block into one target file under ``directory``: replace it between the markers,
    or append it; create the file when there is none. A file with the opt-out marker is left alone."""
    path = directory / TARGETS[target]
    new = block()
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text((_CURSOR_HEAD if target == "cursor" else "") + new, encoding="utf-8")
        return Written(path, "created")
    text = path.read_text(encoding="utf-8")
    if OPT_OUT in text:
        return Written(path, "opted_out")
    span = _span(text, path)
    if span is None:
        joined = text if not text or text.endswith("\n\n") else text.rstrip("\n") + "\n\n"
        updated = joined + new
    else:
        updated = text[: span[0]] + new + text[span[1] :]
    if updated == text:
        return Written(path, "unchanged")
    path.write_text(updated, encoding="utf-8")
    return Written(path, "updated")


def chosen(directory: Path, target: Target | Literal["all"] | None) -> list[Target]:
    """The targets one run writes: the one named, all three, or by default those whose file the
    project already has, else AGENTS.md (read by most agents)."""
    if target == "all":
        return list(TARGETS)
    if target is not None:
        return [target]
    present = [t for t, name in TARGETS.items() if (directory / name).exists()]
    return present or ["agents"]


def state(directory: Path) -> dict[str, State]:
    """Per rule file of the project: whether the current block is in it."""
    out: dict[str, State] = {}
    for name in TARGETS.values():
        path = directory / name
        text = path.read_text(encoding="utf-8") if path.is_file() else ""
        if OPT_OUT in text:
            out[name] = "opted_out"
        elif block() in text:
            out[name] = "installed"
        elif BEGIN in text:
            out[name] = "outdated"
        else:
            out[name] = "missing"
    return out


def describe(w: Written, directory: Path) -> str:
    """One line for the person who ran the command."""
    name = w.path.relative_to(directory) if w.path.is_relative_to(directory) else w.path
    if w.outcome == "opted_out":
        return f"{name}: left alone (it holds the opt-out marker {OPT_OUT})"
    return f"{name}: {w.outcome}"


@dataclass(frozen=True)
class ClientSetup:
    """How one MCP client connects to memvault's URL: what to paste, and where. The client then
    opens memvault's sign-in page itself (OAuth), so no secret is in the text."""

    client: str  # a stable id: claude-code, claude-desktop, cursor, vscode
    name: str
    where: str  # the file or place the text goes
    text: str
    then: str  # what to do after pasting it


def clients(mcp_url: str) -> list[ClientSetup]:
    """The set-up of each client we document (docs/mcp.md, "Paste the URL") for ``mcp_url``,
    one function so the dashboard and any other door show the same formats."""
    server = {"memvault": {"url": mcp_url}}
    return [
        ClientSetup(
            "claude-code",
            "Claude Code",
            "a terminal, in your project",
            f"claude mcp add --transport http memvault {mcp_url}",
            "Run /mcp in a Claude Code session and sign in.",
        ),
        ClientSetup(
            "claude-desktop",
            "Claude Desktop",
            "Settings → Connectors → Add custom connector (or claude_desktop_config.json, through mcp-remote)",
            json.dumps(
                {"mcpServers": {"memvault": {"command": "npx", "args": ["-y", "mcp-remote", mcp_url]}}}, indent=2
            ),
            "Paste the URL as a custom connector, or this file's entry and restart Claude Desktop; sign in when the "
            "browser opens.",
        ),
        ClientSetup(
            "cursor",
            "Cursor",
            "~/.cursor/mcp.json (or .cursor/mcp.json in a project)",
            json.dumps({"mcpServers": server}, indent=2),
            'Choose "Connect" beside memvault in Cursor\'s MCP settings and sign in.',
        ),
        ClientSetup(
            "vscode",
            "VS Code",
            ".vscode/mcp.json",
            json.dumps({"servers": {"memvault": {"type": "http", "url": mcp_url}}}, indent=2),
            'Choose "Start" above the server in the file and allow the sign-in.',
        ),
    ]
