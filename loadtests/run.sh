#!/usr/bin/env bash
# Seed, start the stack asked for, run locust headless, print a summary; see loadtests/run.py --help
# and docs/operations.md ("Load testing"). Python: $MEMVAULT_PYTHON, else the repository's .venv,
# else python3 on PATH.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PY="${MEMVAULT_PYTHON:-$ROOT/.venv/bin/python}"
[ -x "$PY" ] || PY="$(command -v python3)"
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
exec "$PY" "$ROOT/loadtests/run.py" "$@"
