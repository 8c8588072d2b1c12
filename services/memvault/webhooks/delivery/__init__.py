"""Sending the webhook outbox (issue 31): the SSRF guard (``addresses``), signing and posting one
delivery (``sender``), and the loop that claims due deliveries fairly across tenants, records each
outcome and schedules the retries (``runner``, SQL in ``repository``)."""
