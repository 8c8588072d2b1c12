"""The MCP tests' served app, for timing MCP calls (test_status_page.py)."""

from tests.mcp.conftest import base_url  # noqa: F401 - a fixture
