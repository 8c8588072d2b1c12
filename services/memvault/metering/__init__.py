"""Usage metering: what each tenant used, by door, namespace, key and operation (issue 23)."""
