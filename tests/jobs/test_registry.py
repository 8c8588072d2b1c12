"""The job registry: every kind a job can be created with has exactly one handler on the facade,
and a mistake is caught when the code is imported, not when a job of that kind runs."""

from __future__ import annotations

import inspect
from typing import Any

import pytest

from memvault.api import NamespaceAPI
from memvault.jobs.registry import JobKind, JobRegistryError, handles, job_handlers
from memvault.maintenance.schemas import Step


class TestTheFacade:
    def test_every_kind_has_a_handler_that_takes_principal_job_and_run(self) -> None:
        table = job_handlers(NamespaceAPI)
        assert set(table) == set(JobKind)
        for name in table.values():
            method = getattr(NamespaceAPI, name)
            assert inspect.iscoroutinefunction(method), name
            assert list(inspect.signature(method).parameters) == ["self", "p", "job", "run"], name

    def test_each_maintenance_step_is_a_job_kind(self) -> None:
        # organize's steps run as jobs of their own too (tests/maintenance/test_organize.py).
        assert {s.value for s in Step} <= set(JobKind)


class TestMistakes:
    def test_an_unknown_kind_fails_when_declared(self) -> None:
        with pytest.raises(ValueError):
            handles("extracton")  # type: ignore[arg-type]

    def test_a_kind_without_a_handler_fails(self) -> None:
        class Partial:
            @handles(JobKind.extraction)
            async def extract(self, p: Any, job: Any, run: Any) -> dict[str, Any]:
                return {}

        with pytest.raises(JobRegistryError, match=r"no handler for jobs of kind .*organize"):
            job_handlers(Partial)

    def test_two_handlers_of_one_kind_fail(self) -> None:
        class Twice(NamespaceAPI):
            @handles(JobKind.dedup)
            async def another_dedup(self, p: Any, job: Any, run: Any) -> dict[str, Any]:
                return {}

        with pytest.raises(JobRegistryError, match="'dedup' have two handlers"):
            job_handlers(Twice)
