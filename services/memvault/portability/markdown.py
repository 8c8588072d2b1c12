"""A Markdown mirror of memory for a git repository: one file per current memory,
``<namespace>/<type>/<id>.md``, YAML front matter (id, type, key, scope, owner, dates, importance)
and the content as the body.

The output depends only on the memories: the same memories give the same bytes, so running it
again without changes leaves nothing to commit. A manifest (``.memvault-mirror.json``) lists the
files each namespace's run wrote; the next run removes those whose memory is gone (forgotten, or
replaced by a new version with a new id), and never a file it did not write.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

MANIFEST = ".memvault-mirror.json"
# Front matter in this order; access counts are left out, since every read would change the file.
FIELDS = (
    "id",
    "namespace",
    "type",
    "key",
    "scope",
    "state",
    "user_id",
    "agent_id",
    "session_id",
    "importance",
    "confidence",
    "valid_from",
    "valid_to",
    "recorded_at",
    "created_at",
    "updated_at",
    "supersedes",
    "created_by",
)


def _scalar(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, datetime):
        value = value.isoformat()
    # A JSON string is a YAML double-quoted scalar: no value can break the front matter.
    return json.dumps(str(value), ensure_ascii=False)


def path_of(record: dict[str, Any]) -> str:
    return f"{record['namespace']}/{record['type']}/{record['id']}.md"


def render(record: dict[str, Any]) -> str:
    """One memory as a Markdown file: front matter, a blank line, the content."""
    head = "\n".join(f"{name}: {_scalar(record.get(name))}" for name in FIELDS)
    return f"---\n{head}\n---\n\n{record['content'].rstrip()}\n"


@dataclass
class Mirror:
    """Writes a run's files under ``root`` and, at the end, removes what earlier runs wrote for the
    same namespaces and this run did not."""

    root: Path
    written: dict[str, set[str]] = field(default_factory=dict)
    counts: dict[str, int] = field(default_factory=lambda: {"written": 0, "unchanged": 0, "removed": 0})

    def put(self, record: dict[str, Any]) -> None:
        rel = path_of(record)
        self.written.setdefault(record["namespace"], set()).add(rel)
        path = self.root / rel
        text = render(record)
        if path.is_file() and path.read_text(encoding="utf-8") == text:
            self.counts["unchanged"] += 1
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
        self.counts["written"] += 1

    def finish(self, namespaces: Iterable[str], *, every_namespace: bool) -> dict[str, int]:
        """Prune and save the manifest. ``namespaces``: those this run covered (even when empty);
        ``every_namespace``: the run covered the whole tenant, so namespaces gone since are pruned too."""
        manifest_path = self.root / MANIFEST
        before: dict[str, list[str]] = (
            json.loads(manifest_path.read_text(encoding="utf-8"))["files"] if manifest_path.is_file() else {}
        )
        covered = set(namespaces) | (set(before) if every_namespace else set())
        after = {ns: sorted(files) for ns, files in before.items() if ns not in covered}
        for ns in covered:
            now = self.written.get(ns, set())
            for rel in set(before.get(ns, ())) - now:
                self._remove(rel)
            if now:
                after[ns] = sorted(now)
        text = json.dumps({"files": dict(sorted(after.items()))}, indent=2, ensure_ascii=False) + "\n"
        if not manifest_path.is_file() or manifest_path.read_text(encoding="utf-8") != text:
            self.root.mkdir(parents=True, exist_ok=True)
            manifest_path.write_text(text, encoding="utf-8")
        return dict(self.counts)

    def _remove(self, rel: str) -> None:
        path = (self.root / rel).resolve()
        # Only a file under the mirror's root: a tampered manifest cannot reach outside it.
        if not path.is_relative_to(self.root.resolve()) or not path.is_file():
            return
        path.unlink()
        self.counts["removed"] += 1
        parent = path.parent
        while parent != self.root.resolve() and not any(parent.iterdir()):
            parent.rmdir()
            parent = parent.parent
