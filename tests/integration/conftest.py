"""Integration fixtures: one Kitsune node for the session (nats-server and the test site: tests/conftest.py)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from bridge.node import Node
from bridge.wiring import run_node
from driver import ChromiumBrowser
from tests.nats_access import NatsAccess
from tests.site import TestSite


@pytest.fixture(scope="session")
def node(nats_access: NatsAccess, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Node]:
    """One Kitsune node for the session: the shared nats-server, a real Chromium, every actor."""
    browser = ChromiumBrowser(downloads_dir=tmp_path_factory.mktemp("downloads"))
    started = run_node(browser, nats_access.node_config(step_timeout=10.0, fleet="session"))
    try:
        yield started
    finally:
        started.stop()


@pytest.fixture
def site(test_site: TestSite) -> TestSite:
    """The session's test site with its counters at zero and its slow routes at their 3 s."""
    test_site.reset()
    test_site.slow_seconds = 3.0
    return test_site
