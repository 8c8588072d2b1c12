"""The dashboard's sign-in sessions: a random cookie token for a tenant user, kept as its hash."""
