"""A posted form's fields into the facade's request models. A form is read by hand (checkboxes
repeat, blanks mean "none"), then validated by the same model REST validates; its refusal is an
InvalidInput the page shows beside the form, never a 500."""

from __future__ import annotations

import re
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from memvault.errors import InvalidInput

Model = TypeVar("Model", bound=BaseModel)


def validated(model: type[Model], **fields: Any) -> Model:
    """``model`` made from ``fields``, or InvalidInput naming the first field at fault."""
    try:
        return model.model_validate(fields)
    except ValidationError as exc:
        first = exc.errors()[0]
        field = ".".join(str(part) for part in first.get("loc", ()))
        message = str(first.get("msg", "invalid")).removeprefix("Value error, ")
        raise InvalidInput(f"{field}: {message}" if field else message, extra={"field": field}) from exc


def names(values: list[str]) -> list[str] | None:
    """Namespace names typed one per field, or several in one separated by commas or spaces;
    None when none were given (every namespace)."""
    found = [n for value in values for n in re.split(r"[\s,]+", value) if n]
    return list(dict.fromkeys(found)) or None


def whole_number(value: str, field: str) -> int | None:
    """A number field: None when left blank."""
    value = value.strip()
    if not value:
        return None
    try:
        return int(value)
    except ValueError as exc:
        raise InvalidInput(f"{field}: enter a whole number", extra={"field": field}) from exc
