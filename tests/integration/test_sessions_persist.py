"""Persistent sessions on a live node (issue 34): saved sealed in the fleet's JetStream, restored on the next open.

The session's ``kitsune serve`` with a persistence key (``persisting``, shared with the MCP tests of them) serves
them, each test's sessions named its own way; the test site's sign-in (``GET /session/start``, counted)
sets a session cookie of the server's making that must come back on a restored session (the site's ``/session``
says whether the request carried it) and must reach no log, audit entry or stored blob in clear.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from typing import Any

import pytest

from actors.buckets import SESSIONS_BUCKET
from actors.session_vault import SessionVault, unseal
from messages.errors import KitsuneError
from tests.integration.persist_sessions import (
    KEY,
    SIGN_IN,
    close_tab,
    open_persistent,
    secrets_absent,
    seen_by_site,
    sign_in,
)
from tests.integration.serving import Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite


def _eventually(check: Callable[[], Any], timeout: float = 20.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (value := check()):
        assert time.monotonic() < deadline, "not within the time"
        time.sleep(0.05)
    return value


def _session_entries(served: Served, op: str, name: str) -> list[dict[str, Any]]:
    return [e for e in served.audit() if e["kind"] == "session" and e["op"] == op and e["session"] == name]


def _blob(nats_access: NatsAccess, fleet: str, agent: str, name: str) -> bytes | None:
    async def read() -> bytes | None:
        client = await nats_access.client()
        try:
            kv = await client.jetstream().key_value(SESSIONS_BUCKET)
            try:
                entry = await kv.get(SessionVault(client, fleet, KEY).key_of(agent, name))
            except Exception:
                return None
            return entry.value if entry.operation is None else None
        finally:
            await client.close()
    return asyncio.run(read())


def _put_blob(nats_access: NatsAccess, fleet: str, agent: str, name: str, blob: bytes) -> None:
    async def write() -> None:
        client = await nats_access.client()
        try:
            kv = await client.jetstream().key_value(SESSIONS_BUCKET)
            await kv.put(SessionVault(client, fleet, KEY).key_of(agent, name), blob)
        finally:
            await client.close()
    asyncio.run(write())


def test_a_signed_in_session_whose_last_tab_closed_is_restored_on_the_next_open(
        persisting: Served, site: TestSite) -> None:
    with persisting.client("alice") as alice:
        tab = sign_in(alice, site)["tabId"]
        close_tab(alice, tab)  # its last tab: saved, its context freed (no tombstone)
        _eventually(lambda: _session_entries(persisting, "stored", "shop"))
        listed = alice.get("/api/sessions").json()
        assert "shop" not in {s["name"] for s in listed["sessions"]}
        assert "shop" not in {t["name"] for t in listed["tombstones"]}

        again = open_persistent(alice, site.url("/session"))
        assert again["status"] == "ok" and again["restored"] is True, again
        assert again["saved_at"] <= time.time() and again["age"] >= 0
        assert seen_by_site(alice, again["tabId"]) == "signed in"  # the server received the sign-in's cookie
    assert site.count(SIGN_IN) == 1  # signed in once
    saved, restored = _session_entries(persisting, "saved", "shop"), _session_entries(persisting, "restored", "shop")
    assert saved and restored and all(e["bytes"] > 0 for e in saved + restored)
    assert secrets_absent(site, persisting.audit_file.read_text(), persisting.log_file.read_text())


def test_the_stored_blob_is_sealed_and_refused_under_another_agents_name(
        persisting: Served, site: TestSite, nats_access: NatsAccess) -> None:
    fleet = persisting.directory.name
    with persisting.client("alice") as alice:
        close_tab(alice, sign_in(alice, site, "sealed")["tabId"])
        _eventually(lambda: _session_entries(persisting, "stored", "sealed"))
    blob = _blob(nats_access, fleet, "alice", "sealed")
    assert blob is not None and secrets_absent(site, blob.decode("latin-1")) and b"sid" not in blob
    with pytest.raises(KitsuneError) as wrong_key:
        unseal("another-key-0123456789abcdef", fleet, "alice", "sealed", blob)
    assert wrong_key.value.code == "session_state_refused"
    with pytest.raises(KitsuneError) as wrong_agent:
        unseal(KEY, fleet, "bob", "sealed", blob)
    assert wrong_agent.value.code == "session_state_refused"
    assert site.session_tokens[-1].encode() in unseal(KEY, fleet, "alice", "sealed", blob)  # the node's key, her name

    _put_blob(nats_access, fleet, "bob", "sealed", blob)  # moved under bob's name: refused, never restored
    with persisting.client("bob") as bob:
        refused = open_persistent(bob, site.url("/session"), "sealed", status=409)
        assert refused["status"] == "failed" and refused["code"] == "session_state_refused", refused


def test_closing_a_persistent_session_deletes_its_state(persisting: Served, site: TestSite,
                                                        nats_access: NatsAccess) -> None:
    with persisting.client("alice") as alice:
        close_tab(alice, sign_in(alice, site, "forgotten")["tabId"])
        _eventually(lambda: _session_entries(persisting, "stored", "forgotten"))
        assert _blob(nats_access, persisting.directory.name, "alice", "forgotten") is not None
        forgot = alice.delete("/api/sessions/forgotten")
        assert forgot.json() == {"closed": "forgotten", "was": "stored", "forgot_state": True}, forgot.text
        assert _blob(nats_access, persisting.directory.name, "alice", "forgotten") is None
        assert alice.delete("/api/sessions/forgotten").status_code == 404
        fresh = open_persistent(alice, site.url("/session"), "forgotten")
        assert fresh["restored"] is False and seen_by_site(alice, fresh["tabId"]) == "signed out"


def test_closing_its_last_tab_with_forget_deletes_its_state_and_leaves_a_tombstone(
        persisting: Served, site: TestSite, nats_access: NatsAccess) -> None:
    fleet = persisting.directory.name
    with persisting.client("alice") as alice:
        close_tab(alice, sign_in(alice, site, "once")["tabId"])  # saved: its blob is in the fleet
        _eventually(lambda: _session_entries(persisting, "stored", "once"))
        again = open_persistent(alice, site.url("/session"), "once")
        assert again["restored"] is True and _blob(nats_access, fleet, "alice", "once") is not None
        wrong = alice.post("/api/tabs", json={"op": "close", "tabId": again["tabId"], "forget": "yes"})
        assert (wrong.status_code, wrong.json()["code"], wrong.json()["state"]["param"]) == (
            400, "invalid_parameter", "forget")
        assert again["tabId"] in {t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]}  # nothing closed

        forgot = alice.post("/api/tabs", json={"op": "close", "tabId": again["tabId"], "forget": True})
        assert forgot.status_code == 200 and forgot.json()["status"] == "ok", forgot.text
        assert {k: forgot.json()[k] for k in ("tabId", "closed", "tabs", "forgot_state")} == {
            "tabId": again["tabId"], "closed": "once", "tabs": [again["tabId"]], "forgot_state": True}
        assert _blob(nats_access, fleet, "alice", "once") is None  # deleted, not saved
        assert [t["reason"] for t in alice.get("/api/sessions").json()["tombstones"] if t["name"] == "once"] == [
            "closed"]
        assert len(_session_entries(persisting, "saved", "once")) == 1  # its close saved nothing
        closed = open_persistent(alice, site.url("/session"), "once", status=410)
        assert closed["code"] == "session_expired", closed  # its tombstone, as DELETE leaves it
        assert alice.delete("/api/sessions/once").json() == {"closed": "once", "was": "tombstone"}
        fresh = open_persistent(alice, site.url("/session"), "once")
        assert fresh["restored"] is False and seen_by_site(alice, fresh["tabId"]) == "signed out"


def test_forget_closes_only_a_reuse_session(persisting: Served, site: TestSite) -> None:
    with persisting.client("alice") as alice:
        answer = alice.post("/api/batch", json={"commands": [
            {"action": "newTab", "url": site.url("/"), "session": "call"},
            {"action": "closeTab", "tabId": "${$0.tabId}", "forget": True}]}).json()
    opened, refused = answer["results"]
    assert opened["ok"] is True and (refused["code"], refused["state"]) == ("invalid_parameter",
                                                                           {"param": "forget"}), answer
    assert f"tab {opened['tabId']} is in none" in refused["error"]


def test_a_persistent_request_without_a_key_is_refused_and_nothing_is_stored(plain: Served, site: TestSite) -> None:
    with plain.client("alice") as alice:  # the session's node: no persist_key
        before = site.count(SIGN_IN)
        refused = open_persistent(alice, site.url("/session/start"), "nokey", status=409)
        assert refused["code"] == "persistence_not_configured", refused
        assert "persist_key" in refused["error"]
        assert site.count(SIGN_IN) == before  # nothing sent


def test_a_swept_persistent_session_is_saved_freed_and_restored_on_its_next_use(
        tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess, site: TestSite) -> None:
    swept = serve(tmp_path_factory.mktemp("swept"), nats_access,
                  {"caps": ["core", "automation"],
                   "sessions": {"persist_key": KEY, "max_idle": 1, "sweep_interval": 0.5, "persist": True}})
    try:
        with swept.client("alice") as alice:
            tab = sign_in(alice, site, "idle", persist=None)["tabId"]  # persistent: the node's default
            stored = _eventually(lambda: _session_entries(swept, "stored", "idle"))
            assert stored[0]["reason"] == "swept"
            listed = alice.get("/api/sessions").json()
            assert "idle" not in {s["name"] for s in listed["sessions"]}
            assert "idle" not in {t["name"] for t in listed["tombstones"]}  # saved, not closed
            assert tab not in {t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]}
            again = open_persistent(alice, site.url("/session"), "idle", persist=None)
            assert again["restored"] is True and seen_by_site(alice, again["tabId"]) == "signed in"
        assert secrets_absent(site, swept.log_file.read_text(), swept.audit_file.read_text())
    finally:
        assert swept.stop() == 0
