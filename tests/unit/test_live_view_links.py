"""Where a Live View link points (the configured public URL, else the host the asking request named);
links' quotas and revocation; a link's control under its agent's policy as it is now; what of a person's
input is audited."""

from __future__ import annotations

import asyncio
from typing import Any, cast

import pytest

from actors.bus import LocalBus
from bridge.live.links import REVOKED_CLOSE, LiveLinks, LiveRefusal
from bridge.live.views import LiveViews, Pages
from core.policy import Policy, TabOwners
from core.settings import LiveViewConfig
from driver.devtools import _PATH
from driver.live_inputs import InputAudit
from messages.errors import KitsuneError
from messages.requests import Subjects


class _Pages:
    def tab_ids(self) -> frozenset[int]:
        return frozenset({3})


class _Auditor:
    def live_view(self, op: str, tab: int, **detail: Any) -> None:
        return None


async def _here(tab: int) -> str:
    return "n1"


def _views(public_url: str | None) -> LiveViews:
    owners = TabOwners()
    owners.take_over(3, "alice")
    return LiveViews("n1", cast(Pages, _Pages()), LocalBus(), Subjects(), owners, LiveViewConfig(public_url=public_url),
                     node_of=_here, policy_of=lambda agent: Policy(), auditor=cast(Any, lambda agent: _Auditor()))


def test_a_links_control_follows_its_agents_policy_as_it_is_now_unless_a_person_granted_it() -> None:
    async def run() -> None:
        policies = {"alice": Policy()}
        owners = TabOwners()
        owners.take_over(3, "alice")
        views = LiveViews("n1", cast(Pages, _Pages()), LocalBus(), Subjects(), owners, LiveViewConfig(), node_of=_here,
                          policy_of=lambda agent: policies.get(str(agent), Policy()),
                          auditor=cast(Any, lambda agent: _Auditor()))
        _, free = views.links.issue(3, "alice")  # her policy gave it control
        _, approved = views.links.issue(3, "alice", granted=True)
        _, operator = views.links.issue(3, "operator:ops")
        _, watching = views.links.issue(3, "alice", control=False, granted=True)
        assert views.may_control(free) and views.may_control(approved) and views.may_control(operator)
        for changed in (Policy(ask_before_act=True), Policy(read_only=True)):
            policies["alice"] = changed
            assert not views.may_control(free)  # a link made before the change keeps no control
            assert views.may_control(approved) and views.may_control(operator)
            assert not views.may_control(watching)  # granted is no control of its own
        token, _ = views.links.issue(3, "alice")
        connected = views.links.connect(3, token, views.may_control)
        assert not connected.controls and not views.links.controlled(3)
        policies["alice"] = Policy()
        held = views.links.connect(3, views.links.issue(3, "alice")[0], views.may_control)
        assert held.controls and views.links.controlled(3)
        views.links.withdraw(held)
        assert not held.controls and not views.links.controlled(3) and not held.ended.is_set()

    asyncio.run(run())


def test_a_link_starts_with_the_public_url_whatever_host_the_request_named() -> None:
    link = asyncio.run(_views("https://kitsune.example.com").issue(3, "alice", "http://evil.example:1/"))
    assert link["url"].startswith("https://kitsune.example.com/live/3#t=") and link["expires_in"] == 300.0


def test_without_one_a_link_starts_with_the_requests_base_url() -> None:
    link = asyncio.run(_views(None).issue(3, "alice", "http://127.0.0.1:8000/"))
    assert link["url"].startswith("http://127.0.0.1:8000/live/3#t=")


def _refused(links: LiveLinks, tab: int, token: str) -> tuple[str, int]:
    with pytest.raises(LiveRefusal) as refused:
        links.connect(tab, token)
    return refused.value.code, refused.value.close_code


def test_past_its_quota_an_agents_oldest_unopened_link_is_revoked_and_every_one_open_refuses_a_new_one() -> None:
    async def run() -> None:
        links = LiveLinks(300.0, max_per_agent=2, max_links=3)
        first, _ = links.issue(3, "alice")
        second, _ = links.issue(3, "alice", control=False)
        viewing = links.connect(3, second)  # in use: never pushed out
        links.issue(3, "alice")
        assert _refused(links, 3, first) == ("live_view_revoked", REVOKED_CLOSE)
        assert not viewing.ended.is_set() and not links.controlled(3)  # a view-only connection holds nothing
        links.issue(4, "bob")
        with pytest.raises(KitsuneError) as node_full:
            links.issue(4, "bob")
        assert (node_full.value.code, node_full.value.state) == ("live_view_quota", {"scope": "node", "limit": 3})
        solo = LiveLinks(300.0, max_per_agent=1)
        only, _ = solo.issue(3, "alice")
        solo.connect(3, only)
        with pytest.raises(KitsuneError) as mine:
            solo.issue(3, "alice")
        assert mine.value.code == "live_view_quota" and mine.value.state == {"scope": "agent", "limit": 1}

    asyncio.run(run())


def test_a_hand_back_revokes_its_link_and_a_revoked_tab_ends_its_open_connections() -> None:
    async def run() -> None:
        links = LiveLinks(300.0)
        token, _ = links.issue(3, "alice")
        await links.hand_back(links.connect(3, token))
        assert _refused(links, 3, token) == ("live_view_revoked", REVOKED_CLOSE)
        again, _ = links.issue(3, "alice")
        held = links.connect(3, again)
        assert links.revoke_tab(3, lambda link: link.agent != "alice", "taken over") == 1
        assert held.reason == ("live_view_revoked", "taken over", REVOKED_CLOSE) and not links.controlled(3)

    asyncio.run(run())


def test_a_persons_clicks_and_named_keys_are_entries_typing_is_one_redacted_entry_per_run_and_bounded() -> None:
    entries: list[tuple[str, dict[str, Any]]] = []
    now = [0.0]
    audit = InputAudit(lambda op, fields: entries.append((op, fields)), rate=1.0, burst=4, clock=lambda: now[0])
    assert audit.admit({"type": "mouse", "event": "mouseMoved", "x": 1, "y": 1}) is None
    assert audit.admit({"type": "mouse", "event": "mousePressed", "button": "left"}) is True
    for key in "s3cret":
        assert audit.admit({"type": "key", "event": "keyDown", "key": key}) is True
    assert audit.admit({"type": "text", "text": "pasted-secret"}) is True
    assert audit.admit({"type": "key", "event": "keyDown", "key": "Enter"}) is True
    assert audit.admit({"type": "key", "event": "keyDown", "key": "v", "modifiers": 2}) is True
    assert audit.admit({"type": "mouse", "event": "mousePressed", "button": "left"}) is False  # past the burst
    now[0] = 1.0
    assert audit.admit({"type": "mouse", "event": "mousePressed", "button": "left"}, refused=True) is True
    assert entries == [("input", {"input": "mousePressed", "button": "left"}),
                       ("input", {"input": "text", "text": "[redacted]"}),
                       ("input", {"input": "keyDown", "key": "Enter", "modifiers": 0}),
                       ("input", {"input": "keyDown", "key": "[redacted]", "modifiers": 2}),
                       ("input_refused", {"input": "mousePressed", "button": "left"})]


def test_a_devtools_link_opens_devtools_only_and_only_while_it_controls_and_done_hands_back_its_connection() -> None:
    async def run() -> None:
        links = LiveLinks(300.0)
        token, link = links.issue(3, "alice", mode="devtools")
        screencast, _ = links.issue(3, "alice")
        for tab, given, mode, code in ((3, token, "tab", "live_view_wrong_mode"),
                                       (3, screencast, "devtools", "live_view_wrong_mode"),
                                       (4, token, "devtools", "live_view_wrong_tab"),
                                       (3, "x" * 32, "devtools", "live_view_token_invalid")):
            with pytest.raises(LiveRefusal) as refused:
                links.check(tab, given, mode)
            assert refused.value.code == code
        with pytest.raises(LiveRefusal) as view_only:  # DevTools has no view-only form
            links.connect(3, token, lambda link: False, "devtools")
        assert (view_only.value.code, view_only.value.close_code) == ("live_view_read_only", 4403)
        assert not links.controlled(3)
        control = links.connect(3, token, mode="devtools")
        assert links.controlled(3) and control.controls
        assert await links.hand_back_link(link) is control
        assert not links.controlled(3) and links.handbacks(3) == 1
        with pytest.raises(LiveRefusal) as revoked:
            links.check(3, token, "devtools")
        assert revoked.value.close_code == REVOKED_CLOSE
        other, unopened = links.issue(3, "alice", mode="devtools")
        assert await links.hand_back_link(unopened) is None  # no connection: the link ends all the same
        assert links.handbacks(3) == 1
        with pytest.raises(LiveRefusal):
            links.check(3, other, "devtools")

    asyncio.run(run())


@pytest.mark.parametrize(("path", "served"), [
    ("inspector.html", True), ("entrypoints/inspector/inspector.js", True),
    ("third_party/codemirror.next/codemirror.next.js", True), ("Images/src/checker.svg", True),
    ("../etc/passwd", False), ("entrypoints/../../x.js", False), (".hidden", False), ("a/.b/c.js", False),
    ("x.js?y=1", False), ("/inspector.html", False), ("", False), ("a//b.js", False),
])
def test_the_front_end_serves_only_paths_of_its_bundle(path: str, served: bool) -> None:
    assert (_PATH.fullmatch(path) is not None) == served
