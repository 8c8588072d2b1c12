"""The cross-tenant suite (tests/tenancy) unchanged, on the Citus cluster: its tests and fixtures
imported as they are, with the app, client and tenants they ask for being the cluster's."""

from __future__ import annotations

import httpx
import pytest

from memvault.api import NamespaceAPI
from tests.conftest import Tenant
from tests.tenancy.test_isolation import *  # noqa: F403 (the suite itself)


@pytest.fixture
def api(citus_api: NamespaceAPI) -> NamespaceAPI:
    return citus_api


@pytest.fixture
def client(citus_client: httpx.AsyncClient) -> httpx.AsyncClient:
    return citus_client


@pytest.fixture
def tenant_a(citus_a: Tenant) -> Tenant:
    return citus_a


@pytest.fixture
def tenant_b(citus_b: Tenant) -> Tenant:
    return citus_b
