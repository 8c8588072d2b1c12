"""The embedded PostgreSQL's own configuration: shared_buffers sized for the machine."""

from __future__ import annotations

import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from memvault.config import Settings
from memvault.db import embedded

GIB = 1024**3


@pytest.mark.parametrize(
    ("memory", "expected"),
    [(24 * GIB, "6144MB"), (2 * GIB, "512MB"), (256 * 1024**2, "128MB"), (128 * GIB, "8192MB")],
)
def test_auto_is_a_quarter_of_memory_within_bounds(memory: int, expected: str) -> None:
    assert embedded.shared_buffers("auto", memory) == expected


def test_an_explicit_size_is_kept_and_a_wrong_one_refused() -> None:
    assert embedded.shared_buffers("2GB", 24 * GIB) == "2GB"
    with pytest.raises(ValueError, match="shared_buffers"):
        embedded.shared_buffers("2 gigs")
    with pytest.raises(ValueError, match="embedded_shared_buffers"):
        Settings(_env_file=None, embedded_shared_buffers="lots")


def test_configure_includes_its_file_once_and_reports_changes(tmp_path: Path) -> None:
    conf = tmp_path / "postgresql.conf"
    conf.write_text("shared_buffers = 128MB\n")
    assert embedded.configure(tmp_path, {"shared_buffers": "1GB"})
    assert not embedded.configure(tmp_path, {"shared_buffers": "1GB"})
    assert embedded.configure(tmp_path, {"shared_buffers": "2GB"})
    # initdb's own line stays; ours is read after it and wins.
    lines = conf.read_text().splitlines()
    assert lines[0] == "shared_buffers = 128MB"
    assert lines.count(embedded.INCLUDE) == 1
    assert (tmp_path / embedded.CONF_FILE).read_text() == "shared_buffers = '2GB'\n"


@pytest.fixture()
def data_dir() -> Iterator[Path]:
    # Not pytest's tmp_path: the server may run as its own system user (see tests/conftest.py).
    folder = Path(tempfile.mkdtemp(prefix="memvault-test-embedded-"))
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_the_embedded_server_runs_with_its_settings_from_its_next_start(data_dir: Path) -> None:
    for size in ("192MB", "160MB"):
        server = embedded.server(data_dir / "pg", embedded.settings(size))
        try:
            with psycopg.connect(server.get_uri()) as conn:
                assert conn.execute("SHOW shared_buffers").fetchone() == (size,)
                assert conn.execute("SHOW autovacuum_naptime").fetchone() == ("15s",)
        finally:
            server.cleanup()
