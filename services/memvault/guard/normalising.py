"""Normalising: the same secret written so that the rules would not see it as written.

Secrets are also hidden, on purpose or by a copy through some encoder, so a text the rules pass as
written is normalised and checked again: compatibility forms folded (NFKD: fullwidth and math
letters), combining marks and invisible characters (zero-width space, soft hyphen, bidi controls)
dropped, Cyrillic and Greek look-alikes mapped to Latin, percent, JSON and HTML escapes, escaped and
defanged dots undone; a vendor prefix followed by chunks a space apart is joined back; base64 runs
that decode to text are checked like the text itself (two levels deep). Only the windows around
what normalising changes are checked again, so plain ASCII prose costs what it did. The same
trade-off holds after normalising: joins stop at a chunk that reads as a word, decoded base64 must
be printable text, and the rules still want their shapes. The patterns here keep the rules' linear
time on 32 KB inputs (see `rules`).
"""

from __future__ import annotations

import base64
import binascii
import html
import re
import unicodedata
from collections.abc import Iterator
from urllib.parse import unquote

from memvault.guard.rules import Finding, char_classes, scan

# Combining marks (after NFKD, so an accent added to a token's last letter goes away) and characters
# that render as nothing: zero-width space/joiners, bidi controls, soft hyphen, word joiner, BOM,
# variation selectors, Hangul fillers, tags.
_MARKS_AND_INVISIBLE = re.compile(
    "[\u0300-\u036f\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff9-\ufffb\U000e0000-\U000e0fff]"
)
# Cyrillic and Greek letters drawn like Latin ones (Unicode keeps them apart; fullwidth and
# mathematical letters its compatibility decomposition already folds).
_HOMOGLYPHS = str.maketrans(
    "АВЕКМНОРСТХУЅІЈҮӀаеорсухѕіјһԁԛԝӏ"  # noqa: RUF001 (Cyrillic)
    "ΑΒΕΖΗΙΚΜΝΟΡΤΥΧοναιρυχκϲϳıɑ",
    "ABEKMHOPCTXYSIJYIaeopcyxsijhdqwlABEZHIKMNOPTYXovaipuxkcjia",
)
# Escapes that only hide punctuation: \. \/ \_ (a JWT written for a regex or a JSON string),
# defanged dots ([.] (.)), and JSON's \u002e.
# Only from the start of a run of backslashes, and possessive: a run not followed by punctuation
# fails once, instead of once per starting position (quadratic on a 32 KB run).
_BACKSLASH_PUNCT = re.compile(r"(?<!\\)\\++(?=[^\w\s\\])")
_DEFANGED_DOT = re.compile(r"[\[(]\.[\])]")
_JSON_ESCAPE = re.compile(r"\\u([0-9a-fA-F]{4})")
_PERCENT = re.compile(r"%[0-9a-fA-F]{2}")
# A vendor prefix followed by chunks a space apart ("AKIAIOSF ODNN7EXAMPLE"): the chunks are
# joined one by one and the joins re-checked. It starts only where a chunk starts (the lookbehind
# excludes the chunk's own characters), so "-ghp_-ghp_..." is one attempt, not one per prefix.
_SPLIT_TOKEN = re.compile(
    r"(?<![A-Za-z0-9_.-])(?:(?i:akia|asia)|gh[pousr]_|github_pat_|glpat-|xox[abposr]-|[sr]k_(?:live|test)_|sk-"
    r"|AIza|GOCSPX-|SG\.|SK[0-9a-f]|npm_|pypi-|hf_|mv_|sq0csp-|eyJ)[A-Za-z0-9_.-]*(?:[ \t][A-Za-z0-9_.-]+){1,8}"
)
# Base64 (standard or URL-safe) long enough to hold the shortest secret we know (20 characters).
_BASE64_CANDIDATE = re.compile(r"(?<![A-Za-z0-9+/_-])[A-Za-z0-9+/_-]{24,}={0,2}")
_MAX_DECODE_DEPTH = 2  # base64 of base64 of a token; each level is 3/4 of the one before


def fold(text: str) -> str:
    """Fullwidth and other compatibility forms, accents, invisible characters and homoglyphs to
    plain ASCII (NFKD rather than NFKC: the same folding, with the marks left apart to drop)."""
    if text.isascii():
        return text
    return _MARKS_AND_INVISIBLE.sub("", unicodedata.normalize("NFKD", text)).translate(_HOMOGLYPHS)


def _unescape(text: str) -> str:
    if "%" in text and _PERCENT.search(text):
        # Twice: %255F is a percent-encoded %5F.
        text = unquote(unquote(text))
    if "\\" in text:
        text = _JSON_ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), text)
        text = _BACKSLASH_PUNCT.sub("", text)
    if "." in text and ("[." in text or "(." in text):
        text = _DEFANGED_DOT.sub(".", text)
    if "&" in text and ";" in text:
        text = html.unescape(text)
    return text


# A chunk that reads as a word ends the join: "ghp_ tokens are GitHub classic personal access"
# joins to exactly a token's length of letters.
_WORD = re.compile(r"[A-Z]?[a-z]+")


def _joins(text: str) -> Iterator[str]:
    for m in _SPLIT_TOKEN.finditer(text):
        chunks = m.group(0).split()
        joined = chunks[0]
        for chunk in chunks[1:]:
            if _WORD.fullmatch(chunk) or len(joined) > 300:
                break
            joined += chunk
            lower, upper, digit, _ = char_classes(joined)
            if len(joined) >= 20 and (digit or (lower and upper)):
                yield joined


def _decoded_base64(text: str) -> Iterator[str]:
    for m in _BASE64_CANDIDATE.finditer(text):
        run = m.group(0).rstrip("=").replace("-", "+").replace("_", "/")
        if len(run) % 4 == 1:
            continue
        try:
            decoded = base64.b64decode(run + "=" * (-len(run) % 4), validate=True).decode()
        except (binascii.Error, UnicodeDecodeError):
            continue
        # Text, not bytes that happen to be valid UTF-8: a random or binary run almost never is.
        if decoded.isprintable() or all(c.isprintable() or c in "\t\r\n" for c in decoded):
            yield decoded


# What normalising changes: anything outside ASCII, percent escapes, backslashes, defanged dots and
# HTML entities. Only the text around them is normalised and checked again, so a 32 KB note with
# one accented name costs one small window, not a second pass over all of it.
_DIRTY = re.compile(r"[^\x00-\x7f]+|(?:%[0-9A-Fa-f]{2})+|\\+|\[\.\]|\(\.\)|&#?[A-Za-z0-9]+;")
_WINDOW = 512  # either side of a change: longer than any token the rules know (PEM looks 400 ahead)


def _normalised_windows(text: str) -> Iterator[str]:
    start = end = -1
    for m in _DIRTY.finditer(text):
        lo, hi = max(0, m.start() - _WINDOW), m.end() + _WINDOW
        if lo > end >= 0:
            yield from _normalised(text, start, end)
            start = -1
        if start < 0:
            start = lo
        end = max(end, hi)
    if end >= 0:
        yield from _normalised(text, start, end)


def _normalised(text: str, start: int, end: int) -> Iterator[str]:
    # Widen to whitespace (a little), so the cut does not make a word's tail look like a token's start.
    floor, ceiling = max(0, start - 64), min(len(text), end + 64)
    while start > floor and not text[start - 1].isspace():
        start -= 1
    while end < ceiling and not text[end].isspace():
        end += 1
    window = text[start:end]
    if (normal := _unescape(fold(window))) != window:
        yield normal


def find_hidden(text: str, depth: int) -> Finding | None:
    """The first kind of secret the rules find in `text` normalised, joined or decoded, or None;
    `depth` is how many base64 levels were decoded to reach `text`."""
    parts = [text, *_normalised_windows(text)]
    for normal in parts[1:]:
        if finding := scan(normal):
            return finding
    decoded_seen: set[str] = set()
    for part in parts:
        for joined in _joins(part):
            if finding := scan(joined):
                return finding
        if depth >= _MAX_DECODE_DEPTH:
            continue
        for decoded in _decoded_base64(part):
            if decoded not in decoded_seen:
                decoded_seen.add(decoded)
                if finding := scan(decoded) or find_hidden(decoded, depth + 1):
                    return finding
    return None
