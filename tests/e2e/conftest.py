"""End-to-end fixtures: live ``kitsune serve`` nodes (real NATS, real Chromium, the test site) and
MCP clients of the SDK itself, over stdio (``kitsune mcp``) and streamable HTTP (``/mcp``).

The session's nats-server, test site and its ``plain`` and ``asking`` nodes come from tests/conftest.py.
"""

from __future__ import annotations

import pytest

from tests.site import TestSite


@pytest.fixture
def site(test_site: TestSite) -> TestSite:
    test_site.reset()
    return test_site
