"""infra/grafana/memvault.json: a Grafana dashboard that loads (valid JSON, every panel with a
Prometheus query) and whose queries ask only for metrics a real scrape of the server has."""

from __future__ import annotations

import json
import re
import uuid
from pathlib import Path

import httpx
from prometheus_client.parser import text_string_to_metric_families

from tests.conftest import Tenant

DASHBOARD = Path(__file__).resolve().parents[2] / "infra" / "grafana" / "memvault.json"
SUFFIXES = {"counter": ("_total",), "histogram": ("_bucket", "_count", "_sum"), "gauge": ("",)}


def expressions() -> list[str]:
    board = json.loads(DASHBOARD.read_text())
    assert board["uid"] and board["title"] and board["panels"]
    found = []
    for panel in board["panels"]:
        assert panel["targets"], panel["title"]
        found += [t["expr"] for t in panel["targets"]]
    return found


async def scraped_names(client: httpx.AsyncClient, tenant: Tenant) -> set[str]:
    base = f"/v1/namespaces/{tenant.namespace}"
    await client.post(f"{base}/memories", json={"content": "Ivo plays the cello."}, headers=tenant.headers)
    await client.post(f"{base}/search", json={"query": f"cello {uuid.uuid4().hex}"}, headers=tenant.headers)
    resp = await client.get("/metrics")
    assert resp.status_code == 200
    names = set()
    for family in text_string_to_metric_families(resp.text):
        names |= {family.name + suffix for suffix in SUFFIXES.get(family.type, ("",))}
    return names


class TestDashboard:
    async def test_every_query_names_metrics_the_server_exports(
        self, client: httpx.AsyncClient, tenant_a: Tenant
    ) -> None:
        exprs = expressions()
        names = await scraped_names(client, tenant_a)

        wanted = {name for expr in exprs for name in re.findall(r"\bmemvault_[a-z_]+", expr)}
        assert wanted, "no memvault metric in the dashboard"
        assert wanted <= names, f"not in a scrape: {sorted(wanted - names)}"
        # And the other way: every metric the server exports has a panel.
        # (`_created` is the client library's creation time of a series, not a metric to show.)
        families = {n for n in names if n.startswith("memvault_") and not n.endswith("_created")}
        shown = {re.sub(r"_(bucket|count|sum)$", "", n) for n in wanted}
        missing = {re.sub(r"_(bucket|count|sum|total)$", "", n) for n in families} - {
            re.sub(r"_total$", "", n) for n in shown
        }
        assert not missing, f"no panel for: {sorted(missing)}"
