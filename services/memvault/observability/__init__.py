"""What operators see of a running server: Prometheus metrics (``metrics``), structured logs
(``logs``), optional OpenTelemetry traces (``tracing``) and the /metrics route (``router``).
See docs/operations.md, "Metrics and logs"."""
