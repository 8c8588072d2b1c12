"""The facade is one class of many bases (docs/conventions.md): a method two capabilities both
define would silently resolve to the first base's, so no two may share a name."""

from __future__ import annotations

from collections import defaultdict

from memvault.api import NamespaceAPI
from memvault.facade import FacadeBase


def test_no_two_capabilities_define_the_same_name() -> None:
    owners: dict[str, list[str]] = defaultdict(list)
    for base in NamespaceAPI.__mro__:
        if base in (NamespaceAPI, FacadeBase, object) or not issubclass(base, FacadeBase):
            continue
        for name in vars(base):
            if not (name.startswith("__") and name.endswith("__")):
                owners[name].append(base.__name__)
    clashes = {name: where for name, where in owners.items() if len(where) > 1}
    assert clashes == {}, f"defined by more than one capability: {clashes}"


def test_every_capability_is_a_base_of_the_facade() -> None:
    ops = [b.__name__ for b in NamespaceAPI.__mro__ if b.__name__.endswith("Ops")]
    assert {"MemoryOps", "SearchOps", "NamespaceOps", "KeyOps", "AuditOps", "OperatorOps"} <= set(ops)
