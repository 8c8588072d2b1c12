"""Which facade method runs each kind of job, in one table checked when the facade is built.

Every kind a job can be created with is a ``JobKind``; a capability marks its handler with
``@handles(JobKind.x)``. ``job_handlers(cls)`` collects the marks of a facade class and refuses a
kind with no handler or with two: api.py calls it when it is imported, so a typo or a forgotten
handler stops the server and the workers at start, not a job at run time.
"""

from __future__ import annotations

from collections.abc import Callable
from enum import StrEnum
from typing import Any, TypeVar

F = TypeVar("F", bound=Callable[..., Any])

_MARK = "__memvault_job_kind__"


class JobKind(StrEnum):
    extraction = "extraction"
    organize = "organize"
    # organize's steps, each also a job of its own (maintenance.schemas.Step).
    dedup = "dedup"
    decay = "decay"
    promote = "promote"
    reembed = "reembed"


class JobRegistryError(TypeError):
    """The facade's job handlers do not match the job kinds: a programming error, raised at start."""


def handles(kind: JobKind) -> Callable[[F], F]:
    """Mark a facade method ``async (self, p, job, run) -> dict`` as the handler of ``kind``'s jobs."""
    checked = JobKind(kind)  # a kind that is not a JobKind fails here, when its module is imported

    def mark(fn: F) -> F:
        setattr(fn, _MARK, checked)
        return fn

    return mark


_tables: dict[type, dict[str, str]] = {}


def job_handlers(cls: type) -> dict[str, str]:
    """The name of ``cls``'s handler method for each job kind. Raises JobRegistryError when a kind
    has no handler or more than one."""
    if cls in _tables:
        return _tables[cls]
    found: dict[str, str] = {}
    for name in dir(cls):
        kind = getattr(getattr(cls, name, None), _MARK, None)
        if kind is None:
            continue
        if kind in found:
            raise JobRegistryError(f"{cls.__name__}: jobs of kind '{kind}' have two handlers, {found[kind]} and {name}")
        found[kind] = name
    missing = sorted(set(JobKind) - found.keys())
    if missing:
        raise JobRegistryError(f"{cls.__name__}: no handler for jobs of kind {', '.join(missing)}")
    _tables[cls] = found
    return found
