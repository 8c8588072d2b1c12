"""Background jobs. A job is a row in `jobs` (the truth) plus its id on a queue: RQ queues when
MEMVAULT_REDIS_URL is set, a thread pool inside the server when not. See docs/workers.md."""

QUEUES: tuple[str, ...] = ("extraction", "maintenance")


def queue_for(kind: str) -> str:
    """Extraction keeps its own queue, so a long maintenance run never delays fresh memories."""
    return "extraction" if kind == "extraction" else "maintenance"
