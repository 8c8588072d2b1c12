"""SLOW (one to two minutes on a busy 2-core machine): the pods of infra/k8s/overlays/production,
run as the manifests run them, on a read-only root filesystem.

Each container's command and environment come from the rendered manifests (its args, the
ConfigMap, the Secret's keys filled with a fresh database on the embedded PostgreSQL and the test
Redis, its own env, the image's ENV). Each runs in a mount namespace of its own where `/` is
remounted read-only and only /tmp stays writable, as `readOnlyRootFilesystem: true` with the
/tmp emptyDir gives a pod; the pre-exported ONNX model is read-only too, as /opt/memvault/onnx is
in the image. Ports are moved to free ones (this machine is shared). The migrate Job's command
migrates the fresh database, then the api answers its probes and its ServiceMonitor's scrape
(with the token, and 401 without), the worker serves its metrics port, the scheduler stays up,
and none of them met a read-only file. Needs root and unshare(1) (CI has both); skipped without.

Also: migrations started at once (the migrate Job and api replicas, which upgrade at start too)
all succeed: the later ones wait for the first (db/migrate.py's advisory lock).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import httpx
import pytest
from sqlalchemy import create_engine, text

from memvault.db.urls import DatabaseUrls
from memvault.embeddings.local import LocalEmbedder, default_onnx_dir
from tests.infra.k8s_manifests import config_data, find, pod_spec, rendered
from tests.servers import free_port

needs_unshare = pytest.mark.skipif(
    os.geteuid() != 0 or shutil.which("unshare") is None, reason="needs root and unshare for a read-only root"
)

# /tmp stays writable (a mount of its own), the ONNX folder ($1) and then / become read-only.
SANDBOX = (
    'mount --bind /tmp /tmp && mount --bind "$1" "$1" && mount -o remount,bind,ro "$1" '
    '&& mount -o remount,bind,ro / && shift && exec "$@"'
)
# The image's own ENV (infra/docker/Dockerfile), with its home on the read-only root.
IMAGE_ENV = {"PYTHONUNBUFFERED": "1", "PYTHONDONTWRITEBYTECODE": "1", "HOME": "/root"}
TOKEN = "k8s-test-metrics-token"


@dataclass
class Pod:
    name: str
    proc: subprocess.Popen[bytes]
    out: Path

    def logs(self) -> str:
        return self.out.read_text(errors="replace")[-6000:]


def sandboxed(argv: list[str], env: dict[str, str], out: Path) -> subprocess.Popen[bytes]:
    onnx = str(default_onnx_dir())
    with out.open("wb") as sink:
        return subprocess.Popen(
            ["unshare", "-m", "--propagation", "private", "sh", "-c", SANDBOX, "sh", onnx, *argv],
            env=env,
            stdout=sink,
            stderr=subprocess.STDOUT,
        )


@pytest.fixture
def database(pg_uri: str, pg_urls: DatabaseUrls) -> Iterator[tuple[str, str]]:
    """(owner URL, app URL) of a database of its own: the migrate Job starts from nothing, and the
    worker's sweeps see no other test's jobs. ``pg_urls`` has given the app role its login."""
    name = f"memvault_k8s_{uuid.uuid4().hex[:10]}"
    admin = create_engine(pg_uri.replace("postgresql://", "postgresql+psycopg://", 1), isolation_level="AUTOCOMMIT")
    with admin.connect() as conn:
        conn.execute(text(f"CREATE DATABASE {name}"))
    owner = pg_uri.replace("/postgres?", f"/{name}?", 1)
    assert owner != pg_uri
    app = owner.replace("postgresql://postgres:@", "postgresql://memvault_app@", 1)
    try:
        yield owner, app
    finally:
        with admin.connect() as conn:
            conn.execute(text(f"DROP DATABASE IF EXISTS {name} WITH (FORCE)"))
        admin.dispose()


def container_env(workload: str, secret: dict[str, str]) -> tuple[list[str], dict[str, str]]:
    """The argv and environment the production manifests give this workload's container."""
    objects = rendered("overlays/production")
    container = pod_spec(find(objects, *workload.split("/")))["containers"][0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")}
    env |= IMAGE_ENV | {"MEMVAULT_EMBEDDING_ONNX_DIR": str(default_onnx_dir())}
    # The image puts its virtualenv first on PATH (/opt/memvault/bin): `memvault` is found there.
    env["PATH"] = f"{Path(sys.executable).parent}:{env['PATH']}"
    env |= config_data(objects) | secret
    env |= {e["name"]: e["value"] for e in container.get("env", [])}
    return container["command"] + container["args"], env


def with_option(argv: list[str], option: str, value: str) -> list[str]:
    argv = list(argv)
    argv[argv.index(option) + 1] = value
    return argv


def wait_for(url: str, pods: list[Pod], timeout: float = 240.0, **kwargs: object) -> httpx.Response:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        for pod in pods:
            if pod.proc.poll() is not None:
                pytest.fail(f"{pod.name} exited with {pod.proc.returncode}\n{pod.logs()}")
        try:
            resp = httpx.get(url, timeout=5, **kwargs)  # type: ignore[arg-type]
            if resp.status_code == 200:
                return resp
        except httpx.TransportError:
            pass
        time.sleep(0.5)
    pytest.fail(f"{url} did not answer 200 within {timeout} s\n" + "\n".join(p.logs() for p in pods))


@needs_unshare
def test_the_sandbox_is_read_only_but_for_tmp(tmp_path: Path) -> None:
    default_onnx_dir().mkdir(parents=True, exist_ok=True)  # bind-mounted read-only: it must exist
    probe = f"/tmp/k8s-ro-{uuid.uuid4().hex}"
    script = f"touch {probe} && rm {probe} && touch /root/k8s-ro-probe"
    proc = sandboxed(["sh", "-c", script], dict(os.environ), tmp_path / "out")
    assert proc.wait(timeout=30) != 0
    assert "Read-only file system" in (tmp_path / "out").read_text()
    assert not Path("/root/k8s-ro-probe").exists()


@needs_unshare
def test_the_pods_run_on_a_read_only_root(
    tmp_path: Path, database: tuple[str, str], redis_url: str, embedder: LocalEmbedder
) -> None:
    owner, app = database
    secret = {
        "MEMVAULT_DATABASE_URL": owner,
        "MEMVAULT_APP_DATABASE_URL": app,
        "MEMVAULT_REDIS_URL": redis_url,
        "MEMVAULT_METRICS_TOKEN": TOKEN,
    }

    argv, env = container_env("Job/memvault-migrate", secret)
    migrate = sandboxed(argv, env, tmp_path / "migrate.log")
    assert migrate.wait(timeout=180) == 0, (tmp_path / "migrate.log").read_text()
    assert "database at revision" in (tmp_path / "migrate.log").read_text()

    api_port, metrics_port = free_port(), free_port()
    pods: list[Pod] = []
    try:
        argv, env = container_env("Deployment/memvault-api", secret)
        argv = with_option(argv, "--port", str(api_port))
        pods.append(Pod("api", sandboxed(argv, env, tmp_path / "api.log"), tmp_path / "api.log"))
        argv, env = container_env("Deployment/memvault-worker", secret)
        argv = with_option(argv, "--metrics-port", str(metrics_port))
        pods.append(Pod("worker", sandboxed(argv, env, tmp_path / "worker.log"), tmp_path / "worker.log"))
        argv, env = container_env("Deployment/memvault-scheduler", secret)
        pods.append(Pod("scheduler", sandboxed(argv, env, tmp_path / "scheduler.log"), tmp_path / "scheduler.log"))

        base = f"http://127.0.0.1:{api_port}"
        wait_for(f"{base}/healthz", pods)
        ready = wait_for(f"{base}/readyz", pods)
        assert ready.json()["database"] == {"ok": True}
        assert ready.json()["redis"] == {"configured": True, "ok": True}
        assert httpx.get(f"{base}/metrics", timeout=10).status_code == 401
        scrape = httpx.get(f"{base}/metrics", headers={"Authorization": f"Bearer {TOKEN}"}, timeout=10)
        assert scrape.status_code == 200 and "memvault_http_requests_total" in scrape.text
        worker_metrics = wait_for(f"http://127.0.0.1:{metrics_port}/metrics", pods)
        assert "memvault_job" in worker_metrics.text
        time.sleep(2)
        for pod in pods:
            assert pod.proc.poll() is None, f"{pod.name} stopped\n{pod.logs()}"
    finally:
        for pod in pods:
            pod.proc.terminate()
        for pod in pods:
            try:
                pod.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                pod.proc.kill()
                pod.proc.wait()
    for pod in pods:
        assert "Read-only file system" not in pod.logs(), f"{pod.name}\n{pod.logs()}"
    assert pods[0].proc.returncode == 0, pods[0].logs()  # the api shut down cleanly on SIGTERM


def test_migrations_started_at_once_all_succeed(tmp_path: Path, database: tuple[str, str]) -> None:
    """Without the lock one of two failed, three times in three (a duplicate object or a
    serialization error, whichever migration they met in)."""
    owner, _ = database
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMVAULT_")} | {"MEMVAULT_DATABASE_URL": owner}
    memvault = str(Path(sys.executable).with_name("memvault"))
    logs = [tmp_path / f"migrate-{i}.log" for i in range(3)]
    procs = []
    for log in logs:
        with log.open("wb") as sink:
            procs.append(subprocess.Popen([memvault, "migrate"], env=env, stdout=sink, stderr=subprocess.STDOUT))
    codes = [p.wait(timeout=300) for p in procs]
    assert codes == [0, 0, 0], "\n".join(log.read_text()[-3000:] for log in logs)
    from memvault.db import migrate
    from memvault.db.urls import resolve

    head = migrate.current_revision(resolve(owner, None, "memvault_app", embedded=False).owner)
    assert all(f"database at revision {head}" in log.read_text() for log in logs)
