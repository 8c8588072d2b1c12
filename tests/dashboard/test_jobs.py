"""The jobs pages: a member sees the tenant's jobs with their progress, newest first, filtered by
state and paged; cancels a queued one; a viewer sees them but cannot cancel; another tenant's
member finds nothing; a namespace-limited member sees its namespaces' jobs only."""

from __future__ import annotations

import re
import uuid

from memvault.api import NamespaceAPI
from memvault.maintenance.schemas import OrganizeIn, Step
from memvault.namespaces.schemas import NamespaceIn
from tests.conftest import Tenant
from tests.dashboard.conftest import Browser, add_member
from tests.maintenance.helpers import owner_sql


async def queue(api: NamespaceAPI, t: Tenant, step: str = "promote", ns: str | None = None) -> uuid.UUID:
    """A queued organize job of ``t``, made through the facade as `POST .../organize` does."""
    out = await api.organize(t.principal, ns or t.namespace, OrganizeIn(jobs=[Step(step)]))
    return out.job_id


async def running_at(api: NamespaceAPI, job_id: uuid.UUID, progress: float) -> None:
    """The job as a worker leaves it mid-run: claimed and some batches done."""
    await owner_sql(
        api,
        "UPDATE jobs SET status = 'running', started_at = now(), progress = :p WHERE id = :id",
        p=progress,
        id=job_id,
    )


def progress_value(html: str, job_id: uuid.UUID) -> str:
    found = re.search(rf'<progress id="progress-{job_id}"[^>]*value="(\d+)"', html)
    assert found, f"no progress bar for {job_id}"
    return found.group(1)


async def status_of(api: NamespaceAPI, t: Tenant, job_id: uuid.UUID) -> str:
    return (await api.get_job(t.principal, job_id)).status.value


class TestList:
    async def test_jobs_show_with_their_progress_newest_first(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        done = await queue(api, tenant_a)
        assert (await api.run_job(tenant_a.principal, done)).status == "succeeded"
        busy = await queue(api, tenant_a, "decay")
        await running_at(api, busy, 0.42)
        waiting = await queue(api, tenant_a, "dedup")

        r = await signed_in.get("/dashboard/jobs")

        assert r.status_code == 200
        html = r.text
        assert 'id="jobs"' in html
        rows = re.findall(r'<tr id="job-([0-9a-f-]{36})">', html)
        assert rows == [str(waiting), str(busy), str(done)]
        assert progress_value(html, done) == "100"
        assert progress_value(html, busy) == "42"
        assert progress_value(html, waiting) == "0"
        assert "job-succeeded" in html and "job-running" in html and "job-queued" in html
        # Still-running and queued jobs have a cancel button; the finished one has none.
        assert f'id="cancel-{busy}"' in html and f'id="cancel-{waiting}"' in html
        assert f'id="cancel-{done}"' not in html

    async def test_the_state_filter_shows_those_jobs_only(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        done = await queue(api, tenant_a)
        await api.run_job(tenant_a.principal, done)
        waiting = await queue(api, tenant_a, "dedup")

        r = await signed_in.get("/dashboard/jobs", params={"state": "succeeded"})

        assert r.status_code == 200 and 'id="job-filter"' in r.text
        assert f'id="job-{done}"' in r.text and f'id="job-{waiting}"' not in r.text
        assert '<option value="succeeded" selected>' in r.text
        assert (await signed_in.get("/dashboard/jobs", params={"state": "sleeping"})).status_code == 422

    async def test_a_long_list_is_paged_by_fifty(self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
        made = [await queue(api, tenant_a, "decay") for _ in range(52)]

        first = await signed_in.get("/dashboard/jobs", params={"state": "queued"})
        found = re.search(r'<a href="([^"]+)" id="next-page"', first.text)
        assert found
        second = await signed_in.get(found.group(1).replace("&amp;", "&"))

        one = re.findall(r'<tr id="job-([0-9a-f-]{36})">', first.text)
        two = re.findall(r'<tr id="job-([0-9a-f-]{36})">', second.text)
        assert len(one) == 50 and len(two) == 2
        assert one + two == [str(j) for j in reversed(made)]
        assert 'id="next-page"' not in second.text and 'id="first-page"' in second.text

    async def test_the_detail_page_shows_the_result(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await api.run_job(tenant_a.principal, job_id)

        r = await signed_in.get(f"/dashboard/jobs/{job_id}")

        assert r.status_code == 200
        assert f'id="job-{job_id}"' in r.text and 'id="job-result"' in r.text
        assert progress_value(r.text, job_id) == "100" and f'id="cancel-{job_id}"' not in r.text


class TestCancel:
    async def test_a_queued_job_is_cancelled(self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant) -> None:
        job_id = await queue(api, tenant_a)
        page = await signed_in.get("/dashboard/jobs")
        assert f'id="cancel-{job_id}"' in page.text

        r = await signed_in.post(f"/dashboard/jobs/{job_id}/cancel")

        assert r.status_code == 303 and r.headers["location"] == f"/dashboard/jobs/{job_id}?done=cancelled"
        shown = await signed_in.get(r.headers["location"])
        assert "job-cancelled" in shown.text and 'id="notice"' in shown.text
        assert f'id="cancel-{job_id}"' not in shown.text
        assert await status_of(api, tenant_a, job_id) == "cancelled"
        listed = await signed_in.get("/dashboard/jobs", params={"state": "cancelled"})
        assert f'id="job-{job_id}"' in listed.text

    async def test_a_running_job_is_asked_to_stop(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await running_at(api, job_id, 0.5)
        await signed_in.get(f"/dashboard/jobs/{job_id}")

        r = await signed_in.post(f"/dashboard/jobs/{job_id}/cancel")

        assert r.status_code == 303 and r.headers["location"].endswith("?done=stopping")
        job = await api.get_job(tenant_a.principal, job_id)
        assert job.status == "running" and job.cancel_requested_at is not None
        shown = await signed_in.get(r.headers["location"])
        assert "(stopping)" in shown.text and f'id="cancel-{job_id}"' not in shown.text

    async def test_a_finished_job_cannot_be_cancelled(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await api.run_job(tenant_a.principal, job_id)
        await signed_in.get("/dashboard/jobs")

        r = await signed_in.post(f"/dashboard/jobs/{job_id}/cancel")

        assert r.status_code == 409 and "text/html" in r.headers["content-type"] and "job_finished" in r.text

    async def test_without_the_form_token_nothing_is_cancelled(
        self, signed_in: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await signed_in.get("/dashboard/jobs")

        r = await signed_in.post(f"/dashboard/jobs/{job_id}/cancel", csrf="")

        assert r.status_code == 403 and "csrf_failed" in r.text
        assert await status_of(api, tenant_a, job_id) == "queued"


class TestRoles:
    async def test_a_viewer_sees_jobs_but_cannot_cancel(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await browser.sign_in(await add_member(api, tenant_a, "viewer"))

        page = await browser.get("/dashboard/jobs")
        assert page.status_code == 200 and f'id="job-{job_id}"' in page.text
        assert f'id="cancel-{job_id}"' not in page.text
        r = await browser.post(f"/dashboard/jobs/{job_id}/cancel")

        assert r.status_code == 403 and "text/html" in r.headers["content-type"]
        assert await status_of(api, tenant_a, job_id) == "queued"

    async def test_another_tenants_job_is_not_there(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant, tenant_b: Tenant
    ) -> None:
        job_id = await queue(api, tenant_a)
        await browser.sign_in(await add_member(api, tenant_b, "owner"))

        assert (await browser.get(f"/dashboard/jobs/{job_id}")).status_code == 404
        listed = await browser.get("/dashboard/jobs")
        assert listed.status_code == 200 and str(job_id) not in listed.text
        r = await browser.post(f"/dashboard/jobs/{job_id}/cancel")
        assert r.status_code == 404
        assert await status_of(api, tenant_a, job_id) == "queued"

    async def test_a_member_limited_to_a_namespace_sees_its_jobs_only(
        self, browser: Browser, api: NamespaceAPI, tenant_a: Tenant
    ) -> None:
        await api.create_namespace(tenant_a.principal, NamespaceIn(name="elsewhere"))
        mine = await queue(api, tenant_a)
        other = await queue(api, tenant_a, ns="elsewhere")
        await browser.sign_in(await add_member(api, tenant_a, "member", namespaces=[tenant_a.namespace]))

        listed = await browser.get("/dashboard/jobs")

        assert f'id="job-{mine}"' in listed.text and str(other) not in listed.text
        assert (await browser.get(f"/dashboard/jobs/{other}")).status_code == 404
