from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Model(BaseModel):
    """A response object. Unknown fields are kept (``model_extra``), so a newer server never breaks
    an older SDK."""

    model_config = ConfigDict(extra="allow", populate_by_name=True)


class Params(BaseModel):
    """A request body. Unknown fields are refused here, before a request is sent."""

    model_config = ConfigDict(extra="forbid")
