"""Locust scenarios: one module per way of using memvault (loadtests/locustfile.py imports them)."""
