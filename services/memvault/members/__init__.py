"""Self-serve sign-up, members of a tenant with roles, and invitations (issue 23)."""
