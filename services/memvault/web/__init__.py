"""The web pages' shared parts: Jinja2 templates rendered on the server, our one stylesheet, and
the headers every page carries. Pages are a door like REST and MCP: they call the facade only."""
