"""Maintenance of a namespace's memories: deduplication, decay, promotion and re-embedding, run
as jobs on the `maintenance` queue, alone or together through `POST .../organize`.
See docs/workers.md."""
