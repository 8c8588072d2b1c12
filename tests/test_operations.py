"""Every call a door makes on the facade passes through the gates (operations.py): limits and
metering cannot be forgotten on a new method."""

from __future__ import annotations

import inspect
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import pytest

from memvault.api import NamespaceAPI
from memvault.errors import Forbidden
from memvault.namespaces.schemas import NamespaceIn
from memvault.operations import Operation, operation_of
from memvault.principal import Principal
from tests.conftest import make_tenant

# Methods that take a principal but are not a door's call: authentication itself, the idempotency
# bookkeeping around a call that is itself an operation, and a job runner's own entry.
NOT_OPERATIONS = {
    "authenticate",
    "authenticate_access_token",
    "run_job",
    "claim_idempotency_key",
    "complete_idempotency_key",
    "release_idempotency_key",
}


def _takes_principal(fn: object) -> bool:
    params = list(inspect.signature(fn).parameters.values())  # type: ignore[arg-type]
    return len(params) > 1 and params[1].name == "p"


def test_every_public_method_taking_a_principal_is_an_operation() -> None:
    missing = [
        name
        for name, fn in inspect.getmembers(NamespaceAPI, predicate=inspect.isfunction)
        if not name.startswith("_")
        and inspect.iscoroutinefunction(fn)
        and _takes_principal(fn)
        and name not in NOT_OPERATIONS
        and operation_of(fn) is None
    ]
    assert missing == [], f"mark these with @operation(kind): {missing}"


def test_searches_are_their_own_kind() -> None:
    assert operation_of(NamespaceAPI.search) == Operation("search", "search")
    assert operation_of(NamespaceAPI.get_context).kind == "search"  # type: ignore[union-attr]
    assert operation_of(NamespaceAPI.store).kind == "write"  # type: ignore[union-attr]
    assert operation_of(NamespaceAPI.list_memories).kind == "read"  # type: ignore[union-attr]


class Recorder:
    def __init__(self, refuse: str | None = None) -> None:
        self.seen: list[tuple[str, str]] = []
        self.left: list[str] = []
        self.refuse = refuse

    @asynccontextmanager
    async def admit(self, p: Principal, op: Operation) -> AsyncIterator[None]:
        if op.name == self.refuse:
            raise Forbidden("refused by the test gate")
        self.seen.append((op.name, op.kind))
        try:
            yield
        finally:
            self.left.append(op.name)


async def test_a_gate_sees_each_door_call_once_and_can_refuse_it(api: NamespaceAPI) -> None:
    t = await make_tenant(api, "ops")
    gate = Recorder(refuse="create_namespace")
    api._gates.append(gate)
    try:
        await api.tenant_summary(t.principal)  # lists namespaces inside: one operation, not two
        assert gate.seen == [("tenant_summary", "read")] and gate.left == ["tenant_summary"]
        with pytest.raises(Forbidden):
            await api.create_namespace(t.principal, NamespaceIn(name="refused"))
        assert [n.name for n in await api.list_namespaces(t.principal)] == [t.namespace]
    finally:
        api._gates.remove(gate)
