# Sourced by the other scripts: a project virtualenv with memvault installed, on any fresh machine.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$ROOT"
VENV="${MEMVAULT_VENV:-$ROOT/.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  PY="$(command -v python3.11 || command -v python3)"
  "$PY" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))' \
    || { echo "memvault needs Python 3.11 (found $("$PY" --version))" >&2; exit 1; }
  "$PY" -m venv "$VENV"
fi
# torch is pinned to 2.13.0, which pip takes from this kind of machine's local wheel
# (a looser pin would download a multi-GB CUDA build).
install_memvault() {
  "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check -e "$ROOT[$1]"
}
