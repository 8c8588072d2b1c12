"""OAuth 2.1 sign-in for remote MCP clients: memvault as the authorization server of its tenants
and the /mcp endpoint as the protected resource (docs/auth.md).

Flow: a client discovers the metadata, registers (or names a metadata document), sends the user to
/oauth/authorize with PKCE S256 and `resource` = the MCP URL; the user signs in and consents to
scopes and namespaces; the client swaps the code for a short-lived JWT access token and a refresh
token that rotates on every use. issuer.py holds what the flow stands on (metadata, signing keys,
clients), signin.py the authorization endpoint (sign-in, consent, code), tokens.py the token
endpoint, the access-token check at /mcp and revocation; accounts.py the tenant's users and grants.
"""
