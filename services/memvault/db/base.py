"""Declarative base shared by every capability's models."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import MetaData, func
from sqlalchemy.orm import DeclarativeBase

NAMING = {
    "ix": "ix_%(table_name)s_%(column_0_N_name)s",
    "uq": "uq_%(table_name)s_%(column_0_N_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_N_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


class Base(DeclarativeBase):
    metadata = MetaData(naming_convention=NAMING)


def first_time(column: Any) -> Any:
    """``column`` if it is set, else now, for an UPDATE that must keep the first time (revoking
    twice keeps when it was first revoked). Now is the app's clock, as a value, not SQL's
    ``now()``: Citus refuses a function that is not immutable inside COALESCE in an UPDATE of its
    tables, and the sign-in tables on the coordinator are Citus tables too (their foreign keys to
    the reference table ``tenants`` make them Citus local tables), docs/scaling.md."""
    return func.coalesce(column, app_now())


def app_now() -> datetime:
    """Now, by the app's clock, to write as a value where Citus refuses SQL's ``now()`` (inside
    COALESCE or CASE in an UPDATE, see ``first_time``)."""
    return datetime.now(UTC)
