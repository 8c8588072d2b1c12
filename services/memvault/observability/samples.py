"""prometheus_client's multiprocess sample files, without importing prometheus_client: the serving
parent reads them before its workers set the library up."""

from __future__ import annotations

import os
from pathlib import Path


def writer_alive(samples: Path) -> bool:
    """Whether the process that writes ``samples`` (prometheus_client names them ``<kind>_<pid>.db``)
    still runs: a live process keeps writing to the file it opened, so deleting it would lose them."""
    try:
        pid = int(samples.stem.rsplit("_", 1)[1])
    except (IndexError, ValueError):
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # another user's process: alive
        return True
    return True
