from __future__ import annotations

from fastapi import APIRouter

router = APIRouter(prefix="/v1/namespaces/{ns}", tags=["entities"])
