"""Fixtures every suite shares: one real nats-server and one test site for the whole session.

``KITSUNE_TEST_NATS_URL=nats://host:port`` runs the suites against an existing server (JetStream
enabled) instead of starting one. A missing ``nats-server`` fails the run: it never skips.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from bridge.nats_server import EmbeddedNats
from messages.errors import KitsuneError
from tests.site import TestSite

NATS_URL_ENV = "KITSUNE_TEST_NATS_URL"


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio only (the runtime's loop)."""
    return "asyncio"


@pytest.fixture(scope="session")
def nats_url() -> Iterator[str]:
    """The URL of a NATS server with JetStream, shared by the whole session."""
    given = os.environ.get(NATS_URL_ENV, "").strip()
    if given:
        yield given
        return
    server = EmbeddedNats()
    try:
        url = server.start()
    except KitsuneError as e:
        pytest.fail(f"integration tests need nats-server (or {NATS_URL_ENV}): {e.message}", pytrace=False)
    try:
        yield url
    finally:
        server.stop()


@pytest.fixture(scope="session")
def test_site() -> Iterator[TestSite]:
    """The test web site, shared by the session; tests reset it as they need."""
    with TestSite(slow_seconds=3.0) as served:
        yield served
