"""Rendering a page: autoescaped Jinja2 templates packaged with memvault, and the headers every
page sends. The pages need no script (charts are SVG drawn on the server; our one small script
only adds copy buttons) and load nothing from another origin, so the Content-Security-Policy
allows only our own files: no inline script, no CDN."""

from __future__ import annotations

from datetime import date, datetime
from importlib import resources
from typing import Any

from jinja2 import Environment, PackageLoader, select_autoescape
from starlette.responses import HTMLResponse

CSP = (
    "default-src 'none'; style-src 'self'; img-src 'self' data:; form-action 'self'; "
    "frame-ancestors 'none'; base-uri 'none'"
)
# Dashboard pages load our one script (copy buttons) from our own origin; nothing inline.
CSP_WITH_SCRIPT = CSP.replace("default-src 'none';", "default-src 'none'; script-src 'self';")
PAGE_HEADERS = {
    "Content-Security-Policy": CSP,
    "X-Content-Type-Options": "nosniff",
    # frame-ancestors says the same to current browsers; this, to older ones.
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}
# The files under web/static that /static serves, with their media types.
STATIC = {
    "memvault.css": "text/css; charset=utf-8",
    "dashboard.css": "text/css; charset=utf-8",
    "dashboard.js": "text/javascript; charset=utf-8",
}


def _ms(value: float | None) -> str:
    if value is None:
        return "no calls"
    return f"{value:.0f} ms" if value < 1000 else f"{value / 1000:.1f} s"


def _when(value: datetime | date) -> str:
    if isinstance(value, datetime):
        return value.strftime("%-d %b %Y %H:%M UTC")
    return value.strftime("%-d %b %Y")


_env = Environment(
    loader=PackageLoader("memvault.web", "templates"),
    autoescape=select_autoescape(["html"]),
    trim_blocks=True,
    lstrip_blocks=True,
)
_env.filters["ms"] = _ms
_env.filters["when"] = _when


def page(template: str, context: dict[str, Any], *, status_code: int = 200, script: bool = False) -> HTMLResponse:
    headers = {**PAGE_HEADERS, "Content-Security-Policy": CSP_WITH_SCRIPT} if script else PAGE_HEADERS
    return HTMLResponse(_env.get_template(template).render(**context), status_code=status_code, headers=headers)


def static_file(name: str) -> tuple[bytes, str] | None:
    """A stylesheet (or later a script) of ours, with its media type; None for any other name."""
    media_type = STATIC.get(name)
    if media_type is None:
        return None
    return resources.files("memvault.web").joinpath("static", name).read_bytes(), media_type
