"""The secrets guard: every write path refuses content that looks like a credential.

A memory is read back by agents, embedded, summarised and shown in dashboards, so a secret that gets
in leaks everywhere. The error names the kind of secret and where it was, never the secret itself.

What counts as a secret is `rules` (shapes, value heuristics, the needles that keep regex passes
off prose); `normalising` finds the same secrets hidden by look-alikes, escapes, split chunks and
base64. This module applies both: `find_secret` to one text, `ensure_no_secrets` to a request body,
naming the path of what it refuses.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import NoReturn

from memvault.errors import InvalidInput
from memvault.guard.normalising import find_hidden, fold
from memvault.guard.rules import GENERIC, PAGINATION_NAME, SECRET_KEY_NAME, Finding, scan, secret_value


class SecretDetected(InvalidInput):
    code = "secret_detected"
    title = "Secret detected"


def find_secret(text: str) -> Finding | None:
    """The first kind of secret found in `text`, or None: as written, then normalised (see `normalising`)."""
    return scan(text) or find_hidden(text, 0)


# -- walking request bodies ------------------------------------------------------------------------

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_-]*")


def _child(path: str, key: str) -> str:
    return f"{path}.{key}" if _IDENTIFIER.fullmatch(key) else f"{path}[{json.dumps(key)}]"


def _article(label: str) -> str:
    return "an" if label[0].lower() in "aeio" or label.startswith("npm") else "a"


def _raise(finding: Finding, path: str, where: str) -> NoReturn:
    raise SecretDetected(
        f"{where} looks like it contains {_article(finding.label)} {finding.label}; "
        "memvault never stores secrets. Remove it and retry.",
        extra={"field": path, "kind": finding.kind},
    )


def ensure_no_secrets(value: object, *, field: str) -> None:
    """Raise SecretDetected if `value` (a str, or dict/list nested JSON: check both keys and string values, recursively)
    holds a secret. `field` names where it came from; for nested values report a path like `metadata.db.password` or
    `messages[2].content`."""
    if isinstance(value, str):
        if finding := find_secret(value):
            _raise(finding, field, field)
    elif isinstance(value, Mapping):
        for raw_key, item in value.items():
            key = str(raw_key)
            # A key that is itself a secret must not end up in the reported path: report the parent.
            if finding := find_secret(key):
                _raise(finding, field, f"a key in {field}")
            path = _child(field, key)
            # {"password": "Xk9#..."}: the key supplies the name the value alone lacks (both folded,
            # so "pass\u200bword" still names it).
            name_key = fold(key)
            name = SECRET_KEY_NAME.search(name_key)
            if (
                isinstance(item, str)
                and name
                and not PAGINATION_NAME.search(name_key, 0, name.start())
                and secret_value(fold(item).strip())
            ):
                _raise(GENERIC, path, path)
            ensure_no_secrets(item, field=path)
    elif isinstance(value, list | tuple):
        for i, item in enumerate(value):
            ensure_no_secrets(item, field=f"{field}[{i}]")
