"""Background jobs. RQ queues when MEMVAULT_REDIS_URL is set; the job functions arrive with the
workers issue (extraction, dedup, decay, re-embedding)."""

QUEUES: tuple[str, ...] = ("extraction", "maintenance")
