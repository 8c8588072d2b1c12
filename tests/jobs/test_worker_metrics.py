"""A real `memvault worker`'s job metrics: in the PROMETHEUS_MULTIPROC_DIR a server on the same
host sums at its scrape, and on the worker's own `--metrics-port` for one on another host."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import httpx
import pytest
from prometheus_client import CollectorRegistry, generate_latest, multiprocess
from prometheus_client.parser import text_string_to_metric_families

from memvault.config import Settings
from memvault.serving import metrics_dir
from tests.conftest import Tenant
from tests.jobs.helpers import Worker, new_id, start, wait_for_job
from tests.jobs.test_tasks import events_body, ingest
from tests.servers import free_port

JOB_COUNT = "memvault_job_duration_seconds_count"


def succeeded_extractions(text: str) -> float:
    return sum(
        s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == JOB_COUNT and s.labels == {"kind": "extraction", "status": "succeeded"}
    )


@pytest.mark.slow  # a real `memvault worker` process, which loads the embedding model
async def test_a_worker_s_job_metrics_reach_the_shared_folder_and_its_own_port(
    client: httpx.AsyncClient,
    tenant_a: Tenant,
    settings: Settings,
    redis_url: str,
    tmp_path: Path,
    workers: list[Worker],
) -> None:
    shared, port = tmp_path / "metrics", free_port()
    worker = start(
        workers,
        settings,
        redis_url,
        tmp_path,
        recover=False,
        env={"PROMETHEUS_MULTIPROC_DIR": str(shared)},
        args=["--metrics-port", str(port)],
    )
    out = await ingest(client, tenant_a, events_body("s-" + new_id()))
    job = await wait_for_job(client, tenant_a.headers, out["job_id"])
    assert job["status"] == "succeeded", (job, worker.log.read_text()[-3000:])

    # What a server's /metrics on this host reads (observability/metrics.render, multiprocess mode).
    registry = CollectorRegistry()
    multiprocess.MultiProcessCollector(registry, path=str(shared))
    assert succeeded_extractions(generate_latest(registry).decode()) == 1
    async with httpx.AsyncClient() as scraper:
        own = await scraper.get(f"http://127.0.0.1:{port}/metrics")
    assert own.status_code == 200
    assert succeeded_extractions(own.text) == 1


def test_a_server_starting_on_a_shared_folder_keeps_the_files_of_live_workers(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    gone = subprocess.run([sys.executable, "-c", "import os; print(os.getpid())"], capture_output=True, text=True)
    dead_pid = int(gone.stdout)
    live = tmp_path / f"histogram_{os.getppid()}.db"  # the test runner's parent: alive throughout
    stale = tmp_path / f"histogram_{dead_pid}.db"
    for f in (live, stale):
        f.write_bytes(b"\0" * 8)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))

    with metrics_dir(2):
        assert live.exists(), "a running worker's samples were deleted"
        assert not stale.exists(), "an earlier run's samples would be summed in"
