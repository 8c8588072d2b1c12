"""The LLM observer: the extraction's OpenAI-compatible endpoint, asked for the session's
observation as JSON that follows a schema. The previous observation goes with the messages, so a
model refines it as the session grows. Any failure (no answer in time, an HTTP error, text that is
not the JSON asked for) falls back to the rule-based observer for that session."""

from __future__ import annotations

import json
import logging
from collections.abc import Sequence
from datetime import UTC
from typing import Any

import httpx
from pydantic import BaseModel, ValidationError

from memvault.config import Settings
from memvault.extraction.base import EventText
from memvault.extraction.llm import ProviderClient
from memvault.observations.base import Notes, Observer

log = logging.getLogger(__name__)

# The newest messages sent to the model: the previous observation carries what came before.
MAX_MESSAGES = 200

SYSTEM_PROMPT = """You keep notes on one conversation for an AI assistant's memory.
Given the conversation's messages (and your previous notes, if any), write: a summary of what the
session was about in at most three sentences; its topics (names and subjects, at most five);
the decisions made in it; and the open questions it left (asked and not answered, or explicitly
undecided). Each decision and question is one self-contained sentence. Never copy passwords, API
keys or other secrets."""

SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["summary", "topics", "decisions", "open_questions"],
    "properties": {
        "summary": {"type": "string"},
        "topics": {"type": "array", "items": {"type": "string"}},
        "decisions": {"type": "array", "items": {"type": "string"}},
        "open_questions": {"type": "array", "items": {"type": "string"}},
    },
}


class _Answer(BaseModel):
    summary: str
    topics: list[str]
    decisions: list[str]
    open_questions: list[str]


class LLMObserver(ProviderClient):
    name = "llm"

    def __init__(self, settings: Settings, *, fallback: Observer) -> None:
        super().__init__(settings)
        self._fallback = fallback

    def _request(self, events: Sequence[EventText], previous: Notes | None) -> dict[str, Any]:
        lines = [
            {
                "role": e.role,
                "speaker": e.speaker,
                "said_at": e.occurred_at.astimezone(UTC).isoformat(),
                "text": e.content,
            }
            for e in events[-MAX_MESSAGES:]
        ]
        said: dict[str, Any] = {"messages": lines}
        if previous is not None:
            said["previous_notes"] = previous.__dict__
        return {
            "model": self._settings.llm_model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": json.dumps(said, ensure_ascii=False)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "observation", "strict": True, "schema": SCHEMA},
            },
        }

    async def observe(self, events: Sequence[EventText], previous: Notes | None) -> Notes:
        self.stats["llm_observation_calls"] += 1
        try:
            r = await self._http().post("chat/completions", json=self._request(events, previous))
            r.raise_for_status()
            answer = _Answer.model_validate_json(r.json()["choices"][0]["message"]["content"])
        except (httpx.HTTPError, KeyError, IndexError, TypeError, ValueError, ValidationError) as exc:
            log.warning("LLM observation failed (%s: %s); using the rule-based observer", type(exc).__name__, exc)
            self.stats["llm_observation_fallbacks"] += 1
            return await self._fallback.observe(events, previous)
        return Notes(
            summary=answer.summary,
            topics=answer.topics,
            decisions=answer.decisions,
            open_questions=answer.open_questions,
        ).bounded()
