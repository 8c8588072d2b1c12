"""The vectors the timeline reads with the fused hits (retrieval/sql/timeline.py): read in
pgvector's binary form, they must be the stored float4s, which the text form gives as the
shortest decimal that reads back as each."""

from __future__ import annotations

import struct
import uuid

import httpx
from sqlalchemy import select

from memvault.api import NamespaceAPI
from memvault.memories.models import Memory
from memvault.retrieval.sql.timeline import floats, hit_vector
from tests.conftest import Tenant
from tests.memories.test_router import store_many


def float4s(values: list[float]) -> list[float]:
    """Each value as the float4 it reads back as."""
    return list(struct.unpack(f"{len(values)}f", struct.pack(f"{len(values)}f", *values)))


async def test_the_hits_vectors_are_the_stored_ones(
    client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    mine = await store_many(client, tenant_a, ["Kenji moved to Osaka in 2019.", "Kenji now lives in Lisbon."])
    theirs = await store_many(client, tenant_b, ["Kenji now lives in Lisbon."])
    ids = [uuid.UUID(m["id"]) for m in mine + theirs]
    async with api._db.tenant_tx(tenant_a.id) as tx:  # type: ignore[attr-defined]
        text_form = await tx.session.execute(select(Memory.id, Memory.embedding).where(Memory.id.in_(ids)))
        as_text = {memory_id: float4s(vector) for memory_id, vector in text_form}
        binary = await tx.session.execute(select(Memory.id, hit_vector()).where(Memory.id.in_(ids)))
        read = {memory_id: floats(raw) for memory_id, raw in binary}

    # Each of the tenant's own, 384 float4s equal to the last bit; the other tenant's is not read.
    assert set(read) == set(as_text) == {uuid.UUID(m["id"]) for m in mine}
    for memory_id, vector in read.items():
        assert len(vector) == 384 and vector == as_text[memory_id]
