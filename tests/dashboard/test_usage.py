"""The usage page and its CSV: what the account used per day by door, namespace, key and operation,
the requests made through REST counted once the meter has written them, and only the member's
own tenant's."""

from __future__ import annotations

import csv
import io
import re

import httpx

from memvault.api import NamespaceAPI
from memvault.dashboard.usage import safe_cell
from memvault.metering.tally import Tally
from memvault.operations import Operation
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member
from tests.dashboard.test_overview import aria_label, element, store


async def rest_traffic(client: httpx.AsyncClient, t: Tenant, api: NamespaceAPI) -> None:
    """Two writes and a search through REST with the tenant's key, and a call metered to a
    namespace named "=cmd": REST refuses such a name before it is counted, so the meter records it
    directly, as it would a name from elsewhere (a group is user text the CSV must not run)."""
    await store(client, t, 2)
    r = await client.post(f"/v1/namespaces/{t.namespace}/search", headers=t.headers, json={"query": "owl"})
    assert r.status_code == 200
    key = await api.authenticate(t.key)
    api._usage.record(key, Operation("list_memories", "read"), "rest", Tally(namespace="=cmd"), plan="unlimited")
    await api._usage.flush()


def rows(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def table_row(page: str, group: str, label: str) -> list[str]:
    """The figures of one row of #usage-table: the group's cell text, then each unit's figure."""
    body = re.search(rf'<tbody id="usage-rows-{group}">(.*?)</tbody>', page, re.S)
    assert body, f"no {group} rows"
    for tr in re.findall(r"<tr>(.*?)</tr>", body.group(1), re.S):
        cells = [
            " ".join(re.sub(r"<[^>]+>", " ", c).split()) for c in re.findall(r"<t[dh][^>]*>(.*?)</t[dh]>", tr, re.S)
        ]
        if label in cells:
            return cells[cells.index(label) :]
    raise AssertionError(f"no row {label!r} under {group}")


class TestUsagePage:
    async def test_rest_requests_show_in_the_charts_and_the_table_by_door_and_namespace(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        r = await signed_in.get("/dashboard/usage")
        assert r.status_code == 200
        page = r.text
        for group in ("door", "namespace", "key", "operation"):
            assert f'id="usage-chart-{group}"' in page
        assert 'id="usage-table"' in page and 'id="download-csv"' in page
        assert re.search(r"rest \d+", aria_label(page, "usage-chart-door"))
        # requests, memories written, searches ... in UNITS order.
        ns = table_row(page, "namespace", tenant_a.namespace)
        assert ns[1:4] == ["3", "2", "1"]
        assert table_row(page, "operation", "search")[3] == "1"
        assert int(table_row(page, "door", "rest")[1]) >= 4
        key = (await api.list_keys(tenant_a.principal)).data[0]
        assert table_row(page, "key", f"{key.name} ({str(key.id)[:8]})")[1] == "4"
        # User text is escaped in the table.
        assert "=cmd" in element(page, "usage-rows-namespace")

    async def test_the_dashboards_own_calls_count_on_a_door_of_their_own(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        """Looking at the dashboard is not REST traffic: its calls count on the door `dashboard`."""
        await rest_traffic(client, tenant_a, api)
        await signed_in.get("/dashboard")
        await api._usage.flush()
        page = (await signed_in.get("/dashboard/usage")).text
        assert int(table_row(page, "door", "dashboard")[1]) >= 1
        assert int(table_row(page, "door", "rest")[1]) == 4

    async def test_a_group_name_is_text_never_markup(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        evil = '<img src=x onerror="alert(1)">'
        key = await api.authenticate(tenant_a.key)
        api._usage.record(key, Operation("list_memories", "read"), "rest", Tally(namespace=evil), plan="unlimited")
        await api._usage.flush()
        page = (await signed_in.get("/dashboard/usage", params={"group": "namespace"})).text
        assert evil not in page and "<img" not in page
        assert evil in element(page, "usage-rows-namespace")
        assert evil in aria_label(page, "usage-chart-namespace")

    async def test_one_group_a_period_and_a_measure(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        r = await signed_in.get("/dashboard/usage", params={"group": "namespace", "days": "7", "unit": "searches"})
        page = r.text
        assert 'id="usage-chart-namespace"' in page and 'id="usage-chart-door"' not in page
        assert aria_label(page, "usage-chart-namespace").startswith("Searches per day by namespace")
        assert f"{tenant_a.namespace} 1" in aria_label(page, "usage-chart-namespace")
        assert '<option value="7" selected>' in page
        assert 'href="/dashboard/usage.csv?days=7&amp;group=namespace&amp;unit=searches"' in page
        # A stale bookmark opens the defaults instead of an error.
        r = await signed_in.get("/dashboard/usage", params={"group": "colour", "days": "12", "unit": "x"})
        assert r.status_code == 200 and '<option value="30" selected>' in r.text

    async def test_an_admin_sees_keys_by_name_a_viewer_by_id(
        self,
        signed_in: Browser,
        second_browser: Browser,
        api: NamespaceAPI,
        tenant_a: Tenant,
        client: httpx.AsyncClient,
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        key = (await api.list_keys(tenant_a.principal)).data[0]
        page = (await signed_in.get("/dashboard/usage", params={"group": "key"})).text
        assert table_row(page, "key", f"{key.name} ({str(key.id)[:8]})")[1] == "4"
        await second_browser.sign_in(await add_member(api, tenant_a, "viewer"))
        r = await second_browser.get("/dashboard/usage", params={"group": "key"})
        assert r.status_code == 200 and table_row(r.text, "key", str(key.id))[1] == "4"

    async def test_a_viewer_opens_the_page(self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
        await browser.sign_in(await add_member(api, tenant_a, "viewer"))
        r = await browser.get("/dashboard/usage")
        assert r.status_code == 200 and 'id="usage-table"' in r.text
        r = await browser.get("/dashboard/usage.csv")
        assert r.status_code == 200 and r.text.startswith("day,by,group,requests")

    async def test_tenant_bs_member_sees_only_bs_usage(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, client: httpx.AsyncClient
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        await store(client, tenant_b, 1)
        await api._usage.flush()
        await browser.sign_in(await add_member(api, tenant_b, "owner"))
        page = (await browser.get("/dashboard/usage")).text
        assert "=cmd" not in page
        assert table_row(page, "operation", "store")[2] == "1"
        found = rows((await browser.get("/dashboard/usage.csv")).text)
        assert sum(int(r["memories_written"]) for r in found if r["by"] == "door") == 1
        assert not any(r["group"] in ("'=cmd", "=cmd") for r in found)


class TestCsv:
    async def test_the_download_has_the_rows_and_escapes_formulas(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        r = await signed_in.get("/dashboard/usage.csv", params={"days": "7"})
        assert r.status_code == 200
        assert r.headers["content-type"].startswith("text/csv")
        assert re.fullmatch(r'attachment; filename="memvault-usage-[\d-]+-all\.csv"', r.headers["content-disposition"])
        found = rows(r.text)
        assert {r["by"] for r in found} == {"door", "namespace", "key", "operation"}
        assert list(found[0]) == [
            "day", "by", "group", "requests", "memories_written", "searches", "events_ingested", "tokens_embedded",
            "bytes_stored",
        ]  # fmt: skip
        ns = {r["group"]: r for r in found if r["by"] == "namespace"}
        assert ns[tenant_a.namespace]["memories_written"] == "2" and ns[tenant_a.namespace]["searches"] == "1"
        assert "'=cmd" in ns and "=cmd" not in ns

    async def test_one_group(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await rest_traffic(client, tenant_a, api)
        r = await signed_in.get("/dashboard/usage.csv", params={"group": "door"})
        assert r.headers["content-disposition"].endswith('-door.csv"')
        found = rows(r.text)
        assert {r["by"] for r in found} == {"door"} and "rest" in {r["group"] for r in found}


def test_safe_cell() -> None:
    assert [safe_cell(v) for v in ("=1+2", "+x", "-x", "@x", "plain", 5, "")] == [
        "'=1+2",
        "'+x",
        "'-x",
        "'@x",
        "plain",
        5,
        "",
    ]
