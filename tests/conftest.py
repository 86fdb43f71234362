"""Fixtures every suite shares: one real nats-server and one test site for the whole session.

No pykka actor outlives the session, and none outlives the unit test that started it (a unit test
that leaves one running fails). Integration tests are not checked one by one: the session's node
starts tab actors during the tests that open tabs, and they belong to it until it stops.

``KITSUNE_TEST_NATS_URL=nats://host:port`` runs the suites against an existing server (JetStream
enabled) instead of starting one, as ``KITSUNE_TEST_NATS_USER`` with the password in
``KITSUNE_TEST_NATS_PASSWORD`` if it asks for credentials. A missing ``nats-server`` fails the
run: it never skips. The embedded server requires its own generated credentials, and lets its
user use every fleet's subjects (tests run many fleets), within the node's permissions otherwise.

Under pytest-xdist (``scripts/test`` runs three workers, each test file whole on one) every worker is a
session of its own: its own nats-server, test sites, node and browsers, so no name, port or stream is
shared between workers. An external server would be shared: with one, the run needs a single worker.
The files that start nodes and browsers are collected first, the unit tests last, so that the workers
end together (xdist hands out whole files in collection order); the type check's test comes after them all,
its mypy having run in the background since the session began (tests/static/typecheck.py).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pykka
import pytest
from xdist.remote import Producer
from xdist.scheduler import LoadFileScheduling

from actors.nats_server import EmbeddedNats
from core.settings import NatsAuth
from messages.errors import KitsuneError
from tests.integration.persist_sessions import KEY
from tests.integration.serving import TENANTS, Served, serve
from tests.nats_access import PASSWORD_ENV, NatsAccess
from tests.site import TestSite
from tests.static.typecheck import TEST as TYPECHECK_TEST
from tests.static.typecheck import Typecheck

pytest_plugins = ["tests.nats_cluster",  # fixture nats_cluster: a 3-server cluster, for the tests that ask
                  "tests.integration.task_fleet"]  # fixture fleet: the task tests' two nodes
NATS_URL_ENV = "KITSUNE_TEST_NATS_URL"
APPROVAL_WAIT = 2.0
"""Seconds the ``asking`` node's gateway keeps a direct call's approval prompt open (KITSUNE_APPROVAL_WAIT)."""
TESTS = Path(__file__).parent
UNIT_TESTS = TESTS / "unit"
SLOWEST_FIRST = ("static", "e2e", "integration", "docs", "site", "unit")
"""The test folders, those whose files take longest first (mypy; nodes, browsers, servers; pure code last)."""
ONE_WORKER = {
    "fleet": tuple(f"tests/integration/{name}.py" for name in (
        "test_task_checkpoint", "test_task_scopes", "test_task_tab_scope", "test_task_takeover_fork",
        "test_task_tokens", "test_tasks")),
    "persisting": ("tests/e2e/test_mcp_sessions_persist.py", "tests/integration/test_sessions_persist.py"),
    "core_only": ("tests/e2e/test_manners.py", "tests/integration/test_http.py"),
    "tenants": tuple(f"tests/integration/{name}.py" for name in (
        "test_agent_policy", "test_one_shot_approval", "test_site_tool_limits", "test_snapshot_api")),
}
"""Fixtures of the session that some files alone use, and those files: each group runs whole on one xdist worker,
so that the fixture starts once a run, not once on each worker that runs one of its files."""
_GROUP_OF = {file: group for group, files in ONE_WORKER.items() for file in files}


class _FilesAndGroups(LoadFileScheduling):  # type: ignore[misc]  # xdist ships no types
    """xdist's ``--dist loadfile``, with each group of :data:`ONE_WORKER` handed out as one file."""

    def _split_scope(self, nodeid: str) -> str:
        file: str = super()._split_scope(nodeid)
        return _GROUP_OF.get(file, file)


@pytest.hookimpl(optionalhook=True)
def pytest_xdist_make_scheduler(config: pytest.Config, log: Producer) -> LoadFileScheduling | None:
    """The scheduler of ``--dist loadfile`` (``scripts/test``'s): :class:`_FilesAndGroups`."""
    return _FilesAndGroups(config, log) if config.getvalue("dist") == "loadfile" else None


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Order the files by :data:`SLOWEST_FIRST` (a stable sort: each file's tests keep their order), the type
    check's last."""
    def rank(item: pytest.Item) -> int:
        if item.nodeid == TYPECHECK_TEST:
            return len(SLOWEST_FIRST) + 1
        folder = item.path.relative_to(TESTS).parts[0] if item.path.is_relative_to(TESTS) else ""
        return SLOWEST_FIRST.index(folder) if folder in SLOWEST_FIRST else len(SLOWEST_FIRST)

    items.sort(key=rank)


@pytest.fixture(scope="session", autouse=True)
def _no_actor_outlives_the_session() -> Iterator[None]:
    yield
    pykka.ActorRegistry.stop_all(timeout=30)


@pytest.fixture(autouse=True)
def _no_actor_outlives_a_unit_test(request: pytest.FixtureRequest) -> Iterator[None]:
    if not request.path.is_relative_to(UNIT_TESTS):
        yield
        return
    before = {ref.actor_urn for ref in pykka.ActorRegistry.get_all()}
    yield
    left = [ref for ref in pykka.ActorRegistry.get_all() if ref.actor_urn not in before]
    for ref in left:
        ref.stop(timeout=30)
    assert not left, f"the test left actors running: {sorted(ref.actor_class.__name__ for ref in left)}"


@pytest.fixture(scope="session", autouse=True)
def typecheck(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Typecheck]:
    """The session's mypy run, started now if the session runs its test; kept in the run's temporary folder,
    which every xdist worker shares (each has its own folder in it)."""
    base = tmp_path_factory.getbasetemp()
    checking = Typecheck(base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base)
    if any(item.nodeid == TYPECHECK_TEST for item in request.session.items):
        checking.start()
    yield checking
    checking.finish()


@pytest.fixture(scope="session")
def anyio_backend() -> str:
    """Async tests run on asyncio only (the runtime's loop)."""
    return "asyncio"


@pytest.fixture(scope="session")
def nats_access() -> Iterator[NatsAccess]:
    """A NATS server with JetStream shared by the whole session, and its credentials."""
    given = os.environ.get(NATS_URL_ENV, "").strip()
    if given:
        if int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")) > 1:
            pytest.fail(f"{NATS_URL_ENV} is one server for every xdist worker: run with -n 0", pytrace=False)
        user = os.environ.get("KITSUNE_TEST_NATS_USER") or None
        yield NatsAccess(given, NatsAuth(user=user, password=os.environ.get(PASSWORD_ENV) if user else None))
        return
    server = EmbeddedNats(fleet=None)
    try:
        url = server.start()
    except KitsuneError as e:
        pytest.fail(f"integration tests need nats-server (or {NATS_URL_ENV}): {e.message}", pytrace=False)
    try:
        yield NatsAccess(url, server.auth, server.admin)
    finally:
        server.stop()


@pytest.fixture(scope="session")
def test_site() -> Iterator[TestSite]:
    """The test web site, shared by the session; tests reset it as they need."""
    with TestSite(slow_seconds=3.0) as served:
        yield served


@pytest.fixture(scope="session")
def other_site() -> Iterator[TestSite]:
    """A second test site for the session, on another port: another origin than test_site's."""
    with TestSite() as served:
        yield served


@pytest.fixture(scope="session")
def plain(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A ``kitsune serve`` node with both capability groups and no ask-before-act, shared by the session's
    tests (end-to-end and integration alike): a test finds other tests' tabs and calls on it."""
    running = serve(tmp_path_factory.mktemp("plain"), nats_access, {"caps": ["core", "automation"]})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="session")
def core_only(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node of the default settings, with the core group alone, shared as ``plain`` is."""
    running = serve(tmp_path_factory.mktemp("core-only"), nats_access, {})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="session")
def tenants(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node of agents with policies of their own (``serving.TENANTS``; both groups for the others), shared as
    ``plain`` is."""
    running = serve(tmp_path_factory.mktemp("tenants"), nats_access,
                    {"agents": TENANTS, "caps": ["core", "automation"]})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="session")
def persisting(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    """A node that keeps persistent sessions (sealed with ``persist_sessions.KEY``), shared by their tests over HTTP
    and MCP; each test's sessions have names of its own."""
    running = serve(tmp_path_factory.mktemp("persisting"), nats_access,
                    {"caps": ["core", "automation"], "sessions": {"persist_key": KEY}})
    yield running
    assert running.stop() == 0


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
    """A node that holds every write for approval (ask_before_act), shared by the session's tests as ``plain`` is;
    its /mcp prompts stay open 2 s on a call."""
    with _environment(KITSUNE_APPROVAL_WAIT=str(APPROVAL_WAIT)):
        running = serve(tmp_path_factory.mktemp("asking"), nats_access,
                        {"caps": ["core", "automation"], "ask_before_act": True})
    yield running
    assert running.stop() == 0
