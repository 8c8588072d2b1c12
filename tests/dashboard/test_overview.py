"""The overview page: the plan and each quota's use, the last 30 days as charts (fed by the
metering of every door), and how to connect (the MCP URL, each client's set-up, the REST URL)."""

from __future__ import annotations

import re
from html import unescape

import httpx

from memvault.api import NamespaceAPI
from memvault.mcp import setup
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member


def element(html: str, element_id: str) -> str:
    """The text of the element with ``element_id`` up to its end tag (good enough for our pages)."""
    found = re.search(rf'<(\w+)[^>]*\bid="{re.escape(element_id)}"[^>]*>(.*?)</\1>', html, re.S)
    assert found, f"no #{element_id} on the page"
    return " ".join(unescape(re.sub(r"<[^>]+>", " ", found.group(2))).split())


def aria_label(html: str, element_id: str) -> str:
    found = re.search(rf'id="{re.escape(element_id)}"[^>]*aria-label="([^"]*)"', html)
    assert found, f"no aria-label on #{element_id}"
    return unescape(found.group(1))


async def store(client: httpx.AsyncClient, t: Tenant, n: int) -> None:
    for i in range(n):
        r = await client.post(
            f"/v1/namespaces/{t.namespace}/memories", headers=t.headers, json={"content": f"The owl note {i}."}
        )
        assert r.status_code == 201, r.text


class TestPlanAndQuotas:
    async def test_the_owner_sees_the_plan_and_each_quota_as_used_of_limit(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await api.set_tenant_plan(tenant_a.id, "free", {"memories": 10})
        await store(client, tenant_a, 3)
        plan = await api.account_plan(tenant_a.principal)
        r = await signed_in.get("/dashboard")
        assert r.status_code == 200
        assert element(r.text, "plan") == "Plan: free (with limits set for this account)"
        assert "3 / 10" in element(r.text, "quota-memories")
        assert re.search(r'<meter min="0" max="10"[^>]*value="3"', r.text)
        for q in plan.quotas:
            limit = f"{q.limit:,}" if q.limit is not None else "unlimited"
            assert f"{q.used:,} / {limit}" in element(r.text, f"quota-{q.quota}")
        # The signed-in owner is a member.
        assert element(r.text, "quota-members").startswith("Members 1 /")

    async def test_a_viewer_opens_the_overview_and_sees_the_quotas(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await browser.sign_in(await add_member(api, tenant_a, "viewer"))
        r = await browser.get("/dashboard")
        assert r.status_code == 200
        assert 'id="quota-memories"' in r.text and 'id="plan"' in r.text
        # A viewer is offered no key page.
        assert "/dashboard/keys" not in r.text

    async def test_a_member_limited_to_a_namespace_sees_the_plan_but_no_tenant_wide_counts(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        email = await add_member(api, tenant_a, "viewer", namespaces=[tenant_a.namespace])
        await browser.sign_in(email)
        r = await browser.get("/dashboard")
        assert r.status_code == 200
        assert 'id="plan"' in r.text and 'id="quotas-hidden"' in r.text
        assert 'id="quota-memories"' not in r.text


class TestUsageCharts:
    async def test_requests_through_rest_show_in_the_requests_chart(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant, client: httpx.AsyncClient
    ) -> None:
        await store(client, tenant_a, 2)
        r = await client.post(
            f"/v1/namespaces/{tenant_a.namespace}/search", headers=tenant_a.headers, json={"query": "owl"}
        )
        assert r.status_code == 200
        await api._usage.flush()
        page = (await signed_in.get("/dashboard")).text
        # Three REST calls by the key (the dashboard's own calls are REST too, by the signed-in user).
        found = re.search(r"rest (\d+)", aria_label(page, "chart-requests"))
        assert found and int(found.group(1)) >= 3
        assert aria_label(page, "chart-searches").startswith("Searches per day") and ": 1 searches" in aria_label(
            page, "chart-searches"
        )
        assert ": 2 memories written" in aria_label(page, "chart-writes")
        assert 'role="img"' in page and "<rect" in page

    async def test_tenant_b_sees_nothing_of_a(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant, client: httpx.AsyncClient
    ) -> None:
        await store(client, tenant_a, 2)
        await api._usage.flush()
        await browser.sign_in(await add_member(api, tenant_b, "owner"))
        page = (await browser.get("/dashboard")).text
        assert ": 0 memories written" in aria_label(page, "chart-writes")
        assert element(page, "quota-memories").startswith("Stored memories 0 /")


class TestConnect:
    async def test_the_mcp_and_rest_urls_with_copy_buttons_and_each_clients_snippet(self, signed_in: Browser) -> None:
        page = (await signed_in.get("/dashboard")).text
        assert element(page, "mcp-url").strip() == "http://memvault.test/mcp"
        assert element(page, "rest-url").strip() == "http://memvault.test/v1"
        assert 'id="copy-mcp-url"' in page and 'data-copy="mcp-url"' in page
        assert 'data-copy="rest-url"' in page
        for c in setup.clients("http://memvault.test/mcp"):
            assert element(page, f"snippet-{c.client}") == " ".join(c.text.split())
        assert "claude mcp add --transport http memvault http://memvault.test/mcp" in element(
            page, "snippet-claude-code"
        )
        assert '"type": "http"' in element(page, "snippet-vscode")
        assert setup.BEGIN in element(page, "snippet-rules")

    async def test_the_public_url_wins_over_the_address_the_page_was_opened_at(
        self, signed_in: Browser, app: object
    ) -> None:
        settings = app.state.settings  # type: ignore[attr-defined]
        before = settings.public_url
        settings.public_url = "https://memory.example.com/"
        try:
            page = (await signed_in.get("/dashboard")).text
        finally:
            settings.public_url = before
        assert element(page, "mcp-url").strip() == "https://memory.example.com/mcp"
        assert "https://memory.example.com/mcp" in element(page, "snippet-cursor")

    async def test_the_page_keeps_to_the_content_security_policy(self, signed_in: Browser) -> None:
        r = await signed_in.get("/dashboard")
        assert "style-src 'self'" in r.headers["content-security-policy"]
        assert "style=" not in r.text and "<script>" not in r.text
