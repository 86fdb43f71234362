"""The bridge's HTTP API against a live ``kitsune serve``: real NATS, real Chromium, the test site.

Every route, every error code with its HTTP status, bad input, agents and the audit log.
"""

from __future__ import annotations

import asyncio
import json
import os
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.integration.serving import KITSUNE, TOKENS, Served, open_tab, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory, nats_access: NatsAccess) -> Iterator[Served]:
    workflows = tmp_path_factory.mktemp("workflows")
    (workflows / "checkout.yaml").write_text(
        "variables: {base: {required: true}, address: {default: '1 Main St'}}\n"
        "commands:\n"
        "  - {action: navigate, url: '{{base}}/checkout/shipping', label: open shipping}\n"
        "  - {action: fill, selector: '#address', value: '{{address}}', label: address}\n"
        "  - {action: click, selector: '#to-billing', label: to billing}\n")
    running = serve(tmp_path_factory.mktemp("serve"), nats_access,
                    {"caps": ["core", "automation"], "workflows": str(workflows), "max_body_bytes": 20000})
    running.workflows = workflows  # type: ignore[attr-defined]
    yield running
    assert running.stop() == 0


@pytest.fixture
def alice(served: Served) -> Iterator[httpx.Client]:
    with served.client("alice") as client:
        yield client


@pytest.fixture
def bob(served: Served) -> Iterator[httpx.Client]:
    with served.client("bob") as client:
        yield client


def error(answer: httpx.Response) -> tuple[int, str]:
    return answer.status_code, answer.json()["code"]


# --- serving, auth, capability groups ----------------------------------------------------------


def test_healthz_needs_no_token_and_says_each_part_answers(served: Served) -> None:
    answer = httpx.get(served.base + "/healthz")
    assert answer.status_code == 200
    assert answer.json() == {"ok": True, "nats": True, "browser": True}


@pytest.mark.parametrize("headers", [{}, {"Authorization": "Bearer wrong-token-000000000000"},
                                     {"Authorization": f"Basic {TOKENS['alice']}"}])
def test_every_route_but_healthz_needs_a_valid_bearer_token(served: Served, site: TestSite,
                                                             headers: dict[str, str]) -> None:
    for method, path in [("GET", "/api/tabs"), ("POST", "/api/batch"), ("POST", "/api/resume"),
                         ("GET", "/api/schema"), ("POST", "/api/act"), ("GET", "/api/caps")]:
        answer = httpx.request(method, served.base + path, headers=headers,
                               json={"commands": [{"action": "navigate", "url": site.url("/form")}]})
        assert error(answer) == (401, "unauthorized"), path
    assert site.count("ANY") == 0


def test_serve_listens_on_loopback_and_prints_one_line_with_its_address(served: Served) -> None:
    assert served.base.startswith("http://127.0.0.1:")


def test_with_no_agent_configured_a_token_is_generated_into_an_owner_only_file(
        tmp_path: Path, nats_access: NatsAccess) -> None:
    (tmp_path / "kitsune.yaml").write_text(json.dumps({"audit_file": str(tmp_path / "audit.jsonl"),
                                                       "nats": nats_access.serve_settings()}))
    process = subprocess.Popen([str(KITSUNE), "serve", "--port", "0", "--config",
                                str(tmp_path / "kitsune.yaml"), "--state-dir", str(tmp_path / "state")],
                               stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                               env=nats_access.serve_env())
    try:
        assert process.stdout is not None
        first, second = process.stdout.readline(), process.stdout.readline()
        token_file = Path(first.strip().rsplit(" ", 1)[1])
        assert token_file == tmp_path / "state" / "token"
        assert stat.S_IMODE(token_file.stat().st_mode) == 0o600
        token = token_file.read_text().strip()
        assert token not in first + second
        base = second.split()[2]
        assert httpx.get(base + "/api/caps", headers={"Authorization": f"Bearer {token}"}).json()["caps"] == ["core"]
        assert httpx.get(base + "/api/caps").status_code == 401
    finally:
        process.terminate()
        assert process.wait(timeout=60) == 0


def test_routes_outside_the_enabled_groups_answer_404_capability_disabled(core_only: Served) -> None:
    with core_only.client() as client:
        for path in ("/api/batch", "/api/parallel", "/api/workflow"):
            assert error(client.post(path, json={})) == (404, "capability_disabled")
        assert error(client.post("/api/resume", json={"call": 1, "resume_token": "x"})) == (
            404, "checkpoint_not_found")  # resume is in core too
        assert client.get("/api/caps").json() == {"caps": ["core"], "routes": [
            "/api/act", "/api/live/handbacks", "/api/needs-user", "/api/resume", "/api/sessions", "/api/tabs",
            "/api/tasks"]}


def test_schema_route_publishes_the_command_language(alice: httpx.Client) -> None:
    schema = alice.get("/api/schema").json()
    assert "navigate" in schema["command"]["$defs"] and schema["batch"]["required"] == ["commands"]


# --- container calls, resume and their errors -----------------------------------------------------


def test_batch_that_finishes_ok_has_exactly_results_progress_status_summary(
        alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/form"))
    body = alice.post("/api/batch", json={"commands": [
        {"action": "fill", "selector": "#name", "value": "Ada"}, {"action": "title"}], "tabId": tab}).json()
    assert set(body) == {"results", "progress", "status", "summary"}
    assert body["progress"] == [{"index": 0, "action": "fill", "tabId": tab, "status": "ok"},
                                {"index": 1, "action": "title", "tabId": tab, "status": "ok"}]
    assert body["results"][1] == {"ok": True, "title": "Form"} or body["results"][1]["ok"] is True


def test_batch_with_an_unknown_write_keeps_a_checkpoint_and_resume_follows_the_spec(
        alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/slow"))
    body = alice.post("/api/batch", json={"commands": [
        {"action": "submitForm", "selector": "#slow-form", "timeout": 1}, {"action": "title"}], "tabId": tab}).json()
    assert body["status"] == "unknown" and set(body) == {"results", "progress", "status", "summary", "call",
                                                         "resume_token"}
    call, token = body["call"], body["resume_token"]
    site.wait_for_count("POST /slow")

    assert error(alice.post("/api/resume", json={"call": call, "resume_token": token})) == (400, "observed_required")
    assert error(alice.post("/api/resume", json={"call": call, "resume_token": token, "observed": {"5": "applied"}})
                 ) == (400, "observed_invalid")
    assert error(alice.post("/api/resume", json={"call": call, "resume_token": "nope"})) == (
        403, "resume_token_invalid")
    assert error(alice.post("/api/resume", json={"call": call + 10_000, "resume_token": token})) == (
        404, "checkpoint_not_found")

    resumed = alice.post("/api/resume", json={"call": call, "resume_token": token, "observed": {"0": "applied"}})
    assert resumed.status_code == 200 and resumed.json()["status"] == "ok"
    assert error(alice.post("/api/resume", json={"call": call, "resume_token": token})) == (404, "checkpoint_not_found")
    time.sleep(0.3)
    assert site.count("POST /slow") == 1


def test_parallel_route_runs_sequences_on_their_tabs(alice: httpx.Client, site: TestSite) -> None:
    one, two = open_tab(alice, site.url("/clicks")), open_tab(alice, site.url("/clicks"))
    body = alice.post("/api/parallel", json={"sequences": [[{"action": "click", "tabId": one, "selector": "#hit"}],
                                                           [{"action": "click", "tabId": two, "selector": "#hit"}]]})
    assert body.json()["status"] == "ok" and body.json()["progress"][0]["action"] == "parallel"
    assert site.wait_for_count("POST /clicks/hit", at_least=2) == 2


def test_workflow_route_answers_workflow_and_steps_and_workflow_changed_is_409(
        alice: httpx.Client, served: Served, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/"))
    body = alice.post("/api/workflow", json={"workflow": "checkout", "variables": {"base": site.base},
                                             "tabId": tab}).json()
    assert body["workflow"] == "checkout" and body["status"] == "ok"
    assert [s["name"] for s in body["steps"]] == ["open shipping", "address", "to billing"]
    assert site.count("POST /checkout/shipping") == 1

    failing = alice.post("/api/workflow", json={"workflow": "checkout", "tabId": tab,
                                                "variables": {"base": "http://127.0.0.1:1"}}).json()
    assert failing["status"] == "failed"
    workflows: Path = served.workflows  # type: ignore[attr-defined]
    path = workflows / "checkout.yaml"
    path.write_text(path.read_text() + "  - {action: title}\n")
    answer = alice.post("/api/resume", json={"call": failing["call"], "resume_token": failing["resume_token"]})
    assert error(answer) == (409, "workflow_changed")
    assert answer.json()["state"] == {"workflow": "checkout"}


# --- tabs and agents ----------------------------------------------------------------------------


def test_tabs_routes_open_list_select_close(alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/text"))
    listed = alice.get("/api/tabs").json()
    mine = next(t for t in listed["tabs"] if t["tabId"] == tab)
    assert mine["owner"] == "you" and mine["current"] is True and listed["current"] == tab
    other = open_tab(alice, site.url("/form"))
    assert alice.post("/api/tabs", json={"op": "select", "tabId": tab}).json() == {"ok": True, "tabId": tab}
    assert alice.get("/api/tabs").json()["current"] == tab
    assert alice.post("/api/tabs", json={"op": "close", "tabId": other}).json()["status"] == "ok"
    assert other not in [t["tabId"] for t in alice.get("/api/tabs").json()["tabs"]]


def test_a_batchs_get_tabs_marks_its_own_agents_current_tab_and_names_only_its_sessions(
        alice: httpx.Client, bob: httpx.Client, site: TestSite) -> None:
    first, mine = open_tab(alice, site.url("/text")), open_tab(alice, site.url("/clicks"))
    theirs = open_tab(bob, site.url("/form"))  # the tab opened last, in another agent's session
    listed = alice.post("/api/batch", json={"commands": [{"action": "getTabs"}]}).json()["results"][0]["tabs"]
    seen = {t["tabId"]: t for t in listed}
    assert (seen[mine]["current"], seen[mine]["owner"], seen[first]["current"]) == (True, "you", False)
    assert (seen[theirs]["current"], seen[theirs]["owner"], seen[theirs]["session"]) == (False, "agent", None)
    again = alice.get("/api/tabs").json()["tabs"]  # the same listing as GET /api/tabs
    assert [t["tabId"] for t in listed] == [t["tabId"] for t in again]
    ours = (first, mine, theirs)  # tabs earlier tests left may still be loading: their titles move
    assert [t for t in listed if t["tabId"] in ours] == [t for t in again if t["tabId"] in ours]
    switched = alice.post("/api/batch", json={"commands": [{"action": "switchTab", "tabId": first}]}).json()
    assert switched["status"] == "ok" and alice.get("/api/tabs").json()["current"] == first  # a switch makes it current
    assert bob.get("/api/tabs").json()["current"] == theirs  # each agent's own


def test_another_agent_may_read_a_tab_but_its_writes_answer_tab_owned_until_takeover(
        alice: httpx.Client, bob: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/clicks"))
    assert bob.post("/api/act", json={"command": {"action": "title", "tabId": tab}}).json()["status"] == "ok"
    refused = bob.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}}).json()
    assert (refused["status"], refused["code"]) == ("failed", "tab_owned")
    in_batch = bob.post("/api/batch", json={"commands": [{"action": "click", "selector": "#hit"}], "tabId": tab}).json()
    assert in_batch["results"][0]["code"] == "tab_owned"
    assert site.count("POST /clicks/hit") == 0

    taken = bob.post("/api/tabs", json={"op": "takeover", "tabId": tab}).json()
    assert taken["ok"] is True and taken["previous"] == "agent"
    assert bob.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}}
                    ).json()["status"] == "ok"
    assert alice.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}}
                      ).json()["code"] == "tab_owned"
    assert site.wait_for_count("POST /clicks/hit") == 1


def test_a_resume_grants_nothing_a_new_call_would_not(alice: httpx.Client, bob: httpx.Client,
                                                        site: TestSite) -> None:
    tab = open_tab(alice, site.url("/clicks"))
    body = alice.post("/api/batch", json={"commands": [{"action": "click", "selector": "#missing", "timeout": 0.5},
                                                       {"action": "click", "selector": "#hit"}], "tabId": tab}).json()
    assert body["status"] == "failed"
    assert error(bob.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]})) == (
        404, "checkpoint_not_found")  # the checkpoint is alice's
    assert bob.post("/api/tabs", json={"op": "takeover", "tabId": tab}).json()["ok"] is True
    resumed = alice.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]}).json()
    assert resumed["results"][0]["code"] == "tab_owned"  # the tab is bob's now: the resume cannot write it
    assert site.count("POST /clicks/hit") == 0


def test_needs_user_route_reports_the_hint_of_a_tab(alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/needs-user/sign-in"))
    assert alice.get("/api/needs-user", params={"tabId": tab}).json()["reason"] == "sign_in"
    plain = open_tab(alice, site.url("/text"))
    assert alice.get("/api/needs-user", params={"tabId": plain}).json()["needs_user"] is False


def test_needs_user_reads_a_loading_page_once_it_has_loaded(alice: httpx.Client, site: TestSite) -> None:
    """A page that committed and is still loading is read once loaded: its password field comes 1.5 s
    after its first bytes, and a read of the half-parsed page would have answered no."""
    tab = open_tab(alice, site.url("/text"))
    went = alice.post("/api/act", json={"command": {
        "action": "navigate", "url": site.url("/trickle?ms=1500"), "waitUntil": "commit", "tabId": tab}}).json()
    assert went["status"] == "ok", went
    hint = alice.get("/api/needs-user", params={"tabId": tab}).json()
    assert (hint["needs_user"], hint["reason"], hint["evidence"]) == (True, "sign_in", "password_field"), hint


def test_needs_user_on_a_page_still_loading_after_5_s_is_a_failed_read_not_a_no(
        alice: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/text"))
    went = alice.post("/api/act", json={"command": {
        "action": "navigate", "url": site.url("/trickle?ms=8000"), "waitUntil": "commit", "tabId": tab}}).json()
    assert went["status"] == "ok", went
    assert error(alice.get("/api/needs-user", params={"tabId": tab})) == (409, "navigated")


# --- bad input ------------------------------------------------------------------------------------


@pytest.mark.parametrize(("content", "headers", "status", "code"), [
    (b"{not json", {"content-type": "application/json"}, 400, "invalid_json"),
    (b'{"commands": []}', {"content-type": "text/plain"}, 400, "invalid_content_type"),
    (b'{"commands": [' + b'{"action": "title"},' * 2000 + b'{"action": "title"}]}',
     {"content-type": "application/json"}, 413, "body_too_large"),
    (b"[1, 2]", {"content-type": "application/json"}, 400, "invalid_call"),
])
def test_malformed_bodies_answer_with_a_code_and_send_nothing(
        alice: httpx.Client, site: TestSite, content: bytes, headers: dict[str, str], status: int, code: str) -> None:
    assert error(alice.post("/api/batch", content=content, headers=headers)) == (status, code)
    assert site.count("ANY") == 0


@pytest.mark.parametrize(("command", "code", "path"), [
    ({"action": "clickk", "selector": "#hit"}, "unknown_action", "1"),
    ({"action": "click", "selector": 5}, "invalid_parameter", "1"),
    ({"action": "click", "selector": "${$7.text}"}, "bad_reference", "1"),
    ({"action": "click", "selector": "#hit", "tabId": 99999}, "unknown_tab", "1"),
    ({"action": "sequence", "steps": [{"action": "title"}, {"action": "click"}]}, "missing_parameter", "1.1"),
])
def test_bad_commands_answer_400_with_the_path_and_nothing_is_sent(
        alice: httpx.Client, site: TestSite, command: dict[str, Any], code: str, path: str) -> None:
    tab = open_tab(alice, site.url("/clicks"))
    site.reset()
    answer = alice.post("/api/batch", json={"commands": [{"action": "click", "selector": "#hit"}, command],
                                            "tabId": tab})
    assert error(answer) == (400, code)
    assert answer.json()["state"]["path"] == path
    time.sleep(0.2)
    assert site.count("ANY") == 0


def test_unknown_body_fields_and_bad_resume_inputs_are_400(alice: httpx.Client) -> None:
    assert error(alice.post("/api/batch", json={"commands": [{"action": "title"}], "tabid": 1})) == (
        400, "unknown_parameter")
    assert error(alice.post("/api/resume", json={"call": "x", "resume_token": "y"})) == (400, "invalid_parameter")


# --- audit ------------------------------------------------------------------------------------------


def test_audit_entries_for_calls_steps_direct_calls_and_resumes(
        alice: httpx.Client, served: Served, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/slow"))
    body = alice.post("/api/batch", json={"commands": [
        {"action": "fill", "selector": "#item", "value": "typed-secret-1"},
        {"action": "submitForm", "selector": "#slow-form", "timeout": 1}], "tabId": tab}).json()
    site.wait_for_count("POST /slow")
    resumed = alice.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"],
                                              "observed": {"1": "applied"}}).json()
    assert resumed["status"] == "ok"

    entries = served.audit()
    ids = [e["call"] for e in entries]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)
    call = next(e for e in entries if e["call"] == body["call"])
    assert call["kind"] == "call" and call["agent"] == "alice"
    steps = [e for e in entries if e.get("parent", {}).get("call") == body["call"] and e["kind"] == "step"]
    assert [(s["parent"]["path"], s["action"]) for s in steps] == [("0", "fill"), ("1", "submitForm"),
                                                                   ("1", "submitForm")]
    assert steps[0]["params"] == {"selector": "#item", "value": "[redacted]"}
    applied = steps[2]
    assert applied["parent"] == {"call": body["call"], "path": "1", "resumed": True}
    assert applied["params"]["observed"] == "applied" and applied["params"]["sent"] is False
    assert any(e["kind"] == "resume" and e["parent"] == {"call": body["call"]} for e in entries)
    assert [s for s in steps if s["parent"]["path"] == "0" and s["parent"].get("resumed")] == []  # kept: none
    direct = [e for e in entries if e["kind"] == "direct" and e["action"] == "newTab"]
    assert direct and direct[-1]["agent"] == "alice"


def test_no_token_typed_value_or_javascript_reaches_the_audit_log_the_server_log_or_metrics(
        alice: httpx.Client, served: Served, site: TestSite, nats_access: NatsAccess) -> None:
    typed, script = "canary-typed-9c41", "canary_script_5e7a"
    tab = open_tab(alice, site.url("/slow"))
    body = alice.post("/api/batch", json={"commands": [
        {"action": "type", "selector": "#item", "text": typed},
        {"action": "js", "code": f"window.{script} = 2"},
        {"action": "submitForm", "selector": "#slow-form", "timeout": 1}], "tabId": tab}).json()
    token = body["resume_token"]
    alice.post("/api/resume", json={"call": body["call"], "resume_token": "wrong-" + token})
    alice.post("/api/resume", json={"call": body["call"], "resume_token": token, "observed": {"2": "applied"}})
    metrics = alice.get("/metrics")
    assert metrics.status_code == 200 and "kitsune_steps_total" in metrics.text
    haystacks = {"audit log": served.audit_file.read_text(), "server log": served.log_file.read_text(),
                 "/metrics": metrics.text}
    for name, text in haystacks.items():
        for canary in (typed, script, token, TOKENS["alice"], nats_access.auth.password or typed):  # NATS's too
            assert canary not in text, f"{canary} in the {name}"


def test_writes_are_refused_and_reads_unanswered_when_the_audit_log_cannot_be_written(
        tmp_path: Path, nats_access: NatsAccess, site: TestSite) -> None:
    audit_dir = tmp_path / "audit"
    audit_dir.mkdir()
    running = serve(tmp_path, nats_access, {"caps": ["core", "automation"], "audit_file": str(audit_dir / "a.jsonl")})
    try:
        with running.client() as client:
            tab = open_tab(client, site.url("/clicks"))
            os.rename(audit_dir, tmp_path / "gone")  # the audit file's directory disappears
            body = client.post("/api/batch", json={"commands": [{"action": "title"},
                                                                {"action": "click", "selector": "#hit"}],
                                                   "tabId": tab})
            assert error(body) == (503, "audit_unavailable"), body.text  # the call itself cannot be recorded
            direct = client.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#hit"}})
            assert error(direct) == (503, "audit_unavailable")
            read = client.post("/api/act", json={"command": {"action": "snapshot", "tabId": tab}})
            assert error(read) == (503, "audit_unavailable")  # a read runs beside its entry, never answered without it
            time.sleep(0.3)
            assert site.count("POST /clicks/hit") == 0
    finally:
        assert running.stop() == 0


def test_a_popup_of_an_agents_page_is_that_agents_tab_and_others_take_it_over_to_write(
        alice: httpx.Client, bob: httpx.Client, site: TestSite) -> None:
    tab = open_tab(alice, site.url("/popups"))
    assert alice.post("/api/act", json={"command": {"action": "click", "tabId": tab, "selector": "#open-popup"}}
                      ).json()["status"] == "ok"
    deadline = time.monotonic() + 10
    popup = None
    while popup is None and time.monotonic() < deadline:
        popup = next((t for t in alice.get("/api/tabs").json()["tabs"] if t["title"] == "Popup child"), None)
        time.sleep(0.1)
    assert popup is not None and (popup["owner"], popup["session"]) == ("you", "default")  # in alice's browser
    write = {"action": "navigate", "tabId": popup["tabId"], "url": site.url("/text")}
    refused = bob.post("/api/act", json={"command": write}).json()
    assert (refused["code"], refused["state"]["owner"]) == ("tab_owned", "agent")
    assert bob.post("/api/tabs", json={"op": "takeover", "tabId": popup["tabId"]}).json()["previous"] == "agent"
    assert bob.post("/api/act", json={"command": write}).json()["status"] == "ok"



def test_no_canary_reaches_the_event_stream_of_the_served_node(
        alice: httpx.Client, nats_access: NatsAccess, site: TestSite) -> None:
    typed, script = "canary-typed-e11a", "canary_script_e22b"
    tab = open_tab(alice, site.url("/form"))
    body = alice.post("/api/batch", json={"commands": [
        {"action": "fill", "selector": "#name", "value": typed}, {"action": "js", "code": f"window.{script}=1"},
        {"action": "click", "selector": "#nothing", "timeout": 0.3}], "tabId": tab}).json()
    assert body["status"] == "failed"
    stream = asyncio.run(_events_of(nats_access, body["call"]))
    assert stream.count(b'"type":"StepStarted"') == 3  # the call's events are there ...
    for canary in (typed, script, body["resume_token"], TOKENS["alice"]):
        assert canary.encode() not in stream  # ... and none of its secrets


async def _events_of(nats_access: NatsAccess, call: int) -> bytes:
    client = await nats_access.client()
    try:
        subscription = await client.jetstream().pull_subscribe(f"kitsune.events.{call}", stream="KITSUNE_EVENTS")
        found: list[bytes] = []
        while True:
            try:
                found += [message.data for message in await subscription.fetch(1000, timeout=1)]
            except TimeoutError:  # nats-py raises its own or asyncio's, as the deadline falls
                return b"\n".join(found)
    finally:
        await client.close()
