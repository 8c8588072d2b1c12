"""Monthly caps (events ingested, tokens embedded): known from the meter's counts without a query
per request, refused with 429 quota_exceeded and Retry-After to the month's end, nothing stored;
a tenant's background jobs over its cap do not start and say why."""

from __future__ import annotations

import uuid
from datetime import UTC, datetime
from typing import Any

import httpx
import pytest

from memvault.api import NamespaceAPI
from memvault.plans.limits import month_bounds
from memvault.principal import Principal
from memvault_sdk import AsyncMemVault, RateLimitError
from tests.conftest import make_tenant
from tests.servers import served


def msg(content: str) -> dict[str, str]:
    return {"role": "user", "content": content}


async def test_events_past_the_monthly_cap_are_refused_until_the_month_ends(
    client: httpx.AsyncClient, api: NamespaceAPI
) -> None:
    t = await make_tenant(api, "monthly")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 3})
    url = f"/v1/namespaces/{t.namespace}/events"
    r = await client.post(url, headers=t.headers, json={"session_id": "s1", "messages": [msg("one"), msg("two")]})
    assert r.status_code in (200, 201, 202), r.text
    # Not yet written to the table: the cap still sees these two.
    r = await client.post(url, headers=t.headers, json={"session_id": "s1", "messages": [msg("three"), msg("four")]})
    assert r.status_code == 429, r.text
    body = r.json()
    assert body["code"] == "quota_exceeded"
    assert body["quota"] == "events_per_month" and body["limit"] == 3 and body["used"] == 2
    _, end = month_bounds()
    assert body["resets_at"] == end.isoformat()
    wait = int(r.headers["Retry-After"])
    assert abs(wait - (end - datetime.now(UTC)).total_seconds()) < 60
    # Nothing of the refused request was stored.
    r = await client.get(f"/v1/namespaces/{t.namespace}/sessions/s1/messages", headers=t.headers)
    assert [m["content"] for m in r.json()["data"]] == ["one", "two"]
    # One more still fits.
    r = await client.post(url, headers=t.headers, json={"session_id": "s1", "messages": [msg("three")]})
    assert r.status_code in (200, 201, 202), r.text
    # The account shows the same use.
    r = await client.get("/v1/account", headers=t.headers)
    quotas = {q["quota"]: q for q in r.json()["quotas"]}
    q = quotas["events_per_month"]
    assert (q["used"], q["limit"]) == (3, 3)
    assert datetime.fromisoformat(q["resets_at"]) == end


async def test_embedded_tokens_past_the_cap_refuse_writes_and_stop_jobs_from_starting(
    client: httpx.AsyncClient, api: NamespaceAPI
) -> None:
    t = await make_tenant(api, "monthly")
    await api.set_tenant_plan(t.id, "unlimited", {"embedded_tokens_per_month": 40})
    memories = f"/v1/namespaces/{t.namespace}/memories"
    r = await client.post(memories, headers=t.headers, json={"content": "Short note."})
    assert r.status_code == 201, r.text
    used = (await api._usage.month_totals(t.id))["tokens_embedded"]
    assert 0 < used < 40
    r = await client.post(memories, headers=t.headers, json={"content": "A much longer note. " * 12})
    assert r.status_code == 429, r.text
    assert r.json()["quota"] == "embedded_tokens_per_month"
    assert int(r.headers["Retry-After"]) > 0
    r = await client.get(memories, headers=t.headers)
    assert len(r.json()["data"]) == 1  # the refused write stored nothing

    # An ingest (events are not capped here) queues an extraction job; at the cap it never starts.
    r = await client.post(
        f"/v1/namespaces/{t.namespace}/events",
        headers=t.headers,
        json={"session_id": "s1", "messages": [msg("I moved to Lisbon last month and I love it.")]},
    )
    assert r.status_code in (200, 201, 202), r.text
    job_id = uuid.UUID(r.json()["job_id"])
    await api.set_tenant_plan(t.id, "unlimited", {"embedded_tokens_per_month": used})
    outcome = await api.run_job(Principal.system(t.id, subject=f"job:{job_id}"), job_id)
    assert outcome.status == "failed"
    r = await client.get(f"/v1/jobs/{job_id}", headers=t.headers)
    job = r.json()
    assert job["status"] == "failed"
    assert job["error"].startswith("quota_exceeded: ") and "embedded tokens" in job["error"]


async def test_jobs_count_their_tokens_for_their_tenant_as_internal_work(
    client: httpx.AsyncClient, api: NamespaceAPI
) -> None:
    t = await make_tenant(api, "monthly")
    r = await client.post(
        f"/v1/namespaces/{t.namespace}/events",
        headers=t.headers,
        json={"session_id": "s1", "messages": [msg("Remember that my favourite colour is green.")]},
    )
    job_id = uuid.UUID(r.json()["job_id"])
    outcome = await api.run_job(Principal.system(t.id, subject=f"job:{job_id}"), job_id)
    assert outcome.status == "succeeded", outcome
    await api._usage.flush()
    end = datetime.now(UTC)
    series = await api.account_usage(
        Principal.system(t.id), start=month_bounds()[0], end=end, granularity="day", group_by="door"
    )
    doors = {p.group: p for p in series.points}
    assert doors["rest"].requests == 1 and doors["rest"].events_ingested == 1
    assert doors["internal"].tokens_embedded > 0 and doors["internal"].requests == 0
    assert doors["internal"].memories_written >= 1


async def test_the_sdk_does_not_retry_a_monthly_quota_and_says_which(app: Any, api: NamespaceAPI) -> None:
    t = await make_tenant(api, "monthly")
    await api.set_tenant_plan(t.id, "unlimited", {"events_per_month": 1})
    async with served(app) as base, AsyncMemVault(api_key=t.key, base_url=base, namespace=t.namespace) as mv:
        await mv.events.ingest([{"role": "user", "content": "first"}], session_id="s1")
        with pytest.raises(RateLimitError) as refused:
            await mv.events.ingest([{"role": "user", "content": "second"}], session_id="s1")
    assert refused.value.code == "quota_exceeded"
    await api._usage.flush()
    series = await api.account_usage(Principal.system(t.id), granularity="hour", group_by="operation")
    # Two calls reached the server: the refusal was not retried.
    assert sum(p.requests for p in series.points if p.group == "ingest_events") == 2
