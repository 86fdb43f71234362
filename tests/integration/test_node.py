"""The node on real parts: a real nats-server (JetStream), a real Chromium, the test site.

"Never sent twice" is checked where it matters: at the site's server-side write counters.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from typing import Any

import orjson
import pytest

from bridge.node import Node
from messages.errors import KitsuneError
from messages.events import CallStarted, Event, StepStarted
from tests.integration.calls import batch, parallel
from tests.nodes import open_user_tab, resume_call
from tests.site import TestSite


@pytest.fixture
def started_calls(node: Node) -> Iterator[list[int]]:
    """Ids of the calls started while the test runs."""
    calls: list[int] = []

    def listen(event: Event) -> None:
        if type(event) is CallStarted:
            calls.append(event.call)

    node.event_listeners.append(listen)
    yield calls
    node.event_listeners.remove(listen)


def statuses(records: list[dict[str, Any]]) -> list[str]:
    return [r["status"] for r in records]


def resume_error(node: Node, call: int, token: str, observed: Any = None) -> KitsuneError:
    with pytest.raises(KitsuneError) as caught:
        resume_call(node, call, token, observed)
    return caught.value


def slow_submit_batch(node: Node, site: TestSite) -> tuple[int, dict[str, Any]]:
    tab = open_user_tab(node, site.url("/slow"))
    body = batch(node, [
        {"action": "fill", "selector": "#item", "value": "a book"},
        {"action": "submitForm", "selector": "#slow-form", "timeout": 1},
        {"action": "title"},
    ], tabId=tab)
    return tab, body


# --- unknown writes and resume, counted at the server ------------------------------------


def test_form_submit_that_times_out_is_unknown_and_needs_an_observation(node: Node, site: TestSite) -> None:
    _, body = slow_submit_batch(node, site)

    assert statuses(body["progress"]) == ["ok", "unknown", "skipped"]
    assert body["status"] == "unknown"
    assert body["results"][1]["code"] == "timeout"
    assert isinstance(body["call"], int) and isinstance(body["resume_token"], str)
    assert site.wait_for_count("POST /slow") == 1

    error = resume_error(node, body["call"], body["resume_token"])
    assert (error.code, error.http_status) == ("observed_required", 400)
    assert error.state == {"steps": [{"step": "1", "action": "submitForm", "tabId": body["progress"][1]["tabId"],
                                      "status": "unknown", "accepts": ["applied", "not_applied"]}]}
    assert site.count("POST /slow") == 1


def test_resume_with_not_applied_sends_the_write_exactly_once_more(node: Node, site: TestSite) -> None:
    tab, body = slow_submit_batch(node, site)
    site.wait_for_count("POST /slow")
    site.slow_seconds = 0
    batch(node, [{"action": "navigate", "url": site.url("/slow")}], tabId=tab)  # the form is back

    resumed = resume_call(node, body["call"], body["resume_token"], {"1": "not_applied"}).body

    assert resumed["status"] == "ok", resumed["summary"]
    assert [p.get("resumed") for p in resumed["progress"]] == ["kept", None, None]
    assert site.count("POST /slow") == 2
    assert resumed["results"][2]["title"] == "Done"
    assert "call" not in resumed and "resume_token" not in resumed


def test_resume_with_applied_sends_nothing_again(node: Node, site: TestSite) -> None:
    _, body = slow_submit_batch(node, site)
    site.wait_for_count("POST /slow")

    resumed = resume_call(node, body["call"], body["resume_token"], {"1": "applied"}).body

    assert resumed["status"] == "ok", resumed["summary"]
    assert resumed["progress"][1] == {"index": 1, "action": "submitForm", "tabId": body["progress"][1]["tabId"],
                                      "status": "ok", "observed": "applied"}
    time.sleep(0.5)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.count("POST /slow") == 1


def test_parallel_unknown_write_resumes_with_not_applied_once_and_applied_never(node: Node, site: TestSite) -> None:
    def run_parallel() -> tuple[int, dict[str, Any]]:
        slow_tab, other_tab = open_user_tab(node, site.url("/slow")), open_user_tab(node, site.url("/clicks"))
        body = parallel(node, [
            [{"action": "fill", "tabId": slow_tab, "selector": "#item", "value": "x"},
             {"action": "submitForm", "tabId": slow_tab, "selector": "#slow-form", "timeout": 1}],
            [{"action": "click", "tabId": other_tab, "selector": "#local"}],
        ])
        assert statuses(body["progress"][0]["sequences"][0]) == ["ok", "unknown"]
        assert statuses(body["progress"][0]["sequences"][1]) == ["ok"]
        return slow_tab, body

    slow_tab, first = run_parallel()
    site.wait_for_count("POST /slow")
    assert resume_error(node, first["call"], first["resume_token"]).code == "observed_required"
    site.slow_seconds = 0
    batch(node, [{"action": "navigate", "url": site.url("/slow")}], tabId=slow_tab)
    resumed = resume_call(node, first["call"], first["resume_token"], {"0.0.1": "not_applied"}).body
    assert resumed["status"] == "ok", resumed["summary"]
    assert statuses(resumed["progress"][0]["sequences"][1]) == ["ok"]
    assert resumed["progress"][0]["sequences"][1][0]["resumed"] == "kept"
    assert site.count("POST /slow") == 2

    site.slow_seconds = 3.0
    _, second = run_parallel()
    site.wait_for_count("POST /slow", at_least=3)
    resumed = resume_call(node, second["call"], second["resume_token"], {"0.0.1": "applied"}).body
    assert resumed["status"] == "ok"
    time.sleep(0.5)  # not a wait for something to happen: a window in which nothing MORE may be sent
    assert site.count("POST /slow") == 3


# --- claims: tab_owned, tab_claimed, tab_closed --------------------------------------------


def test_two_sequences_writing_one_tab_the_second_is_refused_tab_owned(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    body = parallel(node, [
        [{"action": "click", "tabId": tab, "selector": "#hit"}],
        [{"action": "click", "tabId": tab, "selector": "#hit"}],
    ])

    assert statuses(body["progress"][0]["sequences"][0]) == ["ok"]
    assert statuses(body["progress"][0]["sequences"][1]) == ["failed"]
    assert body["results"][0]["state"]["sequences"][1][0]["code"] == "tab_owned"
    assert site.wait_for_count("POST /clicks/hit") == 1
    time.sleep(0.3)  # not a wait for something to happen: the count stays 1, nothing MORE is sent
    assert site.count("POST /clicks/hit") == 1


def test_a_tab_written_by_another_calls_parallel_in_progress_is_tab_claimed(
        node: Node, site: TestSite, started_calls: list[int]) -> None:
    tab, other = open_user_tab(node, site.url("/clicks")), open_user_tab(node, site.url("/clicks"))
    holding = threading.Event()

    def listen(event: Event) -> None:
        if type(event) is StepStarted and event.path == "0.0.1":
            holding.set()

    # The first call's sequence claims the tab, then waits on a POST /slow that the site holds until the
    # test releases it: the claim is held for as long as the test needs, however slow the machine.
    site.hold_slow()
    node.event_listeners.append(listen)
    first: dict[str, Any] = {}
    holder = threading.Thread(target=lambda: first.update(parallel(node, [
        [{"action": "click", "tabId": tab, "selector": "#local"},
         {"action": "waitForResult", "tabId": tab, "timeout": 60,
          "code": "fetch('/slow', {method: 'POST'}).then(() => true)"}],
        [{"action": "title", "tabId": other}],
    ])))
    holder.start()
    try:
        assert holding.wait(30), "the first call's waitForResult never started"
        assert site.wait_for_count("POST /slow", 1, timeout=30) == 1  # it is in the page, holding the claim

        second = parallel(node, [[{"action": "click", "tabId": tab, "selector": "#hit"}]])
    finally:
        site.release_slow()
        holder.join(60)
        node.event_listeners.remove(listen)

    failure = second["results"][0]["state"]["sequences"][0][0]
    assert failure["code"] == "tab_claimed"
    assert failure["state"]["call"] == started_calls[0]
    assert site.count("POST /clicks/hit") == 0
    assert first["status"] == "ok", first.get("summary")


def test_a_closed_tab_refuses_its_sequence_on_resume_tab_closed(node: Node, site: TestSite) -> None:
    tab, kept = open_user_tab(node, site.url("/clicks")), open_user_tab(node, site.url("/clicks"))
    body = parallel(node, [
        [{"action": "click", "tabId": tab, "selector": "#local"},
         {"action": "click", "tabId": tab, "selector": "#missing", "timeout": 0.5}],
        [{"action": "click", "tabId": kept, "selector": "#hit"}],
    ])
    assert statuses(body["progress"][0]["sequences"][0]) == ["ok", "failed"]
    batch(node, [{"action": "closeTab", "tabId": tab}])

    resumed = resume_call(node, body["call"], body["resume_token"]).body

    assert statuses(resumed["progress"][0]["sequences"][0]) == ["ok", "failed"]
    assert resumed["results"][0]["state"]["sequences"][0][1]["code"] == "tab_closed"
    assert resumed["progress"][0]["sequences"][1][0]["resumed"] == "kept"
    assert site.count("POST /clicks/hit") == 1
    assert tab not in node.tabs.ids()


def test_claims_are_released_when_the_call_ends(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    parallel(node, [[{"action": "click", "tabId": tab, "selector": "#local"}]])
    assert node.claims.held() == {}


# --- every action, checked by the page and the server ---------------------------------------


def test_a_batch_of_every_action_against_the_test_site(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/form"))
    body = batch(node, [
        {"action": "fill", "selector": "#name", "value": "Ada"},                                   # 0
        {"action": "type", "selector": "#email", "text": "ada@example.test"},                      # 1
        {"action": "select", "selector": "#color", "values": ["Green"]},                           # 2
        {"action": "select", "selector": "#sizes", "values": ["s", "l"]},                          # 3
        {"action": "check", "selector": "#agree"},                                                 # 4
        {"action": "click", "selector": "#plan-pro"},                                              # 5
        {"action": "press", "selector": "#message", "key": "A"},                                   # 6
        {"action": "find", "selector": "label"},                                                   # 7
        {"action": "js", "code": "document.querySelector('#name').value"},                         # 8
        {"action": "waitForResult", "code": "document.readyState === 'complete'"},                 # 9
        {"action": "screenshot"},                                                                  # 10
        {"action": "submitForm", "selector": "#form"},                                             # 11
        {"action": "waitFor", "selector": "#thanks-name"},                                         # 12
        {"action": "pageText", "selector": "#thanks-name"},                                        # 13
        {"action": "title"},                                                                       # 14
        {"action": "url"},                                                                         # 15
        {"action": "navigate", "url": site.url("/text")},                                          # 16
        {"action": "if", "condition": "document.title.length > 0",
         "then": [{"action": "pageText", "selector": "h1"}]},                                      # 17
        {"action": "try", "body": [{"action": "click", "selector": "#nothing", "timeout": 0.3}],
         "catch": [{"action": "title"}]},                                                          # 18
        {"action": "retry", "attempts": 2, "delay": 0.1, "body": [{"action": "find", "text": "Item"}]},  # 19
        {"action": "while", "condition": "(window.n = (window.n || 0) + 1) < 3",
         "body": [{"action": "title"}]},                                                           # 20
        {"action": "newTab", "url": site.url("/storage")},                                         # 21
        {"action": "storage", "tabId": "${$21.tabId}", "op": "set", "key": "k", "value": "v"},     # 22
        {"action": "storage", "tabId": "${$21.tabId}", "op": "get", "key": "k"},                   # 23
        {"action": "navigate", "tabId": "${$21.tabId}", "url": site.url("/cookies/set?name=c&value=1")},  # 24
        {"action": "cookies", "tabId": "${$21.tabId}"},                                            # 25
        {"action": "clipboard", "tabId": "${$21.tabId}", "op": "write", "text": "copied"},         # 26
        {"action": "clipboard", "tabId": "${$21.tabId}", "op": "read"},                            # 27
        {"action": "navigate", "tabId": "${$21.tabId}", "url": site.url("/download")},             # 28
        {"action": "download", "tabId": "${$21.tabId}", "selector": "#download"},                  # 29
        {"action": "getTabs"},                                                                     # 30
        {"action": "switchTab"},                                                                   # 31
        {"action": "broadcast", "tabIds": [tab, "${$21.tabId}"], "command": {"action": "title"}},  # 32
        {"action": "closeTab", "tabId": "${$21.tabId}"},                                           # 33
    ], tabId=tab)

    assert body["status"] == "ok", body["summary"]
    results = body["results"]
    assert site.count("POST /form") == 1
    assert site.last_form["name"] == ["Ada"] and site.last_form["email"] == ["ada@example.test"]
    assert site.last_form["color"] == ["green"] and site.last_form["sizes"] == ["s", "l"]
    assert site.last_form["plan"] == ["pro"] and "agree" in site.last_form
    assert results[7]["count"] >= 5
    assert results[8]["value"] == "Ada"
    assert results[10]["mimeType"] == "image/png" and len(results[10]["image"]) > 100
    assert results[13]["text"] == "Ada"
    assert results[14]["title"] == "Thanks"
    assert results[15]["url"].endswith("/form")
    assert results[17]["branch"] == "then"
    assert results[18]["caught"]["code"] in ("not_found", "timeout")
    assert results[20]["iterations"] == 2
    assert results[23]["value"] == "v"
    assert any(c["name"] == "c" and c["value"] == "1" for c in results[25]["cookies"])
    assert results[27]["text"] == "copied"
    assert results[29]["filename"] == "report.txt" and results[29]["size"] > 0
    assert site.count("GET /download/report.txt") == 1
    assert site.count("GET /cookies/set") == 1
    assert {t["tabId"] for t in results[30]["tabs"]} >= {tab, results[21]["tabId"]}
    assert [r["title"] for r in results[32]["results"]] == ["Text", "Download"]
    assert results[21]["tabId"] not in node.tabs.ids()


# --- the step log rebuilt from the stream ---------------------------------------------------


def test_the_step_log_rebuilt_from_the_stream_equals_what_the_call_returned(
        node: Node, site: TestSite, started_calls: list[int]) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    bodies = [
        batch(node, [{"action": "click", "selector": "#local"}, {"action": "title"}], tabId=tab),
        batch(node, [{"action": "click", "selector": "#local"}, {"action": "click", "selector": "#missing",
                                                                 "timeout": 0.3}, {"action": "title"}], tabId=tab),
        parallel(node, [[{"action": "click", "tabId": tab, "selector": "#b1"}], [{"action": "getTabs"}]]),
    ]
    for call, body in zip(started_calls, bodies, strict=True):
        log = node.replay(call)  # the call's actor is gone: only the stream is left
        assert (log.progress, log.status, log.summary) == (body["progress"], body["status"], body["summary"])


def test_a_write_recorded_ahead_whose_turn_never_comes_is_skipped_and_never_sent(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    counted = site.count("POST /clicks/hit")
    body = batch(node, [{"action": "click", "selector": "#missing", "timeout": 0.3},
                        {"action": "click", "selector": "#hit"}], tabId=tab)
    assert statuses(body["progress"]) == ["failed", "skipped"]
    log = node.replay(body["call"])  # as a node reads it from the stream
    record = log.find("1")
    assert record is not None and record.dispatched and record.status == "skipped"  # recorded ahead, closed unsent
    assert (log.progress, log.status) == (body["progress"], body["status"])
    assert site.count("POST /clicks/hit") == counted


def test_a_write_carried_over_a_read_that_fails_is_skipped_and_never_sent(node: Node, site: TestSite) -> None:
    tab = open_user_tab(node, site.url("/clicks"))
    counted = site.count("POST /clicks/hit")
    body = batch(node, [{"action": "click", "selector": "#local"},
                        {"action": "pageText", "selector": "#missing", "timeout": 0.3},
                        {"action": "click", "selector": "#hit"}], tabId=tab)
    assert statuses(body["progress"]) == ["ok", "failed", "skipped"]
    log = node.replay(body["call"])
    record = log.find("2")
    assert record is not None and record.dispatched and record.status == "skipped"  # recorded as #local was sent
    assert (log.progress, log.status) == (body["progress"], body["status"])
    assert site.count("POST /clicks/hit") == counted


def test_no_typed_value_javascript_or_token_reaches_the_event_stream(node: Node, site: TestSite) -> None:
    typed, script = "canary-typed-7d1f", "canary_js_4b2e"
    tab = open_user_tab(node, site.url("/slow"))
    body = batch(node, [
        {"action": "fill", "selector": "#item", "value": typed},
        {"action": "js", "code": f"window.{script} = 1"},
        {"action": "submitForm", "selector": "#slow-form", "timeout": 1},
    ], tabId=tab)
    resumed = resume_call(node, body["call"], body["resume_token"], {"2": "applied"}).body
    assert resumed["status"] == "ok"

    stream = b"".join(node.io.run(_raw_events(node, body["call"]), timeout=30))
    assert stream.count(b'"type":"StepStarted"') == 3 and b'"type":"StepObserved"' in stream  # both runs
    for secret in (typed, script, body["resume_token"]):
        assert secret.encode() not in stream


async def _raw_events(node: Node, call: int) -> list[bytes]:
    js = node.bus.client.jetstream()
    subscription = await js.pull_subscribe(f"kitsune.events.{call}", stream="KITSUNE_EVENTS")
    messages: list[bytes] = []
    try:
        while True:
            try:
                batch_ = await subscription.fetch(512, timeout=1)
            except Exception:  # nats.errors.TimeoutError: nothing left
                break
            messages += [m.data for m in batch_]
    finally:
        await subscription.unsubscribe()
    assert all(orjson.loads(line)["type"] for m in messages for line in m.split(b"\n"))  # an event a line
    return messages
