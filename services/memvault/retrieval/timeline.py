"""Time cues answered within the question's subject (issue 30): "where does Ana live now" asks for
the newest of Ana's memories about where she lives, not the newest memory that mentions a city.

The fusion ranks the candidates without time. Then the subject is the best hit and the hits that
say the names it shares with the question and much the same thing (``subject``): the versions of
one fact. Time re-orders those among the places they already hold; every other hit keeps its
place, so a time cue never pulls in an off-subject memory, and a query without one is untouched.

- ``newest`` / ``oldest``: the versions by date, newest or oldest first;
- a window ("in 2019", "as of 1 May 2023", "on 13 October"): ranked in the fusion as before, the
  hits dated in it first whoever they are about, as an event question asks ("what did Melanie
  show Caroline on 13 October"), when one of the subject's versions is dated in it or it is one
  day named as a date. Otherwise the question asks for the state then ("where did Ana live in
  2019", her last move was in 2017; "as of 4 March 2021"): the subject's version in force when it
  began (the latest dated before it) comes first.
  The subject is found as the question alone ranks the hits (the window's part taken off their
  scores): with it, whatever else is dated in the window would be taken for the subject;
- ``before`` / ``after`` an event: the version just before or after the event, which is the first
  version that says the rarest of its words (the version that introduced "Lisbon", not the later
  one that says she left it). A date there is a window ("the week before 16 November").

A memory's date is its ``valid_from``, else when it was stored (memories.reads_repository.date_of);
versions of one date are in the order written (``place_of``).
"""

from __future__ import annotations

import math
import operator
import re
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from memvault.memories.schemas import occurred
from memvault.retrieval.cues import QueryCues, stem, tokens, words_of
from memvault.retrieval.hits import Hit

# Rows the first stage fetches when a time cue will re-order them: room for a subject's older
# versions that rank below the page.
FETCH = 20
# A hit is of the subject if it says every name the question and the best hit share, and its
# meaning is this close to the subject's prototype: the mean vector of the best PROTOTYPE hits that
# say those names. Versions of one fact differ in their values; their mean keeps what they share
# (the subject, the relation), and the subject's other facts ("plays the cello" beside "moved to
# Lisbon") stay further from it than from any single version. Chosen on
# loadtests/quality/evolving.py (seed 30), checked on another seed (docs/benchmarks.md).
# No test of how well a hit scores beside the best: the fused score is scaled over the candidates,
# so among few (a search filtered to one user's memories) a second version scored near 0 beside
# the first, and an event's words ("before moving to Lisbon") lift the one version that says them
# far above the others (evolving.py --group, docs/benchmarks.md).
PROTOTYPE = 3
SIMILAR = 0.65
# And a version says much the same as the best hit itself. When the best hits are no versions of
# one fact (one user's memories, none naming anyone: "I moved to Rotterdam last month", "I hate
# crowded places", "My budget is 40 euros a month"), their mean lies near each of them, and every
# memory written since the best hit's date was taken for a newer version ("Where do I live now?"
# answered "I hate crowded places"). Those lie 0.1-0.26 from the best hit; versions of one fact
# 0.5 and more ("I moved to Amsterdam in 2020" 0.66). At 0.3 no question of evolving.py's
# recordings changes (seeds 30 and 31, one pool and owners of one subject); 0.4 gained 1-4 of
# seed 30's and lost 1-2 of seed 31's (docs/benchmarks.md).
BESIDE_BEST = 0.3
# Capitalised words of a question that name no subject.
NOT_NAMES = frozenset(
    [
        "where",
        "what",
        "which",
        "who",
        "whom",
        "whose",
        "how",
        "when",
        "why",
        "does",
        "did",
        "do",
        "is",
        "are",
        "was",
        "were",
        "as",
        "in",
        "before",
        "after",
        "initially",
        "originally",
        "during",
        "back",
        "at",
        "since",
        "the",
        "a",
        "an",
        "has",
        "have",
        "had",
        "can",
        "could",
        "would",
        "should",
        "will",
    ]
)
NAME = re.compile(r"[A-Za-z][A-Za-z0-9.'-]*")
# The people (and pets) a memory can open on instead of its subject: "User's sister lives in
# Paris", "Kenji's daughter Yuki starts school", "My brother moved to Oslo" are the sister's, the
# daughter's and the brother's facts, never versions of the user's, Kenji's or the writer's. A
# version must open on the same one as the best hit, or on none (``_whose``).
RELATIVES = frozenset(
    # A word list reads best as words.
    """sister sisters brother brothers sibling siblings mother mom mum father dad parent parents
    wife husband spouse partner girlfriend boyfriend fiance fiancee son sons daughter daughters
    child children kid kids baby grandmother grandma grandfather grandpa grandparents grandson
    granddaughter aunt uncle cousin niece nephew friend friends roommate flatmate neighbour
    neighbor boss manager colleague coworker co-worker teammate mentor landlord doctor therapist
    dog cat pet""".split()  # noqa: SIM905
)
POSSESSIVE_PRONOUNS = frozenset(["my", "his", "her", "their", "our", "your"])
OPENING = re.compile(r"[\w'-]+")


@dataclass(frozen=True)
class Arranged:
    hits: list[Hit]
    # For metrics.cues: how many hits the subject had, and which one time put first.
    explained: dict[str, str]


def fetch(limit: int) -> int:
    return max(limit, FETCH)


def date_of(hit: Hit) -> datetime:
    return occurred(hit.memory)


def place_of(hit: Hit) -> tuple[datetime, int]:
    """Where a memory stands in time: its date, then the order it was written. Memories stored
    together without a ``valid_from`` share a date (a batch: one transaction's time) and follow
    each other in the order they were given, as the session index reads them (migration 0009)."""
    return (date_of(hit), hit.memory.seq or 0)


def _unit(v: list[float]) -> list[float]:
    n = math.hypot(*v) or 1.0
    return [x / n for x in v]


def _cosine(v: list[float], unit: list[float]) -> float:
    """The cosine of ``v`` and a unit vector, in C where it can be (``map``, ``hypot``): with a
    generator over the 384 pairs of each of 20 hits, finding the subject took 0.9 ms of a time-cue
    search's Python, now 0.3 ms (loadtests/bench_timeline_subject.py, docs/benchmarks.md)."""
    return sum(map(operator.mul, v, unit)) / (math.hypot(*v) or 1.0)


def names_in(query: str, content: str) -> set[str]:
    """The names a question gives that the best hit says too (lower-cased): "Carmen", "Fischer".
    A question that capitalises no word of its own (typed, or written as keywords, in lower case:
    "where does kenji live now") names the words the best hit capitalises ("Kenji")."""
    said = set(tokens(content))
    asked = [w for w in NAME.findall(query) if w.lower() not in NOT_NAMES and w.lower() in said]
    if not any(w[0].isupper() for w in asked):
        capitalised = {w.lower() for w in NAME.findall(content) if w[0].isupper()}
        return {w.lower() for w in asked if w.lower() in capitalised}
    return {w.lower() for w in asked if w[0].isupper()}


def _whose(content: str) -> str | None:
    """The relative a memory opens on ("User's new boss is Dana": boss; "My sister ...": sister),
    None when it opens on its subject ("User's favourite city is Lisbon", "Kenji moved to Oslo")."""
    # A typographic apostrophe (U+2019) read as a plain one.
    words = OPENING.findall(content[:80].lower().replace("\u2019", "'"))
    if words and words[0] in POSSESSIVE_PRONOUNS:
        at = 0
    else:
        # A name of up to two words, after "the": "the user's", "Kenji Tanaka's".
        at = next((i for i, w in enumerate(words[:3]) if w.endswith("'s")), -1)
        if at < 0:
            return None
    # One word may come between: "User's older sister".
    return next((w for w in words[at + 1 : at + 3] if w in RELATIVES), None)


def _near(query: str, hits: list[Hit], event: tuple[str, ...]) -> list[int]:
    """Positions in ``hits`` (not empty) of the best hit and those that say every name the question
    and the best hit share and open on the same person as it (``_whose``)."""
    names = {n for n in names_in(query, hits[0].memory.content) if stem(n) not in event}
    whose = _whose(hits[0].memory.content)
    return [0] + [
        i
        for i, h in enumerate(hits[1:], start=1)
        if names <= set(tokens(h.memory.content)) and _whose(h.memory.content) == whose
    ]


def subject(
    query: str,
    hits: list[Hit],
    vectors: dict[object, list[float]],
    event: tuple[str, ...] = (),
) -> list[int]:
    """Positions in ``hits`` (best first) of the best hit and the other versions of its fact. The
    names of an event ("before joining Globex") are not the subject's: the versions before it do
    not say them."""
    if not hits:
        return []
    near = _near(query, hits, event)
    known = [i for i in near if hits[i].memory.id in vectors]
    if not known:
        return [0]
    head = [vectors[hits[i].memory.id] for i in known[:PROTOTYPE]]
    # The mean's direction: the sum's, added up a vector at a time (in C, not per dimension).
    total = head[0]
    for v in head[1:]:
        total = list(map(operator.add, total, v))
    proto = _unit(total)
    best = _unit(vectors[hits[0].memory.id]) if hits[0].memory.id in vectors else None

    def version(v: list[float]) -> bool:
        return _cosine(v, proto) >= SIMILAR and (best is None or _cosine(v, best) >= BESIDE_BEST)

    return [i for i in near if i == 0 or (hits[i].memory.id in vectors and version(vectors[hits[i].memory.id]))]


def _untimed(hits: list[Hit], time_part: Callable[[Hit], float]) -> list[Hit]:
    """The hits as the question alone ranks them (stable: at equal scores the fusion's order)."""
    return sorted(hits, key=lambda h: h.score - time_part(h), reverse=True)


def window_needs_vectors(query: str, hits: list[Hit], cues: QueryCues, time_part: Callable[[Hit], float]) -> bool:
    """Whether a window's reading turns on which hits are the subject's versions, judged on their
    vectors (read only then): not for one day named as a date, nor when fewer than two hits name
    the subject or none of them is dated before the window (the fusion's order stands)."""
    if cues.window is None or cues.day or not hits:
        return False
    untimed = _untimed(hits, time_part)
    near = _near(query, untimed, ())
    return len(near) > 1 and any(date_of(untimed[i]) < cues.window[0] for i in near)


def _window(
    query: str,
    hits: list[Hit],
    cues: QueryCues,
    vectors: dict[object, list[float]],
    limit: int,
    time_part: Callable[[Hit], float],
) -> Arranged:
    """A plain window ("in 2019", "as of 1 May 2023"). The fusion ranked what is dated in it first,
    about anyone, as an event question asks ("what did Melanie show Caroline on 13 October"). The
    subject is found as the question alone ranks the hits (the window's part of each score taken
    off): if one of its versions is dated in the window, the fusion's order stands, and so it does
    for one day named as a date (``QueryCues.day``: "on 1 February 2023" asks what happened then).
    Otherwise the question asks for the state then ("where did Ana live in 2019", her move was in
    2017; "as of 4 March 2021"): the subject's version in force when the window began, the latest
    dated before it, comes first and every other hit keeps its order."""
    assert cues.window is not None
    start, end = cues.window
    if cues.day or not vectors:
        # The fusion's order stands whatever the subject (window_needs_vectors): nothing to explain.
        return Arranged(hits=hits[:limit], explained={})
    untimed = _untimed(hits, time_part)
    members = [untimed[i] for i in subject(query, untimed, vectors)]
    explained = {"subject": str(len(members))}
    earlier = [h for h in members if date_of(h) < start]
    if len(members) < 2 or not earlier or any(start <= date_of(h) < end for h in members):
        return Arranged(hits=hits[:limit], explained=explained)
    in_force = max(earlier, key=place_of)
    _rank, value = in_force.channels.get("time", (None, 0.0))
    in_force.channels["time"] = (1, value)
    explained["time_first"] = date_of(in_force).date().isoformat()
    return Arranged(hits=[in_force, *(h for h in hits if h is not in_force)][:limit], explained=explained)


def _order(cues: QueryCues, members: list[Hit]) -> tuple[list[Hit], int] | None:
    """``members`` (best first) in the order the cue asks for, and how many of the first it picks
    (the one before an event); None if it says nothing of them."""
    by_date = sorted(members, key=place_of)
    if cues.order == "newest":
        return by_date[::-1], len(members)
    if cues.order == "oldest":
        return by_date, len(members)
    chosen: list[Hit] = []
    if cues.relative is not None:
        at = _event_time(cues.event, by_date)
        if at is not None and cues.relative == "before":
            chosen = [h for h in by_date if place_of(h) < at][-1:]
        elif at is not None:
            # The event's own version is not after it.
            chosen = [h for h in by_date if place_of(h) > at][:1]
    if not chosen:
        return None
    return chosen + [h for h in members if h not in chosen], len(chosen)


def _event_time(event: tuple[str, ...], by_date: list[Hit]) -> tuple[datetime, int] | None:
    """When the event happened: the place in time (``place_of``) of the first version that says the
    event's rarest word among the versions (one that all or none of them say tells nothing)."""
    said = [words_of(h.memory.content) for h in by_date]
    best: tuple[int, int, str] | None = None
    for pos, word in enumerate(event):
        n = sum(word in ws for ws in said)
        if 0 < n < len(said):
            # Rarest first; at a tie the later word: an event's object follows its verb.
            key = (n, -pos, word)
            best = key if best is None or key < best else best
    if best is None:
        return None
    word = best[2]
    return next(place_of(h) for h, ws in zip(by_date, said, strict=True) if word in ws)


def arrange(
    query: str,
    hits: list[Hit],
    cues: QueryCues,
    vectors: dict[object, list[float]],
    limit: int,
    time_part: Callable[[Hit], float] | None = None,
) -> Arranged:
    """``hits`` (fused without time, best first; a plain window's with it) with the subject's
    versions re-ordered as the time cue asks, cut to ``limit``; each hit's ``time`` channel says its
    place among the versions. ``time_part``: what the time channel added to a hit's score (a plain
    window's fusion), taken off to find the subject as the question alone ranks it."""
    scores = [h.score for h in hits]
    if cues.fused_window:
        arranged = _window(query, hits, cues, vectors, limit, time_part or (lambda h: 0.0))
    else:
        arranged = _within_subject(query, hits, cues, vectors, limit)
    # Each place keeps its score: a version the cue moves up takes the score of the place it takes.
    # Clients sort and merge results by score (several namespaces' searches, an agent reading the
    # scores beside the memories), and a list whose second hit outscored its first undid the cue.
    for h, score in zip(arranged.hits, scores, strict=False):
        h.score = score
    return arranged


def _within_subject(
    query: str, hits: list[Hit], cues: QueryCues, vectors: dict[object, list[float]], limit: int
) -> Arranged:
    """An order or an event: the subject's versions re-ordered among the places they hold."""
    places = subject(query, hits, vectors, cues.event)
    members = [hits[i] for i in places]
    arranged = _order(cues, members) if len(members) > 1 else None
    explained = {"subject": str(len(members))}
    out = list(hits)
    ordered, picked = arranged or (members, 0)
    if arranged is not None:
        for i, h in zip(places, ordered, strict=True):
            out[i] = h
        explained["time_first"] = date_of(ordered[0]).date().isoformat()
    # The time channel of the subject's versions: a rank for those the cue picks (all of them, in
    # order, for newest or oldest), the date as value. Other hits are not the subject's: time says
    # nothing of them.
    for n, h in enumerate(ordered, start=1):
        h.channels["time"] = (n if n <= picked else None, date_of(h).timestamp())
    in_subject = {id(h) for h in ordered}
    for h in out:
        if id(h) not in in_subject:
            h.channels["time"] = (None, None)
    return Arranged(hits=out[:limit], explained=explained)
