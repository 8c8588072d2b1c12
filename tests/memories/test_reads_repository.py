"""read_conditions is cached: each tenant, namespace and set of filters must get its own."""

from __future__ import annotations

import uuid
from typing import Any

from sqlalchemy import select
from sqlalchemy.dialects import postgresql

from memvault.memories.models import Memory
from memvault.memories.reads_repository import read_conditions
from memvault.memories.schemas import MemoryFilters
from memvault.principal import SYSTEM_TENANT_ID

A, B = uuid.uuid4(), uuid.uuid4()
NS_1, NS_2 = uuid.uuid4(), uuid.uuid4()


def values_in(conditions: list[Any]) -> set[object]:
    """The values bound into the conditions (an IN list's one by one)."""
    compiled = select(Memory.id).where(*conditions).compile(dialect=postgresql.dialect())
    values: set[object] = set()
    for v in compiled.params.values():
        values.update(v if isinstance(v, list) else [v])
    return values


class TestReadConditions:
    def test_each_tenant_and_namespace_gets_its_own(self) -> None:
        read_conditions(A, NS_1, None)

        assert values_in(read_conditions(B, NS_1, None)) >= {B, NS_1}
        assert A not in values_in(read_conditions(B, NS_1, None))
        assert NS_1 not in values_in(read_conditions(A, NS_2, None))
        assert values_in(read_conditions(A, NS_1, None)) >= {A, NS_1, SYSTEM_TENANT_ID}

    def test_filters_are_part_of_the_key(self) -> None:
        plain = values_in(read_conditions(A, NS_1, None))
        for_user = values_in(read_conditions(A, NS_1, MemoryFilters(user_id="u-7")))

        assert "u-7" in for_user
        assert "u-7" not in plain
        assert "u-8" in values_in(read_conditions(A, NS_1, MemoryFilters(user_id="u-8")))

    def test_callers_get_a_list_of_their_own(self) -> None:
        first = read_conditions(A, NS_1, None)
        first.append(Memory.type == "fact")

        assert len(read_conditions(A, NS_1, None)) == len(first) - 1
