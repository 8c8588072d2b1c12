"""memvault's Python SDK: ``MemVault`` (blocking) and ``AsyncMemVault`` (asyncio) over the REST API."""

from memvault_sdk import types
from memvault_sdk._base import NOT_GIVEN, NotGiven
from memvault_sdk._client import AsyncMemVault, MemVault
from memvault_sdk._errors import (
    APIStatusError,
    AuthenticationError,
    BadRequestError,
    ConflictError,
    ConnectionError,
    MemVaultError,
    NotFoundError,
    PayloadTooLargeError,
    PermissionDeniedError,
    RateLimitError,
    SecretDetectedError,
    ServerError,
    TimeoutError,
    ValidationError,
)
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
    "ConnectionError",
    "MemVault",
    "MemVaultError",
    "NotFoundError",
    "NotGiven",
    "PayloadTooLargeError",
    "PermissionDeniedError",
    "RateLimitError",
    "SecretDetectedError",
    "ServerError",
    "SyncPage",
    "TimeoutError",
    "ValidationError",
    "__version__",
    "types",
]
