"""Telling a paraphrase from a different fact that happens to embed close to it.

Sentence embeddings place "Ana's flight is on Monday" and "... on Tuesday" at cosine 0.97, closer
than most paraphrases: vectors capture the topic, not the detail that makes two facts differ.
So two memories are merged only when, besides being similar enough, nothing that decides the
fact differs. Kept deliberately conservative: a missed merge costs a duplicate in recall, a
wrong one loses a fact.
"""

from __future__ import annotations

import re

_WORD = re.compile(r"[A-Za-z]+(?:'[a-z]+)?|\d+(?:[.,:]\d+)*")
_NUMBER = re.compile(r"\d+(?:[.,:]\d+)*")


def _vocabulary(words: str) -> frozenset[str]:
    return frozenset(words.split(" "))


NEGATIONS = _vocabulary(
    "not no never none nobody nothing nowhere neither nor without cannot can't won't don't doesn't didn't "
    "isn't aren't wasn't weren't hasn't haven't hadn't shouldn't wouldn't couldn't mustn't"
)
# Words that state an opposite attitude to their neighbours: "likes olives" vs "hates olives".
AVERSIONS = _vocabulary("hate hates hated dislike dislikes disliked avoid avoids avoided detest detests")
# Time words: "on Monday" vs "on Tuesday", "in the morning" vs "in the evening", "last" vs "next".
# ("may", "this" and "fall" are left out: as modal, pronoun and verb they are too common.)
TIME_WORDS = _vocabulary(
    "monday tuesday wednesday thursday friday saturday sunday weekend weekday weekdays "
    "january february march april june july august september october november december "
    "yesterday today tonight tomorrow morning afternoon evening night noon midnight "
    "last next previous ago before after early late earlier later "
    "am pm daily weekly monthly yearly annually spring summer autumn winter"
)


def _words(text: str) -> list[str]:
    return _WORD.findall(text)


def _negated(words: list[str]) -> bool:
    return any(w in NEGATIONS or w.endswith("n't") for w in words)


def _names(text: str) -> set[str]:
    """Capitalised words that do not start a sentence: people, places, products."""
    out: set[str] = set()
    for sentence in re.split(r"[.!?;:]\s+", text.strip()):
        for w in _words(sentence)[1:]:
            if w[0].isupper() and w.lower() not in TIME_WORDS:
                out.add(w.lower())
    return out


def why_distinct(a: str, b: str) -> str | None:
    """The reason two similar texts state different facts, or None when they may be merged.

    Different if they differ in: numbers (dates, times, amounts, versions), negation, stated
    aversion, time words (weekdays, months, parts of the day, last/next), or names that appear
    mid-sentence. Case and punctuation never count."""
    wa, wb = [w.lower() for w in _words(a)], [w.lower() for w in _words(b)]
    if set(_NUMBER.findall(a)) != set(_NUMBER.findall(b)):
        return "numbers"
    if _negated(wa) != _negated(wb):
        return "negation"
    if bool(AVERSIONS.intersection(wa)) != bool(AVERSIONS.intersection(wb)):
        return "aversion"
    if TIME_WORDS.intersection(wa) != TIME_WORDS.intersection(wb):
        return "time"
    if _names(a) != _names(b):
        return "names"
    return None
