"""HyDE query rewrite for the second stage of search: an OpenAI-compatible chat model writes the
memory that would answer the query, and the dense channel searches with it as well as the query.

A question and its answer are worded differently ("where does Ana like to sit?" / "Ana prefers
window seats"); a hypothetical answer lands nearer the stored one in embedding space even when it
invents the details (Gao et al., "Precise Zero-Shot Dense Retrieval without Relevance Labels",
2022). Whatever goes wrong raises ``RewriteUnavailable``; search then embeds the query alone."""

from __future__ import annotations

import logging
from typing import Protocol

import httpx
from pydantic import BaseModel

from memvault.config import Settings
from memvault.retrieval.provider import json_client, post_for

log = logging.getLogger(__name__)

SYSTEM_PROMPT = """You help search an AI assistant's long-term memory of its users.
Given a search query, write the memory that would answer it: one to three short factual sentences,
in the third person, phrased like a note the assistant stored ("The user prefers ...", "Ana moved
to Lisbon in 2023."). Invent plausible specifics if you do not know them. Answer with the memory
text only: no preamble, no quotes, no list."""

# A passage longer than this is not the short note asked for; the embedder would truncate it anyway.
MAX_PASSAGE_CHARS = 2000


class RewriteUnavailable(Exception):
    """The rewrite gave no usable passage: no answer in time, an HTTP error, or an answer that is
    not a chat completion with text."""


class QueryRewriter(Protocol):
    model_id: str

    async def rewrite(self, query: str) -> str:
        """A hypothetical passage answering ``query``, to embed alongside it."""
        ...

    async def aclose(self) -> None: ...


class _Message(BaseModel):
    content: str | None = None


class _Choice(BaseModel):
    message: _Message


class _Completion(BaseModel):
    choices: list[_Choice]


class HyDERewriter:
    """Any OpenAI-compatible ``POST {base_url}/chat/completions``."""

    def __init__(
        self,
        model: str,
        *,
        base_url: str,
        api_key: str | None,
        timeout_s: float = 5.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self.model_id = model
        self._client = json_client(base_url, api_key, timeout_s, transport)

    def _request(self, query: str) -> dict[str, object]:
        # No max_tokens: newer OpenAI models refuse it in favour of max_completion_tokens, which
        # other servers do not all know. The prompt asks for a short note and the timeout bounds it.
        return {
            "model": self.model_id,
            "temperature": 0,
            "messages": [
                {"role": "system", "content": SYSTEM_PROMPT},
                {"role": "user", "content": query},
            ],
        }

    async def rewrite(self, query: str) -> str:
        answer = await post_for(
            self._client,
            "chat/completions",
            self._request(query),
            _Completion,
            fail=RewriteUnavailable,
            who="rewrite provider",
        )
        passage = (answer.choices[0].message.content or "").strip() if answer.choices else ""
        if not passage:
            raise RewriteUnavailable("rewrite provider answered no text")
        return passage[:MAX_PASSAGE_CHARS]

    async def aclose(self) -> None:
        await self._client.aclose()


def build_rewriter(settings: Settings) -> QueryRewriter | None:
    """The configured query rewriter, or None when ``rewrite_provider`` is ``none``."""
    if settings.rewrite_provider == "hyde":
        key = settings.rewrite_api_key.get_secret_value() if settings.rewrite_api_key else None
        return HyDERewriter(
            settings.rewrite_model,
            base_url=settings.rewrite_base_url,
            api_key=key,
            timeout_s=settings.rewrite_timeout_s,
        )
    return None
