"""What the timeline (retrieval/timeline.py) reads beside the fused hits: their vectors."""

from __future__ import annotations

import struct
from typing import Any

from sqlalchemy import LargeBinary, func

from memvault.memories.models import Memory


def hit_vector() -> Any:
    """A hit's vector, read with it in the fused statement when the timeline acts (``Shape.vectors``):
    whether two hits say the same thing. A lookup of its own cost a round trip, and pgvector's
    text form 2.7 ms of Python to parse for 20 hits at 384 dimensions: together four fifths of
    what the timeline added to a search (docs/benchmarks.md). In pgvector's binary form."""
    return func.vector_send(Memory.embedding, type_=LargeBinary)


def floats(raw: bytes) -> list[float]:
    """A vector from pgvector's binary form (``vector_send``): its dimensions and a reserved
    field (two big-endian int16), then each element, a big-endian float4. The same values as its
    text form: both are the stored float4s exactly."""
    dimensions = int.from_bytes(raw[:2], "big")
    return list(struct.unpack(f">{dimensions}f", raw[4 : 4 + 4 * dimensions]))
