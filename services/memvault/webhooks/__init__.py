"""Webhooks (issue 31): a tenant's subscriptions, an outbox of deliveries written in the same
transaction as the change that caused each event, and a sender that signs them (Standard
Webhooks) and retries until the receiver answers 2xx."""
