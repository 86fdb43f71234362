"""A task's checkpoint: whatever goes in, what comes out is bounded, whitelisted and holds no secret."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from core.task_checkpoint import (
    EVENT_FIELDS,
    EVENT_KINDS,
    EVENTS,
    HEADING_CHARS,
    HEADINGS,
    MAX_BYTES,
    MESSAGE_BYTES,
    MESSAGES,
    OUTLINE,
    OUTLINE_CHARS,
    REDACTED,
    STEP_FIELDS,
    STEPS,
    SUMMARY_BYTES,
    TOKEN,
    build_checkpoint,
    checked_messages,
    clean_url,
    page_version,
    scrub,
)
from core.tasks import STATUSES as TASK_STATUSES
from messages.commands import ACTIONS
from messages.errors import ERROR_CODES, KitsuneError
from messages.results import STATUSES as STEP_STATUSES

VOCABULARIES: dict[str, set[str]] = {"action": set(ACTIONS), "code": set(ERROR_CODES), "kind": set(EVENT_KINDS),
                                     "status": {*STEP_STATUSES, *TASK_STATUSES}, "role": {"user", "assistant", "tool"}}
"""The fields holding a named value (never free text), and their names."""

JSON: st.SearchStrategy[Any] = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=40),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12)
CANARY = st.from_regex(r"K9[A-Za-z0-9]{2,20}", fullmatch=True)
"""A secret: no name of the vocabularies, no part of ``[redacted]``, can hold one (a capital and a digit)."""


def walk(value: Any, key: str = "") -> Iterator[tuple[str, Any]]:
    """Every (field name, scalar) of a JSON value, dictionary keys included as ("", key)."""
    if isinstance(value, dict):
        for name, item in value.items():
            yield "", name
            yield from walk(item, name)
    elif isinstance(value, list):
        for item in value:
            yield from walk(item, key)
    else:
        yield key, value


def assert_safe(out: dict[str, Any], secrets: list[str]) -> None:
    assert len(orjson.dumps(out)) <= MAX_BYTES
    assert set(out) == {"goal", "began", "page", "steps", "events", "messages", "summary", "status"}
    assert set(out["began"]) == {"url", "title"}
    assert set(out["page"]) == {"url", "title", "headings", "outline", "version"}
    assert len(out["messages"]) <= MESSAGES and all(set(m) == {"role", "content"} and len(m["content"].encode())
                                                    <= MESSAGE_BYTES for m in out["messages"])
    assert len(out["page"]["headings"]) <= HEADINGS and all(len(h) <= HEADING_CHARS for h in out["page"]["headings"])
    assert len(out["page"]["outline"]) <= OUTLINE and all(len(o) <= OUTLINE_CHARS for o in out["page"]["outline"])
    assert len(out["steps"]) <= STEPS and len(out["events"]) <= EVENTS
    assert all(set(s) <= set(STEP_FIELDS) for s in out["steps"])
    assert all({"time", "kind"} <= set(e) <= set(EVENT_FIELDS) for e in out["events"])
    assert len(out["summary"].encode()) <= SUMMARY_BYTES
    for key, value in walk(out):
        if isinstance(value, str) and key in VOCABULARIES:
            assert value in VOCABULARIES[key], (key, value)
        elif isinstance(value, str):
            assert TOKEN.search(value) is None, (key, value)
            assert not [s for s in secrets if s in value], (key, value)
        else:
            assert value is None or isinstance(value, int | float), (key, value)


@st.composite
def leaky_inputs(draw: st.DrawFn) -> tuple[dict[str, Any], list[str]]:
    """Arguments of build_checkpoint with canaries, tokens and junk in every field, and the canaries."""
    canaries = draw(st.lists(CANARY, min_size=1, max_size=3, unique=True))
    token = st.from_regex(r"[A-Za-z0-9_-]{24,40}", fullmatch=True)
    text = st.builds(lambda a, c, b: a + c + b, st.text(max_size=30), st.sampled_from(canaries) | token,
                     st.text(max_size=30))
    leaky = text | JSON
    url = st.builds(lambda c, t: f"https://{c}:{c}@shop.test/{t}/{c}?token={c}#{c}", st.sampled_from(canaries), text)
    named = {"action": st.sampled_from(sorted(ACTIONS)), "status": st.sampled_from(STEP_STATUSES),
             "code": st.sampled_from(sorted(ERROR_CODES)), "kind": st.sampled_from(sorted(VOCABULARIES["kind"]))}
    field = st.sampled_from(["call", "path", "action", "tabId", "status", "code", "time", "kind", "url", "params",
                             "value", "result", "confirm_token", "text", "headings"])

    def record(fixed: dict[str, Any]) -> st.SearchStrategy[dict[str, Any]]:
        junk = st.dictionaries(field | st.text(max_size=6), leaky | url, max_size=5)
        return st.builds(lambda f, j: {**j, **f}, st.fixed_dictionaries({}, optional=fixed), junk)

    ints = st.integers(min_value=-3, max_value=2**60)
    step = record({"call": ints, "path": st.sampled_from(["0", "1.2", "x"]) | leaky, "tabId": ints | st.none(),
                   **{k: named[k] | leaky for k in ("action", "status", "code")}})
    event = record({"time": st.floats() | ints | leaky, "call": ints, "tabId": ints, "url": url | leaky,
                    **{k: named[k] | leaky for k in ("kind", "status", "code")}})
    page = record({"url": url | leaky, "title": leaky, "headings": st.lists(leaky, max_size=14) | leaky,
                   "outline": st.lists(leaky, max_size=50) | leaky})
    arguments = {"goal": leaky, "began": page | leaky, "page": page | leaky,
                 "steps": st.lists(step | leaky, max_size=30) | leaky, "events": st.lists(event | leaky, max_size=30),
                 "summary": st.builds("".join, st.lists(text, max_size=60)) | leaky,
                 "messages": st.lists(record({"role": st.sampled_from(["user", "assistant", "tool"]) | leaky,
                                              "content": st.builds("".join, st.lists(text, max_size=40)) | leaky})
                                      | leaky, max_size=30) | leaky,
                 "status": st.sampled_from(TASK_STATUSES) | leaky}
    return draw(st.fixed_dictionaries(arguments)), canaries


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(leaky_inputs())
def test_a_checkpoint_holds_only_whitelisted_fields_within_16_kib_and_no_secret_or_token(
        drawn: tuple[dict[str, Any], list[str]]) -> None:
    arguments, canaries = drawn
    assert_safe(build_checkpoint(**arguments, secrets=canaries), canaries)


@settings(max_examples=200, deadline=None)
@given(st.text(max_size=200), st.lists(st.text(min_size=4, max_size=12), max_size=4))
def test_no_secret_survives_a_scrub_even_one_overlapping_the_replacement(text: str, secrets: list[str]) -> None:
    text = text + "".join(secrets) + text
    out = scrub(text, secrets)
    assert not [s for s in secrets if s in out] and TOKEN.search(out) is None


def test_the_worst_text_in_every_field_still_fits_with_the_summary_cut_last() -> None:
    wide = "\U0001f98a"  # 4 bytes of UTF-8, one character
    page = {"url": "https://shop.test/" + wide * 500, "title": wide * 500, "headings": [wide * 500] * 20,
            "outline": [wide * 500] * 60}
    step = {"call": 2**53 - 1, "path": "1.2.3", "action": "callSiteTool", "tabId": 2**53 - 1, "status": "unknown",
            "code": "live_view_token_invalid"}
    events = [{"time": float(i), "kind": "navigated", "url": "https://shop.test/" + wide * 500} for i in range(30)]
    out = build_checkpoint(wide * 9000, page, page, [step] * 30, events, wide * 9000, "active", ["K9secret"])
    assert_safe(out, ["K9secret"])
    assert out["steps"] == [] and out["events"] == []  # all dropped before the summary is cut
    assert out["page"]["outline"] == []  # and the page's outline too
    assert 0 < len(out["summary"]) < 1024
    assert out["page"]["headings"] == [wide * HEADING_CHARS] * HEADINGS  # the fixed fields keep their limits


def test_the_oldest_steps_and_events_go_first_and_the_summary_stays() -> None:
    page = {"url": "https://shop.test/", "title": "Shop", "headings": ["\U0001f98a" * 200] * 10}
    events = [{"time": float(i), "kind": "navigated", "url": "https://shop.test/" + "ab/" * 127} for i in range(20)]
    steps = [{"call": 7, "path": str(i), "action": "click", "tabId": 3, "status": "ok"} for i in range(20)]
    out = build_checkpoint("goal", page, page, steps, events, "done so far", "active", [])
    assert len(orjson.dumps(out)) <= MAX_BYTES and out["summary"] == "done so far"
    kept = [e["time"] for e in out["events"]]
    assert 0 < len(kept) < 20 and kept == [float(t) for t in range(20 - len(kept), 20)]  # the newest, in order
    assert [s["path"] for s in out["steps"]] == [str(i) for i in range(20 - len(out["steps"]), 20)]


def test_steps_keep_their_summary_fields_and_never_params_or_results() -> None:
    step = {"call": 12, "path": "0.1", "action": "fill", "tabId": 3, "status": "failed", "code": "not_found",
            "params": {"value": "K9typed"}, "result": "K9result", "error": "no element matches #K9typed"}
    out = build_checkpoint("g", {}, {}, [step, {**step, "action": "rm -rf"}, {**step, "code": "made_up"}], [], "",
                           "active", [])
    assert out["steps"] == [{"call": 12, "path": "0.1", "action": "fill", "tabId": 3, "status": "failed",
                             "code": "not_found"},
                            {"call": 12, "path": "0.1", "action": "fill", "tabId": 3, "status": "failed"}]


def test_the_summary_is_scrubbed_of_tokens_and_typed_values_but_short_ones_keep_words_whole() -> None:
    summary = "Typed hunter22 into #password, PIN 123; the confirm token was ct_0123456789abcdefghijklmn."
    out = build_checkpoint("g", {}, {}, [], [], summary, "active", ["hunter22", "123"])
    assert out["summary"] == f"Typed {REDACTED} into #password, PIN 123; the confirm token was {REDACTED}."


def test_urls_lose_user_query_and_fragment_and_a_data_url_its_body() -> None:
    assert clean_url("https://u:K9pw@Shop.Test:8443/a/b?token=K9t#K9f") == "https://shop.test:8443/a/b"
    assert clean_url("http://[::1]/x") == "http://[::1]/x"
    assert clean_url("file:///tmp/page.html?x=1") == "file:///tmp/page.html"
    assert clean_url("about:blank") == "about:blank"
    assert clean_url("data:text/html,<p>K9secret</p>") == "data:"
    assert clean_url("javascript:alert(1)") == "javascript:"
    assert clean_url("https://shop.test/reset/" + "a" * 30) == f"https://shop.test/reset/{REDACTED}"
    assert clean_url("https://shop.test/users/K9typed/", ["K9typed"]) == f"https://shop.test/users/{REDACTED}/"
    assert clean_url("http://shop.test:99999/") == "" and clean_url(42) == ""


def test_the_page_s_outline_is_kept_bounded_and_scrubbed() -> None:
    outline = ['- heading "Checkout" [level=1]', '- textbox "Card": 4111K9secret', "- button " + "go " * 200]
    page = {"url": "https://shop.test/", "title": "Shop", "headings": ["Checkout"], "outline": outline * 20}
    out = build_checkpoint("goal", page, page, [], [], "so far", "active", ["4111K9secret"])
    assert_safe(out, ["4111K9secret"])
    kept = out["page"]["outline"]
    assert len(kept) == OUTLINE and kept[:2] == ['- heading "Checkout" [level=1]', '- textbox "Card": [redacted]']
    assert kept[2] == ("- button " + "go " * 200)[:OUTLINE_CHARS]


def test_messages_are_scrubbed_like_the_summary_cut_and_the_newest_kept() -> None:
    said = [{"role": "user", "content": f"step {i}: the code is K9canary and ct_0123456789abcdefghijklmn"}
            for i in range(MESSAGES + 5)]
    said += [{"role": "assistant", "content": "ab " * MESSAGE_BYTES}, {"role": "system", "content": "dropped"},
             {"role": "tool", "content": "  "}]
    out = build_checkpoint("g", {}, {}, [], [], "", "active", ["K9canary"], said)
    assert_safe(out, ["K9canary"])
    long = {"role": "assistant", "content": ("ab " * MESSAGE_BYTES)[:MESSAGE_BYTES]}
    assert len(out["messages"]) == MESSAGES and out["messages"][-1] == long
    assert out["messages"][0]["content"] == f"step 6: the code is {REDACTED} and {REDACTED}"


def test_a_request_s_messages_are_checked_before_anything_is_built() -> None:
    assert checked_messages(None) == [] and checked_messages([{"role": "tool", "content": ""}]) == [
        {"role": "tool", "content": ""}]
    for wrong in ("text", [{"role": "system", "content": "x"}], [{"role": "user"}],
                  [{"role": "user", "content": "x", "extra": 1}], [{"role": "user", "content": "x"}] * (MESSAGES + 1)):
        try:
            checked_messages(wrong)
        except KitsuneError as e:
            assert e.code == "invalid_parameter" and e.state == {"param": "messages", "max": MESSAGES}
        else:
            raise AssertionError(wrong)


def test_the_page_s_version_names_the_page_it_was_taken_on() -> None:
    page = {"url": "https://shop.test/cart?x=1", "title": "Cart", "headings": ["Cart"], "outline": ["- a"]}
    first = build_checkpoint("g", page, page, [], [], "", "active", [])["page"]
    assert first["version"] == page_version(first) and len(first["version"]) == 16
    same = build_checkpoint("g", page, {**page, "url": "https://shop.test/cart", "outline": []}, [], [], "",
                            "active", [])["page"]
    other = build_checkpoint("g", page, {**page, "title": "Checkout"}, [], [], "", "active", [])["page"]
    assert same["version"] == first["version"] != other["version"]
