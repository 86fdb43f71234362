"""Faults the outside review found in the HTTP API, against live ``kitsune serve`` processes: a takeover
is audited before it happens, a bad confirm token is told apart from a first ask, and opening or
closing a tab under ask-before-act can be confirmed."""

from __future__ import annotations

import os
import time
from pathlib import Path

from tests.integration.serving import Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

HIT = "POST /clicks/hit"


def _open_confirmed(served: Served, url: str) -> int:
    with served.client("alice") as alice:
        held = alice.post("/api/tabs", json={"op": "open", "url": url}).json()
        assert (held["status"], held["code"]) == ("held", "needs_user"), held
        opened = alice.post("/api/tabs", json={"op": "open", "url": url,
                                               "confirm_token": held["state"]["confirm_token"]}).json()
        assert opened["status"] == "ok", opened
        tab: int = opened["tabId"]
        return tab


def test_opening_and_closing_a_tab_under_ask_before_act_take_the_confirm_token_of_their_hold(
        asking: Served, site: TestSite) -> None:
    tab = _open_confirmed(asking, site.url("/clicks"))
    with asking.client("alice") as alice:
        assert tab in [t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]]
        held = alice.post("/api/tabs", json={"op": "close", "tabId": tab}).json()
        assert held["code"] == "needs_user"
        assert tab in [t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]]  # nothing was done
        closed = alice.post("/api/tabs", json={"op": "close", "tabId": tab,
                                               "confirm_token": held["state"]["confirm_token"]}).json()
        assert closed["status"] == "ok", closed
        assert tab not in [t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]]
        unknown = alice.post("/api/tabs", json={"op": "select", "tabId": tab, "confirm_token": "x"})
        assert (unknown.status_code, unknown.json()["code"]) == (400, "unknown_parameter")


def test_a_wrong_used_or_expired_confirm_token_has_its_own_code_and_comes_with_a_new_hold(
        asking: Served, site: TestSite) -> None:
    tab = _open_confirmed(asking, site.url("/clicks"))
    click = {"action": "click", "tabId": tab, "selector": "#hit"}
    with asking.client("alice") as alice:
        first = alice.post("/api/act", json={"command": click}).json()
        assert (first["status"], first["code"]) == ("held", "needs_user")
        wrong = alice.post("/api/act", json={"command": click, "confirm_token": "not-a-token"}).json()
        assert (wrong["status"], wrong["code"]) == ("held", "confirm_token_invalid"), wrong
        assert wrong["state"]["confirm_token"] != first["state"]["confirm_token"]
        assert site.count(HIT) == 0
        other = {**click, "selector": "#local"}  # a token binds its action's parameters
        bound = alice.post("/api/act", json={"command": other, "confirm_token": wrong["state"]["confirm_token"]})
        assert bound.json()["code"] == "confirm_token_invalid"
        done = alice.post("/api/act", json={"command": click, "confirm_token": first["state"]["confirm_token"]})
        assert done.json()["status"] == "ok", done.json()
        assert site.wait_for_count(HIT) == 1
        used = alice.post("/api/act", json={"command": click, "confirm_token": first["state"]["confirm_token"]})
        assert used.json()["code"] == "confirm_token_invalid"
        time.sleep(0.3)
        assert site.count(HIT) == 1


def test_a_takeover_the_audit_log_refuses_does_not_happen(
        tmp_path: Path, nats_access: NatsAccess, site: TestSite) -> None:
    audit_dir = tmp_path / "audit"
    audit_dir.mkdir()
    running = serve(tmp_path, nats_access, {"audit_file": str(audit_dir / "a.jsonl")})
    try:
        with running.client("alice") as alice, running.client("bob") as bob:
            tab = alice.post("/api/tabs", json={"op": "open", "url": site.url("/clicks")}).json()["tabId"]
            os.rename(audit_dir, tmp_path / "gone")  # the audit file's directory disappears
            refused = bob.post("/api/tabs", json={"op": "takeover", "tabId": tab})
            assert (refused.status_code, refused.json()["code"]) == (503, "audit_unavailable")
            owner = next(t["owner"] for t in bob.get("/api/tabs").json()["tabs"] if t["tabId"] == tab)
            assert owner == "agent"  # still alice's
            assert next(t["owner"] for t in alice.get("/api/tabs").json()["tabs"] if t["tabId"] == tab) == "you"
    finally:
        assert running.stop() == 0
