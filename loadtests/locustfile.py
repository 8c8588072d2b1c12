"""memvault under load: locust users for every door. Point it at any deployment:

    locust -f loadtests/locustfile.py --host http://127.0.0.1:8080 MixedAgent
    MEMVAULT_API_KEY=mv_... locust -f loadtests/locustfile.py --host https://memvault.example RestAgent McpAgent

Name the user classes to run (all of them otherwise, flood included). Keys and namespaces come from
the environment (loadtests/scenarios/config.py); loadtests/run.sh seeds a deployment, starts one if
asked, runs locust headless and prints a summary (docs/operations.md, "Load testing").

| class | does |
|---|---|
| MixedAgent | issue 25: REST search 50 %, context 15, store 15, batch 5, get 5, list 5, MCP search 5 |
| RestAgent | the REST door: search, context, store, batch of 10, get, list, events |
| McpAgent | the MCP door: initialize, tools/list, then memory_search, memory_get_context, memory_store |
| SdkAgent | the Python SDK (memvault_sdk.MemVault), timed per call |
| IngestAgent | events, then polls search until the extracted memory is found (INGEST events to searchable) |
| NoisyNeighbour, QuietTenant | the first tenant floods; the others are measured as ``quiet REST ...`` |
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from locust import events

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scenarios package beside this file

from scenarios.ingest import IngestAgent
from scenarios.mcp import McpAgent
from scenarios.mixed import MixedAgent
from scenarios.noisy import NoisyNeighbour, QuietTenant
from scenarios.rest import SEARCH_STAGES, RestAgent
from scenarios.sdk import SdkAgent

__all__ = ["IngestAgent", "McpAgent", "MixedAgent", "NoisyNeighbour", "QuietTenant", "RestAgent", "SdkAgent"]


@events.test_stop.add_listener
def save_search_stages(environment: Any, **kwargs: Any) -> None:
    """Beside locust's CSV (``--csv PREFIX``): PREFIX_search_stages.json, the server's per-stage
    search timings as p50/p95/p99 in ms."""
    prefix = getattr(environment.parsed_options, "csv_prefix", None)
    if not prefix or not SEARCH_STAGES:
        return
    summary = {}
    for stage, values in SEARCH_STAGES.items():
        ordered = sorted(values)
        summary[stage] = {
            "n": len(ordered),
            **{f"p{p}": ordered[min(len(ordered) - 1, int(p / 100 * len(ordered)))] for p in (50, 95, 99)},
        }
    Path(f"{prefix}_search_stages.json").write_text(json.dumps(summary, indent=2))
