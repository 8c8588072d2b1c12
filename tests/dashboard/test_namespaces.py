"""The namespaces pages: the list with memory figures and last writes, creating a namespace, and
one namespace's search and maintenance settings, as owners, viewers and other tenants see them."""

from __future__ import annotations

from memvault.api import NamespaceAPI
from memvault.memories.schemas import MemoryIn
from memvault.namespaces import repository as ns_repo
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member


async def test_the_list_shows_each_namespace_with_its_memories_and_last_write(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    await api.store_many(tenant_a.principal, tenant_a.namespace, [MemoryIn(content=f"note {i}") for i in range(3)])
    await api.store(tenant_b.principal, tenant_b.namespace, MemoryIn(content="tenant b's own"))
    r = await signed_in.get("/dashboard/namespaces")
    assert r.status_code == 200 and 'id="namespace-list"' in r.text
    row = r.text.split(f'href="/dashboard/namespaces/{tenant_a.namespace}"', 1)[1].split("</tr>", 1)[0]
    assert '<td class="num">3</td>' in row and "never" not in row and "estimate" not in row
    assert 'id="nav-namespaces" aria-current="page"' in r.text


async def test_an_owner_creates_a_namespace_and_lands_on_its_settings(signed_in: Browser, api: NamespaceAPI) -> None:
    page = await signed_in.get("/dashboard/namespaces")
    assert 'id="create-namespace"' in page.text
    r = await signed_in.post("/dashboard/namespaces", {"name": "support-bot", "description": "tickets"})
    assert r.status_code == 303 and r.headers["location"] == "/dashboard/namespaces/support-bot?done=created"
    settings = await signed_in.get(r.headers["location"])
    assert settings.status_code == 200 and "Namespace created." in settings.text and "tickets" in settings.text
    listed = await signed_in.get("/dashboard/namespaces")
    assert 'href="/dashboard/namespaces/support-bot"' in listed.text
    again = await signed_in.post("/dashboard/namespaces", {"name": "support-bot"})
    assert again.status_code == 409 and "namespace_exists" in again.text


async def test_a_bad_name_is_refused_with_the_rule(signed_in: Browser) -> None:
    await signed_in.get("/dashboard/namespaces")
    r = await signed_in.post("/dashboard/namespaces", {"name": "no spaces/please"})
    assert r.status_code == 422 and "not valid" in r.text


async def test_settings_are_shown_and_saved(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    path = f"/dashboard/namespaces/{tenant_a.namespace}"
    page = await signed_in.get(path)
    assert page.status_code == 200 and 'id="namespace-settings"' in page.text and 'id="save-settings"' in page.text
    r = await signed_in.post(
        path,
        {
            "description": "the assistant's memory",
            "fusion": "rrf",
            "weight_recency": "0.5",
            "weight_dense": "",
            "maintenance": "on",
            "every_minutes": "60",
            "steps": ["decay", "dedup"],
            "budget_ms": "30000",
        },
    )
    assert r.status_code == 303 and r.headers["location"] == f"{path}?done=saved"
    ns = await api.get_namespace(tenant_a.principal, tenant_a.namespace)
    assert ns.description == "the assistant's memory"
    assert ns.settings.search is not None and ns.settings.search.fusion == "rrf"
    assert ns.settings.search.weights == {"recency": 0.5}
    assert ns.settings.maintenance is not None
    assert [s.value for s in ns.settings.maintenance.jobs] == ["dedup", "decay"]  # the service's order
    assert ns.settings.maintenance.every_minutes == 60
    shown = await signed_in.get(path)
    assert 'value="0.5"' in shown.text and 'value="rrf" selected' in shown.text
    # Everything blank: both parts cleared.
    await signed_in.post(path, {"description": "", "fusion": ""})
    cleared = await api.get_namespace(tenant_a.principal, tenant_a.namespace)
    assert cleared.settings.search is None and cleared.settings.maintenance is None


async def test_a_wrong_setting_is_explained_and_nothing_changes(
    signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    path = f"/dashboard/namespaces/{tenant_a.namespace}"
    await signed_in.get(path)
    r = await signed_in.post(path, {"weight_dense": "11"})
    assert r.status_code == 422 and 'id="settings-error"' in r.text and "between 0 and 10" in r.text
    r = await signed_in.post(path, {"weight_dense": "lots"})
    assert r.status_code == 422 and "must be a number" in r.text
    ns = await api.get_namespace(tenant_a.principal, tenant_a.namespace)
    assert ns.settings.search is None


async def test_a_viewer_reads_but_cannot_create_or_change(
    browser: Browser, api: NamespaceAPI, tenant_a: Tenant
) -> None:
    await browser.sign_in(await add_member(api, tenant_a, "viewer"))
    listed = await browser.get("/dashboard/namespaces")
    assert listed.status_code == 200 and tenant_a.namespace in listed.text
    assert 'id="create-namespace"' not in listed.text
    r = await browser.post("/dashboard/namespaces", {"name": "sneaky"})
    assert r.status_code == 403
    path = f"/dashboard/namespaces/{tenant_a.namespace}"
    page = await browser.get(path)
    assert page.status_code == 200 and 'id="save-settings"' not in page.text and 'id="read-only"' in page.text
    r = await browser.post(path, {"fusion": "rrf"})
    assert r.status_code == 403
    assert (await api.get_namespace(tenant_a.principal, tenant_a.namespace)).settings.search is None
    assert "sneaky" not in [n.name for n in await api.list_namespaces(tenant_a.principal)]


async def test_a_form_without_its_token_is_refused(signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
    await signed_in.get("/dashboard/namespaces")
    r = await signed_in.post("/dashboard/namespaces", {"name": "no-token"}, csrf="")
    assert r.status_code == 403 and "csrf_failed" in r.text
    assert "no-token" not in [n.name for n in await api.list_namespaces(tenant_a.principal)]


async def test_another_tenants_namespace_is_not_found(
    browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
) -> None:
    await api.create_namespace(tenant_a.principal, NamespaceIn(name="a-only"))
    await browser.sign_in(await add_member(api, tenant_b, "owner"))
    assert (await browser.get("/dashboard/namespaces/a-only")).status_code == 404
    listed = await browser.get("/dashboard/namespaces")
    assert listed.status_code == 200 and "a-only" not in listed.text


async def test_a_large_namespace_is_estimated_from_the_planner(api: NamespaceAPI, tenant_a: Tenant) -> None:
    # Past the exact-count cap the list shows the planner's figure: EXPLAIN with bound values
    # answers for this namespace alone, at the cost of planning one statement.
    await api.store_many(tenant_a.principal, tenant_a.namespace, [MemoryIn(content=f"row {i}") for i in range(5)])
    ns = await api.get_namespace(tenant_a.principal, tenant_a.namespace, count=False)
    async with api._db.tenant_tx(tenant_a.id) as tx:
        estimate = await ns_repo.estimated_memories(tx.session, tenant_a.id, ns.id)
    assert isinstance(estimate, int) and estimate >= 0
    assert ns.memory_count is None  # count=False walks nothing
