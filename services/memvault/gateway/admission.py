"""Admission control: each server process takes at most ``limit`` requests at once and answers the
rest at once with ``503 overloaded`` and ``Retry-After``.

A request past what the process can serve would otherwise wait in its event loop behind all the
others and time out seconds later; refused at once, the client (or a balancer, which `/readyz`
turns away while the process is saturated) can try elsewhere or later. The probes and the metrics
scrape are always admitted: they are how an operator sees the overload."""

from __future__ import annotations

from starlette.types import ASGIApp, Receive, Scope, Send

from memvault.errors import Overloaded
from memvault.gateway.middleware import send_problem
from memvault.observability import metrics
from memvault.observability.access import door

# Never refused, never counted: probes and the scrape must answer while the process is saturated.
EXEMPT = frozenset({"/healthz", "/readyz", "/metrics"})


class Admission:
    """The count of requests this process is serving, shared by the middleware and `/readyz`."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.in_flight = 0

    @property
    def saturated(self) -> bool:
        return self.in_flight >= self.limit


class AdmissionMiddleware:
    def __init__(self, app: ASGIApp, admission: Admission) -> None:
        self.app = app
        self.admission = admission

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http" or scope["path"] in EXEMPT:
            await self.app(scope, receive, send)
            return
        admission = self.admission
        if admission.saturated:
            metrics.OVERLOADED.labels(door(scope["path"])).inc()
            detail = f"This server process is at its limit of {admission.limit} requests at once; retry shortly."
            await send_problem(scope, send, Overloaded(detail))
            return
        admission.in_flight += 1
        metrics.IN_FLIGHT.inc()
        try:
            await self.app(scope, receive, send)
        finally:
            admission.in_flight -= 1
            metrics.IN_FLIGHT.dec()
