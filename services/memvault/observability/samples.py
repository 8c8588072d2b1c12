"""prometheus_client's multiprocess sample files, without importing prometheus_client: the serving
parent reads them before its workers set the library up."""

from __future__ import annotations

import os
from pathlib import Path


def writer_pid(samples: Path) -> int | None:
    """The pid in a sample file's name (prometheus_client names them ``<kind>_<pid>.db``); None
    when the name carries none."""
    pid = samples.stem.rpartition("_")[2]
    return int(pid) if pid.isdigit() else None


def running(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True


def writer_alive(samples: Path) -> bool:
    """Whether the process that writes ``samples`` still runs: a live process keeps writing to the
    file it opened, so deleting it would lose them."""
    pid = writer_pid(samples)
    return pid is not None and running(pid)
