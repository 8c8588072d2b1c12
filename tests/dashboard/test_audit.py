"""The audit log page: an admin sees each change with who made it (a member by their email),
filters by action, actor, target and days, and pages back; a viewer or member gets 403 as a page;
another tenant's entries are never there."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import httpx

from memvault.api import NamespaceAPI
from memvault.keys.schemas import KeyIn
from memvault.maintenance.schemas import OrganizeIn, Step
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member


async def key_by_rest(client: httpx.AsyncClient, t: Tenant, name: str) -> str:
    r = await client.post("/v1/keys", json={"name": name, "scopes": ["read"]}, headers=t.headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def cancel_in_dashboard(browser: Browser, api: NamespaceAPI, t: Tenant) -> str:
    """A queued job the signed-in member cancels with the page's button: an entry of theirs."""
    job_id = (await api.organize(t.principal, t.namespace, OrganizeIn(jobs=[Step.promote]))).job_id
    await browser.get("/dashboard/jobs")
    assert (await browser.post(f"/dashboard/jobs/{job_id}/cancel")).status_code == 303
    return str(job_id)


def row_with(html: str, *needles: str) -> str:
    """The audit table's row holding every one of ``needles``."""
    for row in re.findall(r'<tr id="audit-\d+">.*?</tr>', html, re.S):
        if all(n in row for n in needles):
            return str(row)
    raise AssertionError(f"no row with {needles}")


def actions(html: str) -> list[str]:
    table = html.split('id="audit"', 1)[1] if 'id="audit"' in html else ""
    return re.findall(r"<td><code>([a-z_.]+)</code></td>", table)


class TestEntries:
    async def test_a_key_creation_shows_with_who_made_it(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        key_id = await key_by_rest(client, tenant_a, "ingest bot")
        job_id = await cancel_in_dashboard(signed_in, api, tenant_a)

        r = await signed_in.get("/dashboard/audit")

        assert r.status_code == 200 and 'id="audit"' in r.text and 'id="audit-filter"' in r.text
        assert actions(r.text)[:3] == ["job.cancel", "namespace.organize", "key.create"]
        row = row_with(r.text, f"<code>{key_id}</code>", "key.create", "<code>key:")
        # The detail is the entry's JSON, pretty-printed and escaped.
        assert '<pre class="audit-detail">{\n  &#34;expires_at&#34;: null,' in row
        # The member who cancelled is named by their email, and the target links to the job.
        cancelled = row_with(r.text, "job.cancel")
        assert owner_of_a in cancelled and f'href="/dashboard/jobs/{job_id}"' in cancelled

    async def test_filters_by_action_actor_target_and_days(
        self, signed_in: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, owner_of_a: str
    ) -> None:
        key_id = await key_by_rest(client, tenant_a, "one")
        await key_by_rest(client, tenant_a, "two")
        job_id = await cancel_in_dashboard(signed_in, api, tenant_a)
        today = datetime.now(UTC).date()

        async def shown(**params: str) -> list[str]:
            r = await signed_in.get("/dashboard/audit", params=params)
            assert r.status_code == 200, r.text
            return actions(r.text)

        assert await shown(action="key") == ["key.create", "key.create"]
        assert await shown(action="key.create", target=key_id) == ["key.create"]
        assert await shown(action="job") == ["job.cancel"]
        assert await shown(actor=owner_of_a) == ["job.cancel"]
        assert await shown(actor=owner_of_a, target=job_id) == ["job.cancel"]
        assert await shown(actor="nobody@example.com") == []
        assert len(await shown(**{"from": today.isoformat(), "to": today.isoformat()})) >= 4
        assert await shown(**{"from": (today + timedelta(days=1)).isoformat()}) == []
        assert await shown(to=(today - timedelta(days=1)).isoformat()) == []
        # The form keeps what was asked, escaped.
        r = await signed_in.get("/dashboard/audit", params={"action": "key", "actor": '"><b>x'})
        assert 'name="action" value="key"' in r.text and "&#34;&gt;&lt;b&gt;x" in r.text
        assert (await signed_in.get("/dashboard/audit", params={"from": "yesterday"})).status_code == 422

    async def test_a_long_log_is_paged_by_fifty(self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
        for i in range(51):
            await api.create_key(tenant_a.principal, KeyIn(name=f"k{i}", scopes=["read"]))

        first = await signed_in.get("/dashboard/audit", params={"action": "key.create"})
        found = re.search(r'<a href="([^"]+)" id="next-page"', first.text)
        assert found and "action=key.create" in found.group(1)
        second = await signed_in.get(found.group(1).replace("&amp;", "&"))

        assert len(actions(first.text)) == 50 and len(actions(second.text)) == 1
        assert 'id="next-page"' not in second.text and 'id="first-page"' in second.text


class TestWhoMaySee:
    async def test_a_viewer_or_member_gets_403_as_a_page(
        self, browser: Browser, second_browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await browser.sign_in(await add_member(api, tenant_a, "viewer"))
        await second_browser.sign_in(await add_member(api, tenant_a, "member"))
        for b in (browser, second_browser):
            r = await b.get("/dashboard/audit")
            assert r.status_code == 403 and r.headers["content-type"].startswith("text/html")
            assert 'id="error-code"' in r.text and 'id="audit"' not in r.text
            assert 'id="nav-audit"' not in (await b.get("/dashboard/jobs")).text

    async def test_another_tenants_entries_are_not_there(
        self, browser: Browser, client: httpx.AsyncClient, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        key_id = await key_by_rest(client, tenant_a, "a's key")
        await browser.sign_in(await add_member(api, tenant_b, "owner"))

        r = await browser.get("/dashboard/audit")
        assert r.status_code == 200 and key_id not in r.text
        r = await browser.get("/dashboard/audit", params={"target": key_id})
        assert r.status_code == 200 and 'id="no-entries"' in r.text and 'id="audit"' not in r.text
