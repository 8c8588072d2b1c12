"""What the second stage's HTTP providers share: a JSON client with a bearer key, and one call
whose every failure (network, status, malformed answer) becomes the stage's own error."""

from __future__ import annotations

from typing import TypeVar

import httpx
from pydantic import BaseModel, ValidationError

Answer = TypeVar("Answer", bound=BaseModel)


def json_client(
    base_url: str, api_key: str | None, timeout_s: float, transport: httpx.AsyncBaseTransport | None
) -> httpx.AsyncClient:
    headers = {"Authorization": f"Bearer {api_key}"} if api_key else {}
    # A trailing slash, so that relative paths extend the base (".../v1/" + "rerank").
    return httpx.AsyncClient(
        base_url=base_url.rstrip("/") + "/", headers=headers, timeout=timeout_s, transport=transport
    )


async def post_for(
    client: httpx.AsyncClient,
    path: str,
    payload: dict[str, object],
    answer: type[Answer],
    *,
    fail: type[Exception],
    who: str,
) -> Answer:
    """POST ``payload`` and parse the reply as ``answer``; any failure raises ``fail``."""
    try:
        r = await client.post(path, json=payload)
        r.raise_for_status()
        return answer.model_validate_json(r.content)
    except httpx.HTTPError as exc:
        raise fail(f"{who} failed: {type(exc).__name__}: {exc}"[:500]) from exc
    except ValidationError as exc:
        raise fail(f"{who} answered malformed JSON: {exc}"[:500]) from exc
