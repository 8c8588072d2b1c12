"""The local rule-based extractor: no network, no model, deterministic.

Each user or participant message is split into atomic statements (sentences, then clauses
joined by "and"/"but" that start a new first-person statement); questions, greetings and
statements that say nothing about anyone are dropped; each remaining statement is classified
(instruction, decision, preference, task, event, fact) by cue phrases, its dates are resolved
against the message time, and capitalised names are picked up as entities. Assistant, tool and
system messages are not mined: what the assistant says about the user is not evidence of it.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from memvault.extraction.base import Candidate, EventText
from memvault.extraction.dates import Tense, annotate, resolve_dates

MINED_ROLES = ("user", "participant")
MAX_ENTITIES = 6

_SENTENCES = re.compile(r"(?<=[.!?])\s+(?=[\"'(\[]?[A-Z0-9])|\n+|(?<=[.!?])$")
# "I love sushi and I hate olives": two statements. Only split where a new subject starts.
_CLAUSES = re.compile(r"[;,]?\s+(?:and|but|so|while)\s+(?=(?:I|I'm|I've|I'll|we|we're|my|our)\b)|;\s+")
_LEAD_IN = re.compile(
    r"^(?:(?:oh|ah|well|yeah|yes|yep|no|nope|hey|hi|hello|haha|lol|wow|so|also|btw|by the way|actually|"
    r"honestly|anyway|ok|okay|sure|great|cool|awesome|nice|thanks|thank you)\b[\s,!.:-]*)+",
    re.I,
)
_PLEASANTRY = re.compile(
    r"^(?:hi|hello|hey|thanks|thank you|ok|okay|sure|great|cool|bye|goodbye|good (?:morning|night|evening)|"
    r"see you|talk soon|sounds good|no problem|you're welcome|me too|same here)\b",
    re.I,
)
# "I'm Priya": two words, kept for the name (capitalised, not "I'm OK", "I'm fine").
_INTRODUCTION = re.compile(r"^(?i:i'm|im|i am|my name is|my name's)\s+(?!OK\b)[A-Z][\w'-]*(?:\s+[A-Z][\w'-]*)*[.!]?$")
_SELF = re.compile(r"\b(?:i|i'm|i've|i'd|i'll|me|my|mine|we|we're|we've|our|us)\b", re.I)

_INSTRUCTION = re.compile(
    r"^(?:please\s+)?(?:always|never|don't|do not|make sure|remember to|call me|address me|use|respond|reply|"
    r"answer|write|keep|avoid|stop|only)\b|\b(?:from now on|going forward|in the future,)\b|"
    r"^(?:you should|you must|i want you to|i'd like you to|i would like you to)\b",
    re.I,
)
_DECISION = re.compile(
    r"\b(?:i|we)\s+(?:have\s+|'ve\s+|just\s+|finally\s+)?(?:decided|chose|chosen|picked|opted|agreed|settled on|"
    r"committed to|made up (?:my|our) minds?)\b|\b(?:i'm|i am|we're|we are)\s+going with\b|\blet's go with\b|"
    r"\bdecision is\b|\b(?:i|we)(?:'ve| have)? signed up\b",
    re.I,
)
_PREFERENCE = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|absolutely\s+|just\s+|also\s+|totally\s+|kind of\s+|still\s+)?(?:like|love|prefer|"
    r"enjoy|adore|hate|dislike|detest|loathe|can't stand|cannot stand|am into|am a fan of|am not a fan of)\b|"
    r"\b(?:i'm|we're)\s+(?:really\s+)?(?:into|a (?:big |huge )?fan of|not a fan of|obsessed with)\b|"
    r"\b(?:my|our) favou?rite\b|\bi'?d rather\b|\b(?:i|we) (?:would|'d) prefer\b|"
    r"\bi(?:'m| am) (?:a )?(?:vegetarian|vegan|pescatarian)\b",
    re.I,
)
_TASK_STRONG = re.compile(
    r"\b(?:i|we)\s+(?:really\s+|still\s+)?(?:need|have|must|got)\s+to\b|\b(?:i|we)(?:'ve| have)? got to\b|"
    r"\bremind me\b|\bto-?do\b|\bdon't (?:let me )?forget\b|\bdeadline\b|\bis due\b|\b(?:i|we) must\b|"
    r"\b(?:i|we) should\b",
    re.I,
)
_TASK_WEAK = re.compile(
    r"\b(?:i|we)\s*(?:will|'ll|am going to|'m going to|are going to|'re going to|plan to|intend to|want to)\b",
    re.I,
)
_FUTURE = re.compile(r"\b(?:will|'ll|going to|plan to|next|tomorrow|upcoming|coming|need to|have to)\b", re.I)
_PAST_EVENT = re.compile(
    r"\b(?:went|visited|met|moved|started|finished|attended|traveled|travelled|flew|graduated|celebrated|joined|"
    r"left|bought|adopted|lost|won|ran|painted|got married|got engaged|was born|had a|took|gave|received|"
    r"signed|launched|quit|retired|returned|arrived|hosted|organized|organised|volunteered|completed)\b",
    re.I,
)

_WAS = re.compile(r"\b(?:was|were|did|married|used to)\b", re.I)


def tense(statement: str) -> Tense:
    """Whether ``statement`` looks ahead (a plan, a promise) or tells what happened, for a date it
    names without its year; a plan's words win where it says both."""
    if _FUTURE.search(statement):
        return "future"
    if _PAST_EVENT.search(statement) or _WAS.search(statement):
        return "past"
    return None


IMPORTANCE = {"instruction": 0.8, "decision": 0.7, "preference": 0.7, "task": 0.6, "event": 0.5, "fact": 0.5}

# Capitalised words that are not names when they stand alone (sentence starts, days, months).
_NOT_NAMES_TEXT = """
    i i'm i've i'd i'll me my we our you your he she they it its this that these those there here the a an
    and but or so if when then what who where why how yes no not oh ok okay well yeah hey hi hello thanks
    today tomorrow yesterday tonight last next this morning afternoon evening week month year weekend
    monday tuesday wednesday thursday friday saturday sunday january february march april may june july
    august september october november december also just really actually maybe please remember always never
    don't do does did can could would should will shall might must let let's lol haha wow sure great cool
    nice love like hate prefer went going got had have has had been was were am is are after before since
    during while because though although still some any every each all both many much more most few other
    another such one two three four five six seven eight nine ten first second third new old good bad
    from in on at to for with by of about as into over under near than via per
"""
_NOT_NAMES = set(_NOT_NAMES_TEXT.split())
_NAME = re.compile(r"\b[A-Z][\w'\u2019-]*(?:\s+(?:of\s+|the\s+|de\s+|van\s+|von\s+)?[A-Z][\w'\u2019-]*)*")
_ORG_SUFFIX = re.compile(
    r"\b(?:Inc|Corp|Corporation|LLC|Ltd|GmbH|University|College|School|Company|Bank|Group|Labs|Foundation|"
    r"Institute|Hospital|Agency|Studio|Studios|Club|Association|Society)\b\.?$"
)
_RELATIVE = (
    r"(?:friend|sister|brother|mom|mum|mother|dad|father|wife|husband|son|daughter|boss|colleague|partner|cousin|"
    r"aunt|uncle|grandma|grandmother|grandpa|grandfather|girlfriend|boyfriend|coworker|co-worker|manager|"
    r"neighbor|neighbour|roommate|mentor|teacher|doctor|therapist|niece|nephew|kid|baby)"
)


def _entity_type(name: str, before: str, after: str) -> str:
    if _ORG_SUFFIX.search(name) or re.search(r"\b(?:work(?:s|ed|ing)?\s+(?:at|for)|joined|hired by)\s*$", before):
        return "organization"
    if re.search(rf"\b(?:my|our|his|her|their)\s+(?:\w+\s+)?{_RELATIVE}s?\s*,?\s*$", before, re.I) or re.match(
        r"^(?:'s\b|\s+(?:said|says|told|asked|is my|was my|and I|and me))", after
    ):
        return "person"
    if re.search(r"\b(?:called|named|met|meet|texted|asked|told)\s*$", before):
        return "person"
    if re.search(r"\b(?:in|to|from|near|visit|visited|visiting|around|across|moved to|live in|lives in)\s*$", before):
        return "location"
    return "other"


def find_entities(statement: str, speaker: str | None = None) -> list[tuple[str, str]]:
    """Named things in a statement, with a guessed type; the speaker, if named, is a person."""
    found: dict[str, tuple[str, str]] = {}
    if speaker:
        found[speaker.lower()] = (speaker, "person")
    for m in _NAME.finditer(statement):
        name = m[0].strip(" '\u2019-")
        words = name.split()
        # Drop leading words that are not names ("Yesterday Caroline" -> "Caroline").
        while words and words[0].lower().strip("'\u2019") in _NOT_NAMES:
            words.pop(0)
        if not words:
            continue
        name = " ".join(words)
        if len(name) < 2 or name.lower() in _NOT_NAMES:
            continue
        start = m.start() + m[0].index(words[0])
        kind = _entity_type(name, statement[:start], statement[start + len(name) :])
        found.setdefault(name.lower(), (name, kind))
        if len(found) >= MAX_ENTITIES:
            break
    return list(found.values())


def statements(text: str) -> list[str]:
    """Atomic statements of a message: sentences, split again where a new clause has its own subject."""
    out: list[str] = []
    for sentence in _SENTENCES.split(text.strip()):
        sentence = sentence.strip()
        if not sentence:
            continue
        for clause in _CLAUSES.split(sentence):
            clause = _LEAD_IN.sub("", clause.strip()).strip(" ,;:-")
            if clause:
                out.append(clause[0].upper() + clause[1:])
    return out


def classify(statement: str, *, has_date: bool) -> str | None:
    """The memory type of a statement, or None when it is not worth remembering."""
    s = statement.strip()
    words = s.split()
    if _INTRODUCTION.match(s):
        return "fact"
    if s.endswith("?") or len(words) < 3 or (_PLEASANTRY.match(s) and len(words) < 6):
        return None
    if _INSTRUCTION.search(s):
        return "instruction"
    if _DECISION.search(s):
        return "decision"
    if _PREFERENCE.search(s):
        return "preference"
    if _TASK_STRONG.search(s):
        return "task"
    if has_date or _PAST_EVENT.search(s):
        return "event"
    if _TASK_WEAK.search(s):
        return "task"
    return "fact"


class RuleExtractor:
    name = "rules"

    async def extract(self, events: Sequence[EventText]) -> list[Candidate]:
        out: list[Candidate] = []
        for event in events:
            if event.role not in MINED_ROLES:
                continue
            for statement in statements(event.content):
                dates = resolve_dates(statement, event.occurred_at, tense=tense(statement))
                kind = classify(statement, has_date=bool(dates))
                if kind is None:
                    continue
                entities = find_entities(statement, event.speaker)
                named = [e for e in entities if e[0] != event.speaker]
                # A fact must be about someone: the speaker ("I", "my"), or something it names.
                if kind == "fact" and not (_SELF.search(statement) or named or re.search(r"\d", statement)):
                    continue
                text = annotate(statement.rstrip(" ."), dates)
                if event.speaker:
                    text = f"{event.speaker}: {text}"
                out.append(
                    Candidate(
                        content=text,
                        type=kind,
                        event_ids=[event.id],
                        user_id=event.user_id,
                        session_id=event.session_id,
                        speaker=event.speaker,
                        valid_from=dates[0].start_time() if dates else None,
                        dates=[d.as_dict() for d in dates],
                        entities=entities,
                        importance=IMPORTANCE[kind],
                        confidence=0.6,
                    )
                )
        return out
