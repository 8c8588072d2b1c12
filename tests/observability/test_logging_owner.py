"""Building the app leaves logging as it found it: how logs go out is memvault's choice (`memvault
serve` configures them) or its host's, never the MCP SDK's. The SDK used to put a rich handler on
the root logger at INFO, so that in an app built by tests, benchmarks or another ASGI server every
access log line was rendered by rich (milliseconds of CPU a request)."""

from __future__ import annotations

import subprocess
import sys
import textwrap

PROBE = textwrap.dedent(
    """
    import logging

    from memvault.mcp.runtime import Runtime
    from memvault.mcp.server import build_server

    build_server(Runtime(api=lambda: None), "core")
    build_server(Runtime(api=lambda: None), "extended")
    root = logging.getLogger()
    print(len(root.handlers), logging.getLevelName(root.level))
    """
)


def test_building_the_mcp_server_adds_no_log_handler() -> None:
    # A fresh interpreter: inside pytest the root logger already has pytest's handlers, which
    # would hide what the SDK does to a program that has none.
    out = subprocess.run([sys.executable, "-c", PROBE], capture_output=True, text=True, check=True, timeout=120)

    assert out.stdout.split() == ["0", "WARNING"]
