"""The namespaces pages: every namespace the member reaches with its memory figure and last write
(/dashboard/namespaces), creating one, and one namespace's search and maintenance settings
(/dashboard/namespaces/{name}). Admins change; everyone else reads."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from pydantic import ValidationError
from starlette.responses import Response

from memvault.dashboard.render import dash
from memvault.dashboard.session import Form, Me, MemberForm, see_other
from memvault.errors import InvalidInput
from memvault.gateway.deps import Api
from memvault.maintenance.schemas import DEFAULT_STEPS, Step
from memvault.namespaces.schemas import NamespaceIn, NamespaceOut, NamespacePatch
from memvault.namespaces.service import EXACT_COUNT_CAP
from memvault.retrieval.schemas import AFTER_FUSION, CHANNELS, DEFAULT_FUSION, DEFAULT_WEIGHTS

router = APIRouter(include_in_schema=False)

PAGE_SIZE = 50
# What the last form did, by the code its redirect carries: our words, never the request's.
DONE = {
    "created": "Namespace created.",
    "saved": "Settings saved.",
}


def _problem(exc: ValidationError) -> str:
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first.get("loc", ()) if part != "body")
    return f"{where}: {first['msg']}" if where else str(first["msg"])


@router.get("/dashboard/namespaces")
async def namespaces(request: Request, api: Api, me: Me) -> Response:
    after = request.query_params.get("after") or None
    found = await api.namespace_summaries(me.principal, after=after, limit=PAGE_SIZE)
    return dash(
        request,
        me,
        "namespaces.html",
        active="namespaces",
        title="Namespaces",
        notice=DONE.get(request.query_params.get("done", "")),
        page=found,
        after=after,
        cap=EXACT_COUNT_CAP,
    )


@router.post("/dashboard/namespaces")
async def create_namespace(request: Request, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        body = NamespaceIn(name=form.get("name").strip(), description=form.get("description").strip() or None)
    except ValidationError as exc:
        raise InvalidInput(f"The namespace name is not valid ({_problem(exc)}).", extra={"field": "name"}) from exc
    created = await api.create_namespace(me.principal, body)
    return see_other(f"/dashboard/namespaces/{created.name}", done="created")


def _settings_view(ns: NamespaceOut) -> dict[str, Any]:
    search = ns.settings.search
    schedule = ns.settings.maintenance
    return {
        "weights": (search.weights if search and search.weights else {}),
        "fusion": search.fusion if search and search.fusion else "",
        "maintenance": schedule,
        "steps": [s.value for s in (schedule.jobs if schedule else DEFAULT_STEPS)],
    }


def _settings_page(
    request: Request, me: Any, ns: NamespaceOut, *, notice: str | None = None, error: str | None = None
) -> Response:
    return dash(
        request,
        me,
        "namespace.html",
        active="namespaces",
        title=f"Namespace {ns.name}",
        notice=notice,
        ns=ns,
        error=error,
        channels=CHANNELS + AFTER_FUSION,
        default_weights=DEFAULT_WEIGHTS,
        default_fusion=DEFAULT_FUSION,
        all_steps=[s.value for s in Step],
        **_settings_view(ns),
        status_code=422 if error else 200,
    )


@router.get("/dashboard/namespaces/{name}")
async def namespace(request: Request, name: str, api: Api, me: Me) -> Response:
    ns = await api.get_namespace(me.principal, name, count=False)
    return _settings_page(request, me, ns, notice=DONE.get(request.query_params.get("done", "")))


def _patch(form: Form) -> NamespacePatch:
    """The settings form as a patch: every part given, so a blank one clears it."""
    weights: dict[str, float] = {}
    for channel in CHANNELS + AFTER_FUSION:
        raw = form.get(f"weight_{channel}").strip()
        if raw:
            try:
                weights[channel] = float(raw)
            except ValueError as exc:
                raise InvalidInput(f"The weight of {channel} must be a number.", extra={"field": channel}) from exc
    fusion = form.get("fusion") or None
    search = {"weights": weights or None, "fusion": fusion} if weights or fusion else None
    maintenance: dict[str, Any] | None = None
    if form.get("maintenance") == "on":
        chosen = set(form.all("steps"))
        # Steps run in the service's own order (DEFAULT_STEPS), whatever order the boxes came in.
        maintenance = {
            "jobs": [s.value for s in DEFAULT_STEPS if s.value in chosen],
            "every_minutes": form.get("every_minutes").strip() or 1440,
            "budget_ms": form.get("budget_ms").strip() or 60_000,
        }
    return NamespacePatch.model_validate(
        {
            "description": form.get("description").strip() or None,
            "settings": {"search": search, "maintenance": maintenance},
        }
    )


@router.post("/dashboard/namespaces/{name}")
async def save_namespace(request: Request, name: str, api: Api, me: Me, form: MemberForm) -> Response:
    try:
        patch = _patch(form)
    except (ValidationError, InvalidInput) as exc:
        message = _problem(exc) if isinstance(exc, ValidationError) else exc.detail
        ns = await api.get_namespace(me.principal, name, count=False)
        return _settings_page(request, me, ns, error=f"Not saved: {message}")
    await api.update_namespace(me.principal, name, patch)
    return see_other(f"/dashboard/namespaces/{name}", done="saved")
