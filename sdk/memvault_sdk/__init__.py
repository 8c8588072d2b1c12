"""memvault's Python SDK: ``MemVault`` (blocking) and ``AsyncMemVault`` (asyncio) over the REST API."""

from memvault_sdk import types
from memvault_sdk._client import AsyncMemVault, MemVault
from memvault_sdk._errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    MemVaultConnectionError,
    MemVaultError,
    MemVaultTimeoutError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    SecretDetectedError,
    ServerError,
    ValidationError,
    _deprecated_alias,
)
from memvault_sdk._request import NOT_GIVEN, NotGiven
from memvault_sdk._version import __version__
from memvault_sdk.pagination import AsyncPage, AsyncPaginator, SyncPage

__all__ = [
    "NOT_GIVEN",
    "APIStatusError",
    "AsyncMemVault",
    "AsyncPage",
    "AsyncPaginator",
    "AuthenticationError",
    "BadRequestError",
    "ConflictError",
    "MemVault",
    "MemVaultConnectionError",
    "MemVaultError",
    "MemVaultTimeoutError",
    "NotFoundError",
    "NotGiven",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "SecretDetectedError",
    "ServerError",
    "SyncPage",
    "ValidationError",
    "__version__",
    "types",
]


def __getattr__(name: str) -> type[MemVaultError]:
    # ConnectionError and TimeoutError, the pre-0.2 names, still resolve, with a DeprecationWarning.
    return _deprecated_alias(__name__, name)
