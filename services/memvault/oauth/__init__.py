"""OAuth 2.1 sign-in for remote MCP clients: memvault as the authorization server of its tenants
and the /mcp endpoint as the protected resource (docs/auth.md)."""
