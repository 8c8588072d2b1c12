"""FastAPI dependencies: the facade, and the Principal behind the bearer key with its scope checked."""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Annotated, Any, TypeVar

from fastapi import Depends, Request

from memvault.api import NamespaceAPI
from memvault.errors import Unauthenticated
from memvault.gateway.credentials import authenticated
from memvault.principal import Principal


def get_api(request: Request) -> NamespaceAPI:
    api: NamespaceAPI = request.app.state.api
    return api


class MissingCredentials(Unauthenticated):
    code = "missing_credentials"
    title = "Missing credentials"


def bearer_token(request: Request) -> str:
    header = request.headers.get("authorization", "")
    scheme, _, token = header.partition(" ")
    if scheme.lower() != "bearer" or not token.strip():
        raise MissingCredentials("Send 'Authorization: Bearer <API key>'.")
    return token.strip()


async def current_principal(request: Request, api: Annotated[NamespaceAPI, Depends(get_api)]) -> Principal:
    principal = await authenticated(api, request.scope, api.authenticate, bearer_token(request))
    request.state.principal = principal
    return principal


# The OpenAPI's name for the bearer scheme; gateway/openapi.py declares it on every route that
# depends on current_principal, with the scope its `_requiring` dependency names.
BEARER_SCHEME = "apiKey"
# Set on an endpoint that reads a key only when one is sent (its OpenAPI security is optional).
OPTIONAL_AUTH = "memvault_optional_auth"


Endpoint = TypeVar("Endpoint", bound=Callable[..., Any])


def optional_auth(endpoint: Endpoint) -> Endpoint:
    setattr(endpoint, OPTIONAL_AUTH, True)
    return endpoint


def _requiring(scope: str) -> Callable[[Principal], Awaitable[Principal]]:
    async def dep(p: Annotated[Principal, Depends(current_principal)]) -> Principal:
        p.require(scope)
        return p

    dep.required_scope = scope  # type: ignore[attr-defined]
    return dep


Api = Annotated[NamespaceAPI, Depends(get_api)]
ReadPrincipal = Annotated[Principal, Depends(_requiring("read"))]
WritePrincipal = Annotated[Principal, Depends(_requiring("write"))]
AdminPrincipal = Annotated[Principal, Depends(_requiring("admin"))]
