"""The account dashboard (/dashboard): a fourth door onto the facade. Each page signs the person
in by the session cookie (websessions/), acts as that member's Principal and calls the facade like
REST and MCP do; no SQL here and no second copy of a rule (role, tenant, namespace reach)."""
