"""Policy on a live ``kitsune serve``: read-only mode, URL lists where the browser goes, ask-before-act.

The allowed site is served on 127.0.0.3; the denied one is the session's site on 127.0.0.1, so
every encoding of 127.0.0.1 must be refused, and its request counter proves nothing reached it.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from bridge.node import Node
from bridge.wiring import run_node
from core.policy import Policy
from core.settings import CheckpointConfig
from driver import ChromiumBrowser
from messages.commands import Click, parse_body
from messages.contract import CHECKPOINT_CAPACITY
from messages.results import Failed, Failure
from tests.integration.serving import Served, open_tab, serve
from tests.nats_access import NatsAccess
from tests.nodes import open_user_tab, resume_call, run_call
from tests.site import ANY, TestSite


@pytest.fixture(scope="module")
def allowed() -> Iterator[TestSite]:
    with TestSite(host="127.0.0.3") as site:
        yield site


@pytest.fixture
def denied(test_site: TestSite) -> TestSite:
    test_site.reset()
    return test_site


def _serve(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess, **config: Any) -> Iterator[Served]:
    running = serve(tmp_path_factory.mktemp("policy"), nats_access, {"caps": ["core", "automation"], **config})
    yield running
    assert running.stop() == 0


@pytest.fixture(scope="module")
def url_lists(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    yield from _serve(tmp_path_factory, nats_access, urls={"deny": ["127.0.0.1", "denied.test"]})


@pytest.fixture(scope="module")
def read_only(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    yield from _serve(tmp_path_factory, nats_access, read_only=True)


def _answer(answer: httpx.Response, status: int) -> dict[str, Any]:
    """The JSON body of ``answer``, whose HTTP status must be ``status``: a direct route answers an error
    outcome with its code's status (``messages.errors.ERROR_CODES``: ``url_denied``, ``read_only`` and a hold's
    ``needs_user`` 403)."""
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def _act(client: httpx.Client, command: dict[str, Any], status: int = 200, **extra: Any) -> dict[str, Any]:
    """``POST /api/act`` of ``command``; its answer's status must be ``status``."""
    return _answer(client.post("/api/act", json={"command": command, **extra}), status)


def _batch(client: httpx.Client, commands: list[dict[str, Any]], tab: int) -> dict[str, Any]:
    """A batch: its answer is 200 whatever its steps' outcomes (their codes are in its results)."""
    return _answer(client.post("/api/batch", json={"commands": commands, "tabId": tab}), 200)


# --- URL lists ------------------------------------------------------------------------------------


@pytest.mark.parametrize("spelling", [
    "http://127.0.0.1:{port}/policy/target",
    "http://127.1:{port}/policy/target",
    "http://0x7f000001:{port}/policy/target",
    "http://2130706433:{port}/policy/target",
    "http://[::ffff:127.0.0.1]:{port}/policy/target",
    "http://0177.0.0.1:{port}/policy/target",
    "http://allowed.test@127.0.0.1:{port}/policy/target",
    "http://DENIED.test./policy/target",
])
def test_navigation_to_a_denied_host_in_any_spelling_is_refused_before_sending(
        url_lists: Served, allowed: TestSite, denied: TestSite, spelling: str) -> None:
    with url_lists.client() as client:
        tab = open_tab(client, allowed.url("/text"))
        port = denied.base.rsplit(":", 1)[1]
        result = _act(client, {"action": "navigate", "tabId": tab, "url": spelling.format(port=port)}, 403)
        assert (result["status"], result["code"]) == ("failed", "url_denied")
    assert denied.count(ANY) == 0


@pytest.mark.parametrize("url", ["data:text/html,<h1>x</h1>", "javascript:alert(1)", "file:///etc/passwd",
                                 "view-source:http://127.0.0.3/", "chrome://version", "http://[::1"])
def test_only_http_https_and_about_blank_are_allowed(url_lists: Served, allowed: TestSite, url: str) -> None:
    with url_lists.client() as client:
        tab = open_tab(client, allowed.url("/text"))
        result = _act(client, {"action": "navigate", "tabId": tab, "url": url}, 403)
        assert (result["status"], result["code"]) == ("failed", "url_denied")
        assert result["state"]["reason"] in ("scheme", "unparseable")
        assert _act(client, {"action": "navigate", "tabId": tab, "url": "about:blank"})["status"] == "ok"


def test_a_new_tab_at_a_denied_url_is_refused(url_lists: Served, denied: TestSite) -> None:
    with url_lists.client() as client:
        answer = _answer(client.post("/api/tabs", json={"op": "open", "url": denied.url("/policy/target")}), 403)
        assert (answer["status"], answer["code"]) == ("failed", "url_denied")
    assert denied.count(ANY) == 0


def _page_action(client: httpx.Client, allowed: TestSite, page: str, target: str, button: str | None) -> int:
    tab = open_tab(client, allowed.url(f"{page}?to={target}"))
    if button is not None:
        assert _act(client, {"action": "click", "tabId": tab, "selector": button})["status"] == "ok"
    time.sleep(1.0)
    return tab


def test_a_redirect_to_a_denied_host_is_stopped_where_the_browser_goes(
        url_lists: Served, allowed: TestSite, denied: TestSite) -> None:
    with url_lists.client() as client:
        tab = open_tab(client, allowed.url("/text"))
        result = _act(client, {"action": "navigate", "tabId": tab,
                               "url": allowed.url(f"/redirect?to={denied.url('/policy/target')}")}, 403)
        assert result["status"] == "failed" and result["code"] == "url_denied", result
        assert _act(client, {"action": "title", "tabId": tab})["title"] != "Target"
    assert denied.count(ANY) == 0


@pytest.mark.parametrize(("page", "button", "result"), [
    ("/policy/open", "#open", None),
    ("/policy/fetch", "#fetch", "error TypeError"),
    ("/policy/frame", None, None),
    ("/policy/image", None, None),
    ("/policy/ws", "#ws", ""),
])
def test_what_the_page_itself_requests_from_a_denied_host_never_reaches_it(
        url_lists: Served, allowed: TestSite, denied: TestSite, page: str, button: str | None,
        result: str | None) -> None:
    target = denied.url("/policy/target") if page != "/policy/ws" else denied.base.replace("http", "ws") + "/ws"
    with url_lists.client() as client:
        tab = _page_action(client, allowed, page, target, button)
        if result is not None:
            shown = _act(client, {"action": "pageText", "tabId": tab, "selector": "#result"})["text"]
            assert shown.startswith(result) and not shown.startswith("ok") and shown != "open"
        titles = [t["title"] for t in client.get("/api/tabs").json()["tabs"]]
        assert "Target" not in titles
    assert denied.count(ANY) == 0


def test_service_workers_are_blocked(url_lists: Served, allowed: TestSite) -> None:
    with url_lists.client() as client:
        tab = _page_action(client, allowed, "/policy/sw", "", None)
        shown = _act(client, {"action": "pageText", "tabId": tab, "selector": "#result"})["text"]
        assert shown.startswith("error")


def test_an_allow_list_refuses_every_other_host(tmp_path: Path, nats_access: NatsAccess, allowed: TestSite,
                                                 denied: TestSite) -> None:
    running = serve(tmp_path, nats_access, {"caps": ["core"], "urls": {"allow": ["127.0.0.3"]}})
    try:
        with running.client() as client:
            tab = open_tab(client, allowed.url("/text"))
            result = _act(client, {"action": "navigate", "tabId": tab, "url": denied.url("/text")}, 403)
            assert (result["status"], result["code"], result["state"]["reason"]) == ("failed", "url_denied",
                                                                                     "not_allowed")
    finally:
        assert running.stop() == 0
    assert denied.count(ANY) == 0


# --- read-only mode ---------------------------------------------------------------------------------


def test_read_only_mode_refuses_opening_a_tab_over_http(read_only: Served, allowed: TestSite) -> None:
    allowed.reset()
    with read_only.client() as client:
        answer = _answer(client.post("/api/tabs", json={"op": "open", "url": allowed.url("/clicks")}), 403)
        assert (answer["status"], answer["code"]) == ("failed", "read_only")
    assert allowed.count(ANY) == 0


def test_read_only_mode_refuses_every_write_direct_in_a_container_and_in_a_resume(
        node: Node, allowed: TestSite) -> None:
    allowed.reset()
    tab = open_user_tab(node, allowed.url("/clicks"))
    node.owners.give(tab, "alice")
    batch = parse_body("batch", {"commands": [{"action": "waitFor", "selector": "#never", "timeout": 0.3},
                                              {"action": "click", "selector": "#hit"}], "tabId": tab})
    stopped = run_call(node, batch, agent="alice").body
    assert [p["status"] for p in stopped["progress"]] == ["failed", "skipped"]
    node.policy = Policy(read_only=True)
    try:
        outcome, _ = node.io.run(node.act("alice", Click(selector="#hit"), tab))
        assert outcome == Failed(Failure("Read-only mode: writes are refused; nothing was sent", "read_only"))
        fresh = run_call(node, parse_body("batch", {"commands": [{"action": "title"}, {"action": "click",
                                                                                 "selector": "#hit"}],
                                              "tabId": tab}), agent="alice").body
        assert [p["status"] for p in fresh["progress"]] == ["ok", "failed"]
        assert fresh["results"][1]["code"] == "read_only"
        resumed = resume_call(node, stopped["call"], stopped["resume_token"], {"0": "applied"}, agent="alice").body
        assert resumed["results"][1]["code"] == "read_only"  # resumed steps pass the policy as it is now
    finally:
        node.policy = Policy()
    time.sleep(0.3)
    assert allowed.count("POST /clicks/hit") == 0


# --- ask-before-act -----------------------------------------------------------------------------------


def _held(body: dict[str, Any], code: str = "needs_user") -> str:
    """The new confirm token in a hold's ``state``: a direct hold answers 403 with ``needs_user``, or with
    ``confirm_token_invalid`` when the token given was wrong, used or for another action."""
    assert (body["status"], body["code"]) == ("held", code), body
    token: str = body["state"]["confirm_token"]
    return token


def test_ask_before_act_holds_a_direct_write_with_a_confirm_token_bound_and_single_use(
        asking: Served, allowed: TestSite) -> None:
    allowed.reset()
    with asking.client("alice") as alice, asking.client("bob") as bob:
        opened = _answer(alice.post("/api/tabs", json={"op": "open", "url": allowed.url("/clicks")}), 403)
        token = _held(opened)
        assert isinstance(opened["call"], int)
        _held(_act(bob, {"action": "newTab", "url": allowed.url("/clicks")}, 403, confirm_token=token),
              "confirm_token_invalid")  # bound to the agent
        _held(_act(alice, {"action": "newTab", "url": allowed.url("/text")}, 403, confirm_token=token),
              "confirm_token_invalid")  # and the params
        done = _act(alice, {"action": "newTab", "url": allowed.url("/clicks")}, confirm_token=token)
        assert done["status"] == "ok"
        tab = done["tabId"]
        _held(_act(alice, {"action": "newTab", "url": allowed.url("/clicks")}, 403, confirm_token=token),
              "confirm_token_invalid")  # once

        click = {"action": "click", "tabId": tab, "selector": "#hit"}
        held = _act(alice, click, 403)
        assert allowed.count("POST /clicks/hit") == 0
        assert _act(alice, click, confirm_token=_held(held))["status"] == "ok"
        assert allowed.wait_for_count("POST /clicks/hit") == 1
        assert _act(alice, {"action": "title", "tabId": tab})["status"] == "ok"  # reads are never held


def test_a_held_step_stops_the_call_and_stays_held_on_resume_until_confirmed_and_applied(
        asking: Served, allowed: TestSite) -> None:
    allowed.reset()
    with asking.client() as client:
        new_tab = {"action": "newTab", "url": allowed.url("/clicks")}
        held = _act(client, new_tab, 403)
        tab = _act(client, new_tab, confirm_token=_held(held))["tabId"]
        body = _batch(client, [{"action": "title"}, {"action": "click", "selector": "#hit"}, {"action": "title"}], tab)
        assert [p["status"] for p in body["progress"]] == ["ok", "held", "skipped"]
        token = body["results"][1]["state"]["confirm_token"]

        refused = _answer(client.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"],
                                                            "confirm_token": token}), 400)
        assert refused["code"] == "unknown_parameter"
        again = _answer(client.post("/api/resume", json={"call": body["call"],
                                                          "resume_token": body["resume_token"]}), 200)
        assert [p["status"] for p in again["progress"]] == ["ok", "held", "skipped"]
        assert allowed.count("POST /clicks/hit") == 0

        fresh = again["results"][1]["state"]["confirm_token"]
        confirmed = _act(client, {"action": "click", "tabId": tab, "selector": "#hit"}, confirm_token=fresh)
        assert confirmed["status"] == "ok"
        done = _answer(client.post("/api/resume", json={"call": again["call"], "resume_token": again["resume_token"],
                                                         "observed": {"1": "applied"}}), 200)
        assert done["status"] == "ok"
        assert allowed.wait_for_count("POST /clicks/hit") == 1
        time.sleep(0.3)
        assert allowed.count("POST /clicks/hit") == 1


def test_the_node_gives_each_agent_its_policy_as_it_is_now_and_the_others_the_nodes(nats_access: NatsAccess) -> None:
    crawler = Policy(read_only=True, caps=frozenset({"core"}), max_checkpoints=3)
    config = nats_access.node_config(checkpoints=CheckpointConfig(per_agent=9), fleet="policies")
    node = run_node(ChromiumBrowser(), config, policy=Policy(ask_before_act=True), agent_policies={"crawler": crawler})
    try:
        assert node.policy_of("crawler").read_only and not node.policy_of("crawler").ask_before_act
        assert node.policy_of("anyone") == node.policy_of(None) == Policy(ask_before_act=True)
        node.policy = Policy(read_only=True)
        node.agent_policies["crawler"] = Policy()
        assert node.policy_of("anyone").read_only and not node.policy_of("crawler").read_only
        assert (node.checkpoint_capacity_of("crawler"), node.checkpoint_capacity_of("anyone"),
                node.checkpoint_capacity_of(None)) == (CHECKPOINT_CAPACITY, 9, 9)
    finally:
        node.stop()
