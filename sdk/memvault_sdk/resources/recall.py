from __future__ import annotations

from datetime import datetime
from typing import Any

from memvault_sdk._request import APIRequest, body, returns
from memvault_sdk.resources._resource import APIResource, AsyncAPIResource, SyncAPIResource, endpoint
from memvault_sdk.types.context import Context, ContextParams
from memvault_sdk.types.memories import MemoryFilters
from memvault_sdk.types.search import Fusion, Kind, SearchParams, SearchResponse


class _Recall(APIResource):
    @endpoint
    def search(
        self,
        query: str,
        *,
        limit: int | None = None,
        filters: MemoryFilters | dict[str, Any] | None = None,
        min_score: float | None = None,
        knowledge_at: datetime | None = None,
        valid_at: datetime | None = None,
        weights: dict[str, float] | None = None,
        fusion: Fusion | None = None,
        reference_time: datetime | None = None,
        neighbours: int | None = None,
        rerank: bool | None = None,
        rewrite: bool | None = None,
        kinds: list[Kind] | None = None,
        hops: bool | None = None,
        namespace: str | None = None,
    ) -> APIRequest[SearchResponse]:
        """Find memories by meaning and by words. Each result has its fused ``score``, its
        ``semantic_relevance`` (cosine; what ``min_score`` filters on) and which channels found it.
        ``weights`` and ``fusion`` override the namespace's; ``neighbours`` adds the memories around
        each hit in its session; ``rerank`` / ``rewrite`` switch the server's second stage. ``kinds``
        adds conversation messages, traces or entities matching the query, each in its own list.
        ``hops`` adds memories linked to a specific entity of the best hits (multi-hop questions)."""
        payload = body(
            SearchParams,
            query=query,
            limit=limit,
            filters=filters,
            min_score=min_score,
            knowledge_at=knowledge_at,
            valid_at=valid_at,
            weights=weights,
            fusion=fusion,
            reference_time=reference_time,
            neighbours=neighbours,
            rerank=rerank,
            rewrite=rewrite,
            kinds=kinds,
            hops=hops,
        )
        path = f"{self._ns(namespace)}/search"
        return APIRequest("POST", path, returns(SearchResponse), body=payload, retry="read")

    @endpoint
    def context(
        self,
        query: str | None = None,
        *,
        session_id: str | None = None,
        user_id: str | None = None,
        token_budget: int | None = None,
        limit: int | None = None,
        filters: MemoryFilters | dict[str, Any] | None = None,
        kinds: list[Kind] | None = None,
        namespace: str | None = None,
    ) -> APIRequest[Context]:
        """A prompt-ready markdown block of what is remembered for a query and/or a session or user,
        packed by rank into ``token_budget`` tokens; with a ``session_id`` it opens with the
        session's observation."""
        payload = body(
            ContextParams,
            query=query,
            session_id=session_id,
            user_id=user_id,
            token_budget=token_budget,
            limit=limit,
            filters=filters,
            kinds=kinds,
        )
        path = f"{self._ns(namespace)}/context"
        return APIRequest("POST", path, returns(Context), body=payload, retry="read")


class Recall(_Recall, SyncAPIResource):
    pass


class AsyncRecall(_Recall, AsyncAPIResource):
    pass
