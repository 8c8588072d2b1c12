from __future__ import annotations

from fastapi import APIRouter
from fastapi.responses import Response

from memvault.errors import NotFound
from memvault.web.render import static_file

router = APIRouter(include_in_schema=False)


@router.get("/static/{name}")
async def static(name: str) -> Response:
    """Our own stylesheet, served by the app: the pages load nothing from elsewhere."""
    found = static_file(name)
    if found is None:
        raise NotFound(f"No file named '{name}'.")
    body, media_type = found
    return Response(
        body,
        media_type=media_type,
        headers={"Cache-Control": "public, max-age=3600", "X-Content-Type-Options": "nosniff"},
    )
