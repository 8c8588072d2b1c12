"""What the load says: LoCoMo's conversation turns and questions when the dataset is there (read in
place from MEMVAULT_LOADTEST_DATA or ../shared/datasets, never copied into the repo: its licence is
CC BY-NC 4.0), else generated sentences, so the load test runs on any machine.

Every search query is new: a question plus words from the corpus, never sent before by this process,
so the server's query-embedding cache cannot answer it (an agent rarely asks the same thing twice).
"""

from __future__ import annotations

import json
import os
import random
import re
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

LOCOMO = Path("shared") / "datasets" / "locomo" / "locomo10.json"


def default_data() -> Path | None:
    """The nearest ``shared/datasets`` above the repository (a worktree may sit deeper than main)."""
    for folder in Path(__file__).resolve().parents[2].parents:
        if (folder / LOCOMO).is_file():
            return folder / LOCOMO
    return None


_NAMES = ["Ana", "Ben", "Chloe", "Dev", "Elif", "Farid", "Grace", "Hiro", "Ines", "Jonas", "Kemi", "Luca"]
_PLACES = ["Lisbon", "Osaka", "Nairobi", "Lima", "Oslo", "Hanoi", "Quebec", "Tbilisi", "Perth", "Cork"]
_THINGS = ["sushi", "hiking", "jazz", "pottery", "chess", "tennis", "gardening", "sci-fi novels", "yoga", "baking"]
_TEMPLATES = [
    "I really love {thing} and I go every weekend.",
    "{name} moved to {place} last spring for a new job.",
    "I prefer window seats when I fly to {place}.",
    "We decided to hold the team offsite in {place}.",
    "{name} is allergic to peanuts, so no {thing} snacks.",
    "I need to renew my passport before the trip to {place}.",
    "My sister {name} started a {thing} club in {place}.",
    "Please always answer me in short bullet points.",
    "I have been learning {thing} with {name} since March.",
    "{name} and I visited {place} and tried {thing} for the first time.",
]
_QUESTIONS = [
    "What does {name} like to do on weekends?",
    "Where did {name} move to?",
    "Which city is the offsite in?",
    "What is {name} allergic to?",
    "When did I start learning {thing}?",
    "Who runs the {thing} club?",
]
_WORD = re.compile(r"[A-Za-z][a-z]{3,}")


@dataclass(frozen=True)
class Turn:
    speaker: str
    text: str
    session: str
    conversation: str


@dataclass
class Corpus:
    turns: list[Turn]
    questions: list[str]
    source: str
    words: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        if not self.words:
            seen = {w.lower() for t in self.turns for w in _WORD.findall(t.text)}
            self.words = sorted(seen)


def _generated(n: int = 2000, seed: int = 7) -> Corpus:
    rng = random.Random(seed)

    def fill(template: str) -> str:
        return template.format(name=rng.choice(_NAMES), place=rng.choice(_PLACES), thing=rng.choice(_THINGS))

    turns = [
        Turn(
            speaker=rng.choice(_NAMES),
            text=fill(rng.choice(_TEMPLATES)),
            session=f"session_{i // 20 + 1}",
            conversation=f"gen-{i // 200}",
        )
        for i in range(n)
    ]
    return Corpus(turns=turns, questions=[fill(rng.choice(_QUESTIONS)) for _ in range(300)], source="generated")


@cache
def corpus() -> Corpus:
    """LoCoMo if it is readable, else generated sentences (``source`` says which)."""
    named = os.environ.get("MEMVAULT_LOADTEST_DATA")
    path = Path(named) if named else default_data()
    if path is None:
        return _generated()
    try:
        data = json.loads(path.read_text())
    except (OSError, ValueError):
        return _generated()
    turns: list[Turn] = []
    questions: list[str] = []
    for conv in data:
        c = conv["conversation"]
        n = 1
        while f"session_{n}" in c:
            turns += [Turn(t["speaker"], t["text"], f"session_{n}", conv["sample_id"]) for t in c[f"session_{n}"]]
            n += 1
        questions += [q["question"] for q in conv.get("qa", []) if q.get("question")]
    if not turns or not questions:
        return _generated()
    return Corpus(turns=turns, questions=questions, source=str(path))


class Queries:
    """New queries: a corpus question with two corpus words added, each text sent at most once."""

    def __init__(self, rng: random.Random | None = None) -> None:
        self.rng = rng or random.Random()
        self.sent: set[str] = set()

    def new(self) -> str:
        c = corpus()
        while True:
            q = f"{self.rng.choice(c.questions)} {self.rng.choice(c.words)} {self.rng.choice(c.words)}"
            if q not in self.sent:
                self.sent.add(q)
                return q

    def sentence(self) -> Turn:
        return self.rng.choice(corpus().turns)
