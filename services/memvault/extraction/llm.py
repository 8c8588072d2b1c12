"""The LLM extractor: any OpenAI-compatible chat-completions endpoint, asked for JSON that
follows a schema (`response_format: json_schema`). Whatever goes wrong with a call (no answer in
time, an HTTP error, text that is not the JSON asked for) falls back to the rule-based extractor
for that chunk, so extraction never stops on the provider."""

from __future__ import annotations

import json
import logging
from collections import Counter
from collections.abc import Sequence
from datetime import UTC, date, datetime, time
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from memvault.config import Settings
from memvault.entities.schemas import EntityType
from memvault.extraction.base import EXTRACTED_TYPES, Candidate, EventText, Extractor

log = logging.getLogger(__name__)

IMPORTANCE_DEFAULT = 0.5

SYSTEM_PROMPT = """You extract long-term memories from a conversation for an AI assistant's memory.
Return only facts worth remembering across sessions about the people in it: preferences, decisions,
instructions to the assistant, tasks, events with their dates, and facts. One atomic statement per
memory, written so it stands alone (name the speaker instead of "I" when a speaker is given).
Resolve relative dates ("yesterday", "next month") against the time the message was said and give
the absolute date as valid_from (YYYY-MM-DD); include the absolute date in the statement too.
Cite the messages each memory comes from by their index. Skip greetings, questions, small talk,
and anything the assistant said. Never copy passwords, API keys or other secrets."""

OUTPUT_SCHEMA: dict[str, Any] = {
    "type": "object",
    "additionalProperties": False,
    "required": ["memories"],
    "properties": {
        "memories": {
            "type": "array",
            "items": {
                "type": "object",
                "additionalProperties": False,
                "required": ["content", "type", "source", "valid_from", "entities", "importance", "key"],
                "properties": {
                    "content": {"type": "string"},
                    "type": {"type": "string", "enum": list(EXTRACTED_TYPES)},
                    "source": {"type": "array", "items": {"type": "integer"}},
                    "valid_from": {"type": ["string", "null"], "description": "YYYY-MM-DD"},
                    "entities": {
                        "type": "array",
                        "items": {
                            "type": "object",
                            "additionalProperties": False,
                            "required": ["name", "type"],
                            "properties": {
                                "name": {"type": "string"},
                                "type": {"type": "string", "enum": [t.value for t in EntityType]},
                            },
                        },
                    },
                    "importance": {"type": "number", "minimum": 0, "maximum": 1},
                    "key": {
                        "type": ["string", "null"],
                        "description": "snake_case name of what this is about when a later statement could "
                        "replace it (e.g. home_city), else null",
                    },
                },
            },
        }
    },
}


class _Entity(BaseModel):
    name: str = Field(min_length=1, max_length=200)
    type: EntityType = EntityType.other


class _Memory(BaseModel):
    model_config = ConfigDict(extra="ignore")

    content: str = Field(min_length=1, max_length=32_000)
    type: Literal["preference", "decision", "instruction", "task", "fact", "event"]
    source: list[int] = Field(min_length=1)
    valid_from: date | None = None
    entities: list[_Entity] = Field(default_factory=list, max_length=20)
    importance: float = Field(default=IMPORTANCE_DEFAULT, ge=0, le=1)
    key: str | None = Field(default=None, max_length=200)


class _Output(BaseModel):
    memories: list[_Memory]


class ProviderAnswerInvalid(Exception):
    """The provider answered, but not with the JSON the schema asks for."""


class ProviderClient:
    """The OpenAI-compatible provider's HTTP client, made on first use (MEMVAULT_LLM_*): what the
    extractor and the session observer (observations/llm.py) share."""

    def __init__(self, settings: Settings) -> None:
        self._settings = settings
        self._client: httpx.AsyncClient | None = None
        self.stats: Counter[str] = Counter()

    def _http(self) -> httpx.AsyncClient:
        if self._client is None:
            key = self._settings.llm_api_key
            headers = {"Authorization": f"Bearer {key.get_secret_value()}"} if key else {}
            self._client = httpx.AsyncClient(
                base_url=self._settings.llm_base_url.rstrip("/") + "/",
                headers=headers,
                timeout=self._settings.llm_timeout_s,
            )
        return self._client

    async def aclose(self) -> None:
        if self._client is not None:
            await self._client.aclose()


class LLMExtractor(ProviderClient):
    name = "llm"

    def __init__(self, settings: Settings, *, fallback: Extractor) -> None:
        super().__init__(settings)
        self._fallback = fallback

    def _request(self, events: Sequence[EventText]) -> dict[str, Any]:
        lines = [
            {
                "index": i,
                "role": e.role,
                "speaker": e.speaker,
                "said_at": e.occurred_at.astimezone(UTC).isoformat(),
                "text": e.content,
            }
            for i, e in enumerate(events)
        ]
        return {
            "model": self._settings.llm_model,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": json.dumps({"messages": lines}, ensure_ascii=False)},
            ],
            "response_format": {
                "type": "json_schema",
                "json_schema": {"name": "memories", "strict": True, "schema": OUTPUT_SCHEMA},
            },
        }

    async def _ask(self, events: Sequence[EventText]) -> _Output:
        r = await self._http().post("chat/completions", json=self._request(events))
        r.raise_for_status()
        try:
            content = r.json()["choices"][0]["message"]["content"]
            return _Output.model_validate_json(content)
        except (KeyError, IndexError, TypeError, ValueError, ValidationError) as exc:
            raise ProviderAnswerInvalid(str(exc)[:500]) from exc

    async def extract(self, events: Sequence[EventText]) -> list[Candidate]:
        mined = [e for e in events if e.role in ("user", "participant")]
        if not mined:
            return []
        self.stats["llm_calls"] += 1
        try:
            answer = await self._ask(events)
        except (httpx.HTTPError, ProviderAnswerInvalid) as exc:
            log.warning("LLM extraction failed (%s: %s); using the rule-based extractor", type(exc).__name__, exc)
            self.stats["llm_fallbacks"] += 1
            return await self._fallback.extract(events)
        return [c for m in answer.memories if (c := self._candidate(m, events)) is not None]

    def _candidate(self, m: _Memory, events: Sequence[EventText]) -> Candidate | None:
        # Only what users and participants said counts as evidence, whatever the model cites.
        sources = [events[i] for i in dict.fromkeys(m.source) if 0 <= i < len(events)]
        sources = [e for e in sources if e.role in ("user", "participant")]
        if not sources:
            self.stats["llm_uncited"] += 1
            return None
        first = sources[0]
        valid_from = datetime.combine(m.valid_from, time(0), tzinfo=UTC) if m.valid_from else None
        return Candidate(
            content=m.content.strip(),
            type=m.type,
            event_ids=[e.id for e in sources],
            user_id=first.user_id,
            session_id=first.session_id,
            speaker=first.speaker,
            valid_from=valid_from,
            dates=[{"text": None, "date": m.valid_from.isoformat(), "granularity": "day"}] if m.valid_from else [],
            entities=[(e.name.strip(), e.type.value) for e in m.entities if e.name.strip()],
            importance=m.importance,
            confidence=0.8,
            key=m.key.strip() if m.key and m.key.strip() else None,
        )
