"""memvault under load: locust users for every door. Point it at any deployment:

    locust -f loadtests/locustfile.py --host http://127.0.0.1:8080 MixedAgent
    MEMVAULT_API_KEY=mv_... locust -f loadtests/locustfile.py --host https://memvault.example RestAgent McpAgent

Name the user classes to run (all of them otherwise, flood included). Keys and namespaces come from
the environment (loadtests/scenarios/config.py); loadtests/run.sh seeds a deployment, starts one if
asked, runs locust headless and prints a summary (docs/operations.md, "Load testing").

| class | does |
|---|---|
| MixedAgent | issue 25's mix: REST search 50 %, context 15 %, store 15 %, batch 5 %, get 5 %, list 5 %, MCP search 5 % |
| RestAgent | the REST door: search, context, store, batch of 10, get, list, events |
| McpAgent | the MCP door: initialize, tools/list, then memory_search, memory_get_context, memory_store |
| SdkAgent | the Python SDK (memvault_sdk.MemVault), timed per call |
| IngestAgent | events, then polls search until the extracted memory is found (INGEST events to searchable) |
| NoisyNeighbour, QuietTenant | the first tenant floods; the others are measured as ``quiet REST ...`` |
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))  # the scenarios package beside this file

from scenarios.ingest import IngestAgent  # noqa: E402
from scenarios.mcp import McpAgent  # noqa: E402
from scenarios.mixed import MixedAgent  # noqa: E402
from scenarios.noisy import NoisyNeighbour, QuietTenant  # noqa: E402
from scenarios.rest import RestAgent  # noqa: E402
from scenarios.sdk import SdkAgent  # noqa: E402

__all__ = ["IngestAgent", "McpAgent", "MixedAgent", "NoisyNeighbour", "QuietTenant", "RestAgent", "SdkAgent"]
