"""A dashboard page: the shared layout (navigation by what the member's role may open, the
sign-out form, the form token) around one template of web/templates/dashboard/."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from fastapi import Request
from starlette.responses import HTMLResponse

from memvault.web.render import page
from memvault.websessions.service import SignedIn


@dataclass(frozen=True)
class NavItem:
    name: str
    path: str
    label: str
    # The scope a member needs to open the page; the facade refuses the rest anyway (403).
    scope: str = "read"


NAV: tuple[NavItem, ...] = (
    NavItem("overview", "/dashboard", "Overview"),
    NavItem("namespaces", "/dashboard/namespaces", "Namespaces"),
    NavItem("explorer", "/dashboard/explorer", "Explorer"),
    NavItem("keys", "/dashboard/keys", "API keys", "admin"),
    NavItem("members", "/dashboard/members", "Members", "admin"),
    NavItem("apps", "/dashboard/apps", "Connected apps", "admin"),
    NavItem("webhooks", "/dashboard/webhooks", "Webhooks", "admin"),
    NavItem("jobs", "/dashboard/jobs", "Jobs"),
    NavItem("audit", "/dashboard/audit", "Audit log", "admin"),
    NavItem("usage", "/dashboard/usage", "Usage"),
)


def dash(
    request: Request,
    me: SignedIn,
    template: str,
    *,
    active: str,
    title: str,
    notice: str | None = None,
    status_code: int = 200,
    **context: Any,
) -> HTMLResponse:
    """Render ``dashboard/<template>`` for ``me``. ``notice``: a line of feedback shown on top
    (what the last form did); pass text of ours, never text taken from the request."""
    p = me.principal
    return page(
        f"dashboard/{template}",
        {
            "me": me,
            "csrf": me.csrf,
            "nav": [item for item in NAV if p.has(item.scope)],
            "active": active,
            "title": title,
            "notice": notice,
            "is_admin": p.has("admin"),
            "can_write": p.has("write"),
            "request_path": request.url.path,
            **context,
        },
        status_code=status_code,
        script=True,
    )
