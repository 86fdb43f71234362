"""End-to-end fixtures: live ``kitsune serve`` nodes (real NATS, real Chromium, the test site) and
MCP clients of the SDK itself, over stdio (``kitsune mcp``) and streamable HTTP (``/mcp``).

The session's nats-server, test site and ``plain`` node come from tests/conftest.py.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from tests.integration.serving import Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

APPROVAL_WAIT = 2.0
"""Seconds the asking node's gateway keeps a direct call's approval prompt open (KITSUNE_APPROVAL_WAIT)."""


@contextmanager
def _environment(**values: str) -> Iterator[None]:
    saved = {name: os.environ.get(name) for name in values}
    os.environ.update(values)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


@pytest.fixture(scope="session")
def asking(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node that holds every write for approval (ask_before_act); its /mcp prompts stay open 2 s on a call."""
    with _environment(KITSUNE_APPROVAL_WAIT=str(APPROVAL_WAIT)):
        running = serve(tmp_path_factory.mktemp("asking"), nats_access,
                        {"caps": ["core", "automation"], "ask_before_act": True})
    yield running
    assert running.stop() == 0


@pytest.fixture
def site(test_site: TestSite) -> TestSite:
    test_site.reset()
    return test_site
