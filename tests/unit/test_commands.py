"""The command language: parsing, the JSON form, write classification, rejection of bad calls."""

from __future__ import annotations

import json
import typing
from typing import Any

import pytest

from messages.commands import (
    ACTIONS,
    BLOCKS,
    MAX_JS,
    MAX_KEY,
    MAX_NAME,
    MAX_SELECTOR,
    MAX_SESSION_NAME,
    MAX_TEXT,
    MAX_URL,
    Broadcast,
    CallSiteTool,
    Cdp,
    CdpEvents,
    CdpSpec,
    Check,
    Click,
    Clipboard,
    CloseTab,
    Command,
    Cookies,
    Download,
    Fill,
    Find,
    GetTabs,
    If,
    Js,
    KeepSession,
    Limits,
    Navigate,
    NewTab,
    PageText,
    Parallel,
    Param,
    Press,
    ResetSession,
    Retry,
    Screenshot,
    Select,
    Sequence,
    SiteTools,
    Snapshot,
    Storage,
    SubmitForm,
    SwitchTab,
    SyncBarrier,
    Title,
    Try,
    Type,
    Url,
    WaitFor,
    WaitForResult,
    While,
    audit_params,
    command_to_json,
    is_write,
    parameters,
    parse_call,
    parse_command,
    resolve_command,
    secret_values,
)
from messages.contract import MAX_CALL_TIMEOUT, MAX_STEP_TIMEOUT
from messages.errors import KitsuneError
from messages.references import Ref, Template
from messages.schema import batch_schema, command_schema

CLICK = {"action": "click", "selector": "#go"}
READ = {"action": "pageText"}

# One valid JSON command per action, with the typed command it parses to. Every parameter
# given differs from its default, so command_to_json gives the same JSON back.
EXAMPLES: dict[str, tuple[dict[str, Any], Command]] = {
    "navigate": (
        {"action": "navigate", "url": "https://shop.example/login", "waitUntil": "domcontentloaded",
         "tabId": 3},
        Navigate(url="https://shop.example/login", wait_until="domcontentloaded", tab_id=3),
    ),
    "click": (
        {"action": "click", "selector": "#buy", "button": "right", "clickCount": 2, "timeout": 5.5,
         "label": "buy"},
        Click(selector="#buy", button="right", click_count=2, timeout=5.5, label="buy"),
    ),
    "type": (
        {"action": "type", "selector": "#q", "text": "hello ${$0.name}!", "submit": True},
        Type(selector="#q", text=Template(("hello ", Ref(0, ("name",)), "!")), submit=True),
    ),
    "fill": (
        {"action": "fill", "selector": "#email", "value": "ada@example.test"},
        Fill(selector="#email", value="ada@example.test"),
    ),
    "select": (
        {"action": "select", "selector": "#country", "values": ["fr", "${$1.code}"]},
        Select(selector="#country", values=("fr", Ref(1, ("code",)))),
    ),
    "press": (
        {"action": "press", "key": "Control+A", "selector": "textarea"},
        Press(key="Control+A", selector="textarea"),
    ),
    "check": (
        {"action": "check", "selector": "#terms", "checked": False},
        Check(selector="#terms", checked=False),
    ),
    "submitForm": (
        {"action": "submitForm", "selector": "#login"},
        SubmitForm(selector="#login"),
    ),
    "pageText": (
        {"action": "pageText", "selector": "main", "maxChars": 500},
        PageText(selector="main", max_chars=500),
    ),
    "snapshot": (
        {"action": "snapshot", "ref": "t3d2f1e4", "depth": 3, "maxChars": 5000, "offset": 40, "interactive": True,
         "boxes": True, "since": "last"},
        Snapshot(ref="t3d2f1e4", depth=3, max_chars=5000, offset=40, interactive=True, boxes=True, since="last"),
    ),
    "find": (
        {"action": "find", "text": "Sign in", "limit": 5},
        Find(text="Sign in", limit=5),
    ),
    "url": ({"action": "url", "tabId": 2}, Url(tab_id=2)),
    "title": ({"action": "title", "tabId": "${$0.tabId}"}, Title(tab_id=Ref(0, ("tabId",)))),
    "screenshot": (
        {"action": "screenshot", "selector": "#chart", "fullPage": True},
        Screenshot(selector="#chart", full_page=True),
    ),
    "waitFor": (
        {"action": "waitFor", "selector": ".done", "state": "attached", "loadState": "networkidle"},
        WaitFor(selector=".done", state="attached", load_state="networkidle"),
    ),
    "js": ({"action": "js", "code": "return document.title"}, Js(code="return document.title")),
    "waitForResult": (
        {"action": "waitForResult", "code": "window.ready === true", "interval": 0.5},
        WaitForResult(code="window.ready === true", interval=0.5),
    ),
    "syncBarrier": ({"action": "syncBarrier", "barrier": "logged-in"}, SyncBarrier(barrier="logged-in")),
    "newTab": ({"action": "newTab", "url": "https://shop.example/"}, NewTab(url="https://shop.example/")),
    "closeTab": ({"action": "closeTab", "tabId": 4}, CloseTab(tab_id=4)),
    "switchTab": ({"action": "switchTab", "tabId": 5}, SwitchTab(tab_id=5)),
    "getTabs": ({"action": "getTabs"}, GetTabs()),
    "keepSession": ({"action": "keepSession", "name": "shop"}, KeepSession(name="shop")),
    "resetSession": ({"action": "resetSession", "name": "shop"}, ResetSession(name="shop")),
    "cookies": (
        {"action": "cookies", "op": "set",
         "cookies": [{"name": "sid", "value": "c00kie", "url": "https://shop.example"}]},
        Cookies(op="set", cookies=({"name": "sid", "value": "c00kie", "url": "https://shop.example"},)),
    ),
    "storage": (
        {"action": "storage", "op": "set", "area": "session", "key": "cart", "value": "[1,2]"},
        Storage(op="set", area="session", key="cart", value="[1,2]"),
    ),
    "clipboard": (
        {"action": "clipboard", "op": "write", "text": "copied text"},
        Clipboard(op="write", text="copied text"),
    ),
    "download": ({"action": "download", "selector": "a.report"}, Download(selector="a.report")),
    "siteTools": ({"action": "siteTools", "tabId": 2}, SiteTools(tab_id=2)),
    "callSiteTool": (
        {"action": "callSiteTool", "name": "checkout", "input": {"billing_address": "1 Main St", "n": [1, None]}},
        CallSiteTool(name="checkout", input={"billing_address": "1 Main St", "n": [1, None]}),
    ),
    "cdp": ({"action": "cdp", "method": "DOM.getOuterHTML", "params": {"nodeId": 4}},
            Cdp(method="DOM.getOuterHTML", params={"nodeId": 4})),
    "cdpEvents": ({"action": "cdpEvents", "enable": ["Network", "Log"]}, CdpEvents(enable=("Network", "Log"))),
    "cdpSpec": ({"action": "cdpSpec", "domain": "DOM"}, CdpSpec(domain="DOM")),
    "sequence": (
        {"action": "sequence", "steps": [CLICK, {"action": "pageText", "selector": "${$0.selector}"}],
         "tabId": 7},
        Sequence(steps=(Click(selector="#go"), PageText(selector=Ref(0, ("selector",)))), tab_id=7),
    ),
    "parallel": (
        {"action": "parallel", "sequences": [[CLICK], [{"action": "url", "tabId": 2}, READ]]},
        Parallel(sequences=((Click(selector="#go"),), (Url(tab_id=2), PageText()))),
    ),
    "if": (
        {"action": "if", "condition": "document.querySelector('#cookie-banner')",
         "then": [CLICK], "else": [READ]},
        If(condition="document.querySelector('#cookie-banner')", then=(Click(selector="#go"),),
           otherwise=(PageText(),)),
    ),
    "while": (
        {"action": "while", "condition": "!!document.querySelector('.next')",
         "body": [{"action": "click", "selector": ".next"}], "maxIterations": 5},
        While(condition="!!document.querySelector('.next')", body=(Click(selector=".next"),),
              max_iterations=5),
    ),
    "try": (
        {"action": "try", "body": [CLICK], "catch": [{"action": "screenshot"}]},
        Try(body=(Click(selector="#go"),), catch=(Screenshot(),)),
    ),
    "retry": (
        {"action": "retry", "body": [CLICK], "attempts": 2, "delay": 0.5},
        Retry(body=(Click(selector="#go"),), attempts=2, delay=0.5),
    ),
    "broadcast": (
        {"action": "broadcast", "tabIds": [1, "${$0.tabId}"],
         "command": {"action": "navigate", "url": "https://shop.example/"}},
        Broadcast(tab_ids=(1, Ref(0, ("tabId",))), command=Navigate(url="https://shop.example/")),
    ),
}

READS = {"pageText", "snapshot", "find", "url", "title", "screenshot", "waitFor", "getTabs",
         "keepSession",  # keepSession is Kitsune's own: it keeps a session under a name and changes no page
         "siteTools",  # lists what the page declares; callSiteTool runs the page's code: a write
         "cdp",  # its example's method reads (a cdp step reads or writes by its method: tests/unit/test_cdp.py)
         "cdpEvents", "cdpSpec"}


def reject(commands: list[Any], limits: Limits | None = None) -> KitsuneError:
    """The error parse_call rejects ``commands`` with."""
    with pytest.raises(KitsuneError) as caught:
        parse_call("batch", commands, limits=limits or Limits())
    return caught.value


# --- parsing ---------------------------------------------------------------------------------


def test_every_action_and_block_has_an_example() -> None:
    assert set(EXAMPLES) == set(ACTIONS)
    assert len(ACTIONS) == 40
    assert {cls.action for cls in BLOCKS} == {
        "sequence", "parallel", "if", "while", "try", "retry", "broadcast"}


@pytest.mark.parametrize("action", sorted(EXAMPLES))
def test_every_action_parses_to_its_typed_command(action: str) -> None:
    raw, expected = EXAMPLES[action]
    command = parse_command(raw)
    assert type(command) is ACTIONS[action]
    assert command.action == action
    assert command == expected


@pytest.mark.parametrize("action", sorted(EXAMPLES))
def test_every_action_parses_inside_a_valid_call(action: str) -> None:
    raw, expected = EXAMPLES[action]
    prior = {"action": "newTab"}  # references above name step 0 or 1; both are earlier steps
    spec = parse_call("batch", [prior, prior, raw], default_tab=3, stop_on_warning=True, timeout=60)
    assert spec.commands == (NewTab(), NewTab(), expected)
    assert (spec.kind, spec.default_tab, spec.stop_on_warning, spec.timeout) == ("batch", 3, True, 60.0)


def test_parameters_left_out_take_their_defaults() -> None:
    assert parse_command({"action": "click", "selector": "a"}) == Click(
        selector="a", button="left", click_count=1, tab_id=None, timeout=None, label=None)
    assert parse_command({"action": "navigate", "url": "about:blank"}) == Navigate(url="about:blank", wait_until="load")
    assert parse_command({"action": "submitForm"}) == SubmitForm()  # the page's first form (selector "form")
    loop = parse_command({"action": "while", "condition": "x", "body": [READ]})
    assert isinstance(loop, While) and loop.max_iterations == 100


def test_null_for_an_optional_parameter_means_left_out() -> None:
    assert parse_command({"action": "url", "tabId": None, "timeout": None}) == Url()


def test_integer_seconds_parse_as_float() -> None:
    command = parse_command({"action": "click", "selector": "a", "timeout": 5})
    assert command.timeout == 5.0
    assert isinstance(command.timeout, float)


def test_whole_reference_parses_to_ref_and_embedded_reference_to_template() -> None:
    assert parse_command({"action": "click", "selector": "${$2.items.0.css}"}) == Click(
        selector=Ref(2, ("items", "0", "css")))
    assert parse_command({"action": "click", "selector": "#row-${$2.id}"}) == Click(
        selector=Template(("#row-", Ref(2, ("id",)))))
    assert parse_command({"action": "url", "tabId": "${$0.tabId}"}).tab_id == Ref(0, ("tabId",))


def test_text_without_a_reference_opening_stays_a_plain_string() -> None:
    command = parse_command({"action": "fill", "selector": "#price", "value": "$5 {not a ref} $$"})
    assert isinstance(command, Fill) and command.value == "$5 {not a ref} $$"


def test_a_parallel_step_path_names_sequence_then_step() -> None:
    error = reject([{"action": "parallel", "sequences": [[READ], [READ, READ, READ, {"action": "hover"}]]}])
    assert (error.code, error.state) == ("unknown_action", {"path": "0.1.3", "action": "hover"})


def test_a_sequence_step_path_names_the_step_inside_the_sequence() -> None:
    error = reject([READ, {"action": "sequence", "steps": [READ, READ, {"action": "hover"}]}])
    assert error.state == {"path": "1.2", "action": "hover"}


def test_a_block_branch_step_path_names_the_branch() -> None:
    error = reject([READ, {"action": "if", "condition": "1", "then": [READ], "else": [{"action": "hover"}]}])
    assert error.state == {"path": "1.else.0", "action": "hover"}
    error = reject([{"action": "broadcast", "tabIds": [1], "command": {"action": "hover"}}])
    assert error.state == {"path": "0.command", "action": "hover"}


# --- the JSON form ---------------------------------------------------------------------------


@pytest.mark.parametrize("action", sorted(EXAMPLES))
def test_command_to_json_round_trips_through_parse_command(action: str) -> None:
    _, command = EXAMPLES[action]
    assert parse_command(command_to_json(command)) == command


@pytest.mark.parametrize("action", sorted(EXAMPLES))
def test_command_to_json_gives_the_parsed_json_back(action: str) -> None:
    raw, _ = EXAMPLES[action]
    assert command_to_json(parse_command(raw)) == raw


def test_command_to_json_leaves_out_defaults_and_uses_json_names() -> None:
    assert command_to_json(Click(selector="a")) == {"action": "click", "selector": "a"}
    assert command_to_json(If(condition="c", then=(Url(),), otherwise=(Title(),))) == {
        "action": "if", "condition": "c", "then": [{"action": "url"}], "else": [{"action": "title"}]}
    assert command_to_json(PageText(max_chars=10, tab_id=1)) == {"action": "pageText", "maxChars": 10, "tabId": 1}


def test_command_to_json_writes_references_back_as_text() -> None:
    command = Type(selector=Ref(0, ("css",)), text=Template(("Dear ", Ref(1, ("name",)), ",")))
    assert command_to_json(command) == {"action": "type", "selector": "${$0.css}", "text": "Dear ${$1.name},"}


# --- writes ----------------------------------------------------------------------------------


@pytest.mark.parametrize("action", sorted(set(ACTIONS) - {cls.action for cls in BLOCKS}))
def test_actions_write_unless_the_spec_lists_them_as_reads(action: str) -> None:
    _, command = EXAMPLES[action]
    assert is_write(command) is (action not in READS)


@pytest.mark.parametrize("action", ["js", "waitForResult", "syncBarrier", "cookies", "storage", "clipboard",
                                    "download", "navigate", "newTab", "closeTab", "switchTab"])
def test_spec_named_writes_are_writes(action: str) -> None:
    assert is_write(EXAMPLES[action][1]) is True


def test_reading_cookies_storage_and_clipboard_still_counts_as_a_write() -> None:
    assert is_write(Cookies(op="get")) is True
    assert is_write(Storage(op="get")) is True
    assert is_write(Clipboard(op="read")) is True


def test_if_and_while_write_even_with_read_only_branches() -> None:
    assert is_write(If(condition="1", then=(PageText(),), otherwise=(Url(),))) is True
    assert is_write(While(condition="1", body=(Title(),))) is True


def test_broadcast_writes_even_of_a_read() -> None:
    assert is_write(Broadcast(tab_ids=(1, 2), command=PageText())) is True


@pytest.mark.parametrize("block", [
    lambda steps: Sequence(steps=steps),
    lambda steps: Try(body=steps),
    lambda steps: Retry(body=steps),
    lambda steps: Parallel(sequences=((Url(),), steps)),
], ids=["sequence", "try", "retry", "parallel"])
def test_sequence_try_retry_parallel_write_iff_a_child_writes(block: Any) -> None:
    assert is_write(block((PageText(), Find(text="x"), GetTabs()))) is False
    assert is_write(block((PageText(), Click(selector="a")))) is True


def test_try_writes_when_only_its_catch_writes() -> None:
    assert is_write(Try(body=(PageText(),), catch=(Screenshot(),))) is False
    assert is_write(Try(body=(PageText(),), catch=(Js(code="1"),))) is True


def test_a_write_nested_deep_in_read_blocks_makes_each_enclosing_block_a_write() -> None:
    inner = Sequence(steps=(Title(), Retry(body=(Url(), Type(selector="a", text="b")))))
    assert is_write(Try(body=(inner,))) is True
    assert is_write(Try(body=(Sequence(steps=(Title(), Retry(body=(Url(),)))),))) is False


# --- bad calls -------------------------------------------------------------------------------

BAD_CALLS: list[tuple[str, list[Any], str, dict[str, Any]]] = [
    ("unknown action", [READ, {"action": "hover", "selector": "a"}],
     "unknown_action", {"path": "1", "action": "hover"}),
    ("unknown action in a sequence", [{"action": "sequence", "steps": [READ, {"action": "drag"}]}],
     "unknown_action", {"path": "0.1", "action": "drag"}),
    ("no action", [{"selector": "a"}], "missing_parameter", {"path": "0", "param": "action"}),
    ("action is not a string", [{"action": 3}], "missing_parameter", {"path": "0", "param": "action"}),
    ("command is not an object", [READ, "click"], "invalid_call", {"path": "1"}),
    ("missing selector", [{"action": "click"}], "missing_parameter", {"path": "0", "param": "selector"}),
    ("missing url", [READ, READ, {"action": "navigate"}], "missing_parameter", {"path": "2", "param": "url"}),
    ("missing code", [{"action": "js"}], "missing_parameter", {"path": "0", "param": "code"}),
    ("null for a required parameter", [{"action": "fill", "selector": "#a", "value": None}],
     "invalid_parameter", {"path": "0", "param": "value"}),
    ("find with neither selector nor text", [{"action": "find"}],
     "missing_parameter", {"path": "0", "param": "selector"}),
    ("waitFor with nothing to wait for", [{"action": "waitFor", "state": "hidden"}],
     "missing_parameter", {"path": "0", "param": "selector"}),
    ("storage set without a key", [{"action": "storage", "op": "set", "value": "v"}],
     "missing_parameter", {"path": "0", "param": "key"}),
    ("storage set without a value", [{"action": "storage", "op": "set", "key": "k"}],
     "missing_parameter", {"path": "0", "param": "value"}),
    ("clipboard write without text", [{"action": "clipboard", "op": "write"}],
     "missing_parameter", {"path": "0", "param": "text"}),
    ("cookies set without cookies", [{"action": "cookies", "op": "set"}],
     "missing_parameter", {"path": "0", "param": "cookies"}),
    ("selector: 5", [{"action": "click", "selector": 5}], "invalid_parameter", {"path": "0", "param": "selector"}),
    ("optional selector: 5", [{"action": "pageText", "selector": 5}],
     "invalid_parameter", {"path": "0", "param": "selector"}),
    ("tabId: true", [{"action": "url", "tabId": True}], "invalid_parameter", {"path": "0", "param": "tabId"}),
    ("tabId: 1.5", [{"action": "url", "tabId": 1.5}], "invalid_parameter", {"path": "0", "param": "tabId"}),
    ("maxChars as a string", [{"action": "pageText", "maxChars": "10"}],
     "invalid_parameter", {"path": "0", "param": "maxChars"}),
    ("clickCount above its maximum", [{"action": "click", "selector": "a", "clickCount": 4}],
     "invalid_parameter", {"path": "0", "param": "clickCount"}),
    ("negative timeout", [{"action": "click", "selector": "a", "timeout": -1}],
     "invalid_parameter", {"path": "0", "param": "timeout"}),
    ("value outside a literal", [{"action": "navigate", "url": "about:blank", "waitUntil": "never"}],
     "invalid_parameter", {"path": "0", "param": "waitUntil"}),
    ("optional literal outside its values", [{"action": "waitFor", "loadState": "idle"}],
     "invalid_parameter", {"path": "0", "param": "loadState"}),
    ("submit as a string", [{"action": "type", "selector": "a", "text": "b", "submit": "yes"}],
     "invalid_parameter", {"path": "0", "param": "submit"}),
    ("values not a list", [{"action": "select", "selector": "s", "values": "fr"}],
     "invalid_parameter", {"path": "0", "param": "values"}),
    ("values empty", [{"action": "select", "selector": "s", "values": []}],
     "invalid_parameter", {"path": "0", "param": "values"}),
    ("cookie not an object", [{"action": "cookies", "op": "set", "cookies": ["sid=1"]}],
     "invalid_parameter", {"path": "0", "param": "cookies"}),
    ("label: 5", [{"action": "url", "label": 5}], "invalid_parameter", {"path": "0", "param": "label"}),
    ("steps not a list", [{"action": "sequence", "steps": CLICK}],
     "invalid_parameter", {"path": "0", "param": "steps"}),
    ("empty sequence", [{"action": "sequence", "steps": []}], "invalid_parameter", {"path": "0", "param": "steps"}),
    ("empty then", [{"action": "if", "condition": "1", "then": []}],
     "invalid_parameter", {"path": "0", "param": "then"}),
    ("snake_case parameter", [{"action": "url", "tab_id": 1}], "unknown_parameter", {"path": "0", "param": "tab_id"}),
    ("unknown parameter", [READ, {"action": "click", "selector": "a", "force": True}],
     "unknown_parameter", {"path": "1", "param": "force"}),
    ("unknown parameter in a parallel", [{"action": "parallel", "sequences": [[READ], [{**CLICK, "x": 1}]]}],
     "unknown_parameter", {"path": "0.1.0", "param": "x"}),
    ("forward reference", [{"action": "click", "selector": "${$1.css}"}, READ],
     "bad_reference", {"path": "0", "param": "selector"}),
    ("self reference", [READ, {"action": "click", "selector": "${$1.css}"}],
     "bad_reference", {"path": "1", "param": "selector"}),
    ("malformed ${$x}", [READ, {"action": "click", "selector": "${$x}"}],
     "bad_reference", {"path": "1", "param": "selector"}),
    ("unclosed reference", [READ, {"action": "click", "selector": "#a${$0.css"}],
     "bad_reference", {"path": "1", "param": "selector"}),
    ("empty path part", [READ, {"action": "click", "selector": "${$0.}"}],
     "bad_reference", {"path": "1", "param": "selector"}),
    ("malformed after a good reference", [READ, {"action": "click", "selector": "${$0.a}${$b}"}],
     "bad_reference", {"path": "1", "param": "selector"}),
    ("template for an integer", [{"action": "newTab"}, {"action": "url", "tabId": "tab ${$0.tabId}"}],
     "bad_reference", {"path": "1", "param": "tabId"}),
    ("reference where none is allowed", [READ, {"action": "syncBarrier", "barrier": "${$0.name}"}],
     "bad_reference", {"path": "1", "param": "barrier"}),
    ("forward reference in a list", [READ, {"action": "select", "selector": "s", "values": ["a", "${$3}"]}],
     "bad_reference", {"path": "1", "param": "values"}),
    ("sequence step naming itself: 1.2",
     [READ, {"action": "sequence", "steps": [READ, READ, {"action": "click", "selector": "${$2.css}"}]}],
     "bad_reference", {"path": "1.2", "param": "selector"}),
    ("sequence step naming a top-level index not earlier in the sequence",
     [READ, READ, READ, {"action": "sequence", "steps": [{"action": "click", "selector": "${$1.css}"}, READ]}],
     "bad_reference", {"path": "3.0", "param": "selector"}),
    ("parallel step naming a later step: 0.1.3",
     [{"action": "parallel", "sequences": [
         [READ],
         [READ, READ, READ, {"action": "click", "selector": "${$4.css}"}, READ]]}],
     "bad_reference", {"path": "0.1.3", "param": "selector"}),
    ("parallel step naming a step of another sequence",
     [{"action": "parallel", "sequences": [[READ, READ, READ], [{"action": "click", "selector": "${$2.css}"}]]}],
     "bad_reference", {"path": "0.1.0", "param": "selector"}),
    ("block child naming the block itself", [READ, {"action": "try", "body": [
        {"action": "click", "selector": "${$1.css}"}]}],
     "bad_reference", {"path": "1.body.0", "param": "selector"}),
    ("block's own parameter naming itself", [READ, {"action": "retry", "tabId": "${$1.tabId}", "body": [READ]}],
     "bad_reference", {"path": "1", "param": "tabId"}),
    ("sequence in an if branch naming a later step", [READ, {"action": "if", "condition": "1", "then": [
        {"action": "sequence", "steps": [READ, {"action": "click", "selector": "${$1.css}"}]}]}],
     "bad_reference", {"path": "1.then.0.1", "param": "selector"}),
    ("broadcast tab naming itself", [{"action": "broadcast", "tabIds": ["${$0.tabId}"], "command": READ}],
     "bad_reference", {"path": "0", "param": "tabIds"}),
    ("parallel with no sequences", [{"action": "parallel", "sequences": []}],
     "empty_parallel", {"path": "0", "param": "sequences"}),
    ("empty sequence in a parallel", [READ, {"action": "parallel", "sequences": [[READ], []]}],
     "empty_parallel", {"path": "1.1"}),
    ("broadcast command with a tabId", [READ, READ, {"action": "broadcast", "tabIds": [1, 2],
                                                     "command": {**CLICK, "tabId": 3}}],
     "invalid_parameter", {"path": "2", "param": "command"}),
    ("broadcast of a block", [{"action": "broadcast", "tabIds": [1], "command": {"action": "sequence",
                                                                              "steps": [READ]}}],
     "invalid_parameter", {"path": "0", "param": "command"}),
    ("broadcast to no tabs", [{"action": "broadcast", "tabIds": [], "command": READ}],
     "invalid_parameter", {"path": "0", "param": "tabIds"}),
    ("timeout of a day", [{"action": "click", "selector": "a", "timeout": 86400}],
     "invalid_parameter", {"path": "0", "param": "timeout"}),
    ("timeout 1e300", [READ, {"action": "waitFor", "selector": "a", "timeout": 1e300}],
     "invalid_parameter", {"path": "1", "param": "timeout"}),
    ("timeout NaN", [{"action": "url", "timeout": float("nan")}],
     "invalid_parameter", {"path": "0", "param": "timeout"}),
    ("timeout infinity", [{"action": "url", "timeout": float("inf")}],
     "invalid_parameter", {"path": "0", "param": "timeout"}),
    ("timeout past the maximum in a sequence", [{"action": "sequence", "steps": [READ, {**CLICK, "timeout": 301}]}],
     "invalid_parameter", {"path": "0.1", "param": "timeout"}),
    ("retry delay infinity", [{"action": "retry", "delay": float("inf"), "body": [READ]}],
     "invalid_parameter", {"path": "0", "param": "delay"}),
    ("a 900 KB selector", [{"action": "click", "selector": "a" * 900_000}],
     "invalid_parameter", {"path": "0", "param": "selector"}),
    ("a selector one past its maximum", [{"action": "pageText", "selector": "a" * (MAX_SELECTOR + 1)}],
     "invalid_parameter", {"path": "0", "param": "selector"}),
    ("a long option value", [{"action": "select", "selector": "s", "values": ["a", "b" * (MAX_SELECTOR + 1)]}],
     "invalid_parameter", {"path": "0", "param": "values"}),
    ("a long URL", [{"action": "navigate", "url": "https://a.example/" + "p" * MAX_URL}],
     "invalid_parameter", {"path": "0", "param": "url"}),
    ("a long typed value", [{"action": "fill", "selector": "a", "value": "v" * (MAX_TEXT + 1)}],
     "invalid_parameter", {"path": "0", "param": "value"}),
    ("a long JavaScript body", [{"action": "js", "code": "1;" * MAX_JS}],
     "invalid_parameter", {"path": "0", "param": "code"}),
    ("a long key", [{"action": "press", "key": "k" * (MAX_KEY + 1)}],
     "invalid_parameter", {"path": "0", "param": "key"}),
    ("a long label", [{"action": "url", "label": "l" * (MAX_NAME + 1)}],
     "invalid_parameter", {"path": "0", "param": "label"}),
    ("a long reference for a tab", [{"action": "newTab"}, {"action": "url", "tabId": "${$0." + "a" * 300 + "}"}],
     "invalid_parameter", {"path": "1", "param": "tabId"}),
    ("a nested partitionKey", [{"action": "cookies", "op": "set", "cookies": [
        {"name": "n", "value": "v", "url": "https://a.example", "partitionKey": {"a": {"a": {}}}}]}],
     "invalid_parameter", {"path": "0", "param": "cookies"}),
    ("an unknown cookie field", [{"action": "cookies", "op": "set", "cookies": [{"name": "n", "value": "v", "x": 1}]}],
     "invalid_parameter", {"path": "0", "param": "cookies"}),
    ("a cookie without a value", [{"action": "cookies", "op": "set", "cookies": [{"name": "n"}]}],
     "invalid_parameter", {"path": "0", "param": "cookies"}),
    ("a cookie expiring at infinity", [{"action": "cookies", "op": "set", "cookies": [
        {"name": "n", "value": "v", "expires": float("inf")}]}],
     "invalid_parameter", {"path": "0", "param": "cookies"}),
    ("a cookie sameSite outside its values", [{"action": "cookies", "op": "set", "cookies": [
        {"name": "n", "value": "v", "sameSite": "lax"}]}], "invalid_parameter", {"path": "0", "param": "cookies"}),
]


@pytest.mark.parametrize(("commands", "code", "state"), [case[1:] for case in BAD_CALLS],
                         ids=[case[0] for case in BAD_CALLS])
def test_bad_call_is_rejected_whole_with_its_code_and_path(commands: list[Any], code: str,
                                                           state: dict[str, Any]) -> None:
    error = reject(commands)
    assert error.code == code
    assert error.state == state
    assert error.http_status == 400
    assert error.retryable is False
    assert error.message.startswith(f"command {state['path']}: ")


def test_a_bad_last_command_rejects_a_call_of_good_commands() -> None:
    error = reject([CLICK, READ, {"action": "navigate", "url": "https://a.example"}, {"action": "click"}])
    assert (error.code, (error.state or {}).get("path")) == ("missing_parameter", "3")


def test_earlier_reference_is_accepted_at_every_level() -> None:
    spec = parse_call("batch", [
        {"action": "newTab"},
        {"action": "click", "tabId": "${$0.tabId}", "selector": "a"},
        {"action": "sequence", "steps": [
            {"action": "find", "text": "Buy"},
            {"action": "click", "selector": "${$0.matches.0.selector}"}]},
        {"action": "parallel", "sequences": [
            [{"action": "newTab"}, {"action": "url", "tabId": "${$0.tabId}"}]]},
        {"action": "if", "condition": "1", "then": [{"action": "click", "selector": "${$2.css}"}]},
    ])
    commands: Any = spec.commands  # the blocks' fields, read without narrowing each command's type
    assert commands[1].tab_id == Ref(0, ("tabId",))
    assert commands[2].steps[1].selector == Ref(0, ("matches", "0", "selector"))
    assert commands[3].sequences[0][1].tab_id == Ref(0, ("tabId",))
    assert commands[4].then[0].selector == Ref(2, ("css",))


def test_parse_command_alone_does_not_check_reference_order() -> None:
    assert parse_command({"action": "click", "selector": "${$9}"}) == Click(selector=Ref(9))


def test_nesting_deeper_than_max_depth_is_rejected_at_the_too_deep_command() -> None:
    nested = [{"action": "sequence", "steps": [{"action": "try", "body": [CLICK]}]}]
    error = reject(nested, Limits(max_depth=2))
    assert (error.code, error.state, error.http_status) == ("too_deep", {"path": "0.0.body.0"}, 400)
    assert parse_call("batch", nested, limits=Limits(max_depth=3)).commands == (
        Sequence(steps=(Try(body=(Click(selector="#go"),)),)),)


def test_top_level_commands_are_depth_one() -> None:
    assert parse_call("batch", [CLICK], limits=Limits(max_depth=1)).commands == (Click(selector="#go"),)
    error = reject([READ, {"action": "sequence", "steps": [READ]}], Limits(max_depth=1))
    assert (error.code, error.state) == ("too_deep", {"path": "1.0"})


def test_more_commands_than_max_commands_is_rejected_counting_block_steps() -> None:
    commands = [READ, {"action": "sequence", "steps": [READ, READ]}]  # 4 commands in all
    assert len(parse_call("batch", commands, limits=Limits(max_commands=4)).commands) == 2
    error = reject(commands, Limits(max_commands=3))
    assert (error.code, error.state, error.http_status) == ("too_many_commands", {"path": "1.1"}, 400)


def test_default_limits_allow_1000_commands_and_no_more() -> None:
    assert len(parse_call("batch", [READ] * 1000).commands) == 1000
    error = reject([READ] * 1001)
    assert (error.code, error.state) == ("too_many_commands", {"path": "1000"})


@pytest.mark.parametrize(("kwargs", "code", "param"), [
    ({"commands": []}, "invalid_call", None),
    ({"commands": CLICK}, "invalid_call", None),
    ({"default_tab": True}, "invalid_parameter", "tabId"),
    ({"default_tab": "3"}, "invalid_parameter", "tabId"),
    ({"stop_on_warning": 1}, "invalid_parameter", "stopOnWarning"),
    ({"timeout": 0}, "invalid_parameter", "timeout"),
    ({"timeout": 3601}, "invalid_parameter", "timeout"),
    ({"timeout": True}, "invalid_parameter", "timeout"),
    ({"timeout": 86400}, "invalid_parameter", "timeout"),
    ({"timeout": 1e300}, "invalid_parameter", "timeout"),
    ({"timeout": float("nan")}, "invalid_parameter", "timeout"),
    ({"timeout": float("inf")}, "invalid_parameter", "timeout"),
])
def test_bad_call_options_are_rejected_with_an_empty_path(kwargs: dict[str, Any], code: str,
                                                          param: str | None) -> None:
    commands = kwargs.pop("commands", [CLICK])
    with pytest.raises(KitsuneError) as caught:
        parse_call("batch", commands, **kwargs)
    expected_state = {"path": ""} if param is None else {"path": "", "param": param}
    assert (caught.value.code, caught.value.state, caught.value.http_status) == (code, expected_state, 400)
    assert caught.value.message.startswith("call: ")


def test_error_messages_name_no_typed_value() -> None:
    error = reject([{"action": "type", "selector": "#pw", "text": "hunter2", "submit": "hunter2-flag"}])
    assert error.state == {"path": "0", "param": "submit"}
    assert "hunter2" not in error.message


# --- secrets ---------------------------------------------------------------------------------


def test_secret_values_are_typed_text_and_javascript_bodies() -> None:
    assert secret_values(Type(selector="#pw", text="hunter2")) == ["hunter2"]
    assert secret_values(Fill(selector="#card", value="4111 1111")) == ["4111 1111"]
    assert secret_values(Storage(op="set", key="token", value="tok-123")) == ["tok-123"]
    assert secret_values(Clipboard(op="write", text="clip")) == ["clip"]
    assert secret_values(Js(code="return 1")) == ["return 1"]
    assert secret_values(WaitForResult(code="window.done")) == ["window.done"]
    assert secret_values(While(condition="more()", body=(Url(),))) == ["more()"]


def test_actions_without_typed_values_have_no_secrets() -> None:
    for action in ("navigate", "click", "select", "press", "check", "submitForm", "pageText", "snapshot", "find",
                   "url", "title", "screenshot", "waitFor", "syncBarrier", "newTab", "closeTab", "switchTab",
                   "getTabs", "download", "keepSession"):
        assert secret_values(EXAMPLES[action][1]) == [], action


def test_a_site_tools_input_is_a_typed_value_whose_keys_the_audit_keeps() -> None:
    command = CallSiteTool(name="checkout", input={"card": "4111 1111", "address": {"street": "canary"}})
    assert set(secret_values(command)) == {"4111 1111", "canary"}
    assert audit_params(command) == {"name": "checkout", "input": {"card": "[redacted]", "address": "[redacted]"}}
    assert "${$0.x}" in str(parse_command({"action": "callSiteTool", "name": "t", "input": {"q": "${$0.x}"}}))


def test_a_site_tools_name_and_input_are_checked_before_anything_runs() -> None:
    for bad, param in (({"name": "no spaces"}, "name"), ({"name": "t", "input": [1]}, "input"),
                       ({"name": "t", "input": "x"}, "input")):
        error = reject([{"action": "callSiteTool", **bad}])
        assert (error.code, (error.state or {}).get("param")) == ("invalid_parameter", param), bad


def test_secret_values_of_a_template_are_its_literal_parts_not_its_references() -> None:
    command = Type(selector="#q", text=Template(("user-", Ref(0, ("name",)), "-pw")))
    assert secret_values(command) == ["user-", "-pw"]
    assert secret_values(Type(selector="#q", text=Ref(0, ("pw",)))) == []


def test_secret_values_include_cookie_values() -> None:
    command = Cookies(op="set", cookies=({"name": "sid", "value": "c00kie-secret"},))
    assert "c00kie-secret" in secret_values(command)


def test_secret_values_skip_empty_strings() -> None:
    assert secret_values(Fill(selector="#q", value="")) == []


def test_secret_values_collect_from_every_nested_block() -> None:
    command = Parallel(sequences=(
        (Type(selector="a", text="one"),),
        (Sequence(steps=(Fill(selector="b", value="two"),)),
         If(condition="cond()", then=(Js(code="then()"),), otherwise=(Type(selector="c", text="else"),)),
         Try(body=(Clipboard(op="write", text="body"),), catch=(Js(code="catch()"),)),
         Retry(body=(Storage(op="set", key="k", value="retry"),)),
         Broadcast(tab_ids=(1,), command=Fill(selector="d", value="bcast"))),
    ))
    assert secret_values(command) == [
        "one", "two", "cond()", "then()", "else", "body", "catch()", "retry", "bcast"]


def test_secret_values_leave_out_selectors_urls_and_keys() -> None:
    assert secret_values(Storage(op="set", key="session-key", value="v")) == ["v"]
    assert secret_values(Navigate(url="https://secret-free.example/")) == []


NESTED_PARALLEL = {"action": "parallel", "sequences": [[READ]]}


@pytest.mark.parametrize(("commands", "path"), [
    ([{"action": "sequence", "steps": [NESTED_PARALLEL]}], "0.0"),
    ([{"action": "parallel", "sequences": [[READ, NESTED_PARALLEL]]}], "0.0.1"),
    ([READ, {"action": "try", "body": [NESTED_PARALLEL]}], "1.body.0"),
], ids=["in a sequence", "in a parallel", "in a try"])
def test_a_parallel_runs_only_as_a_top_level_command(commands: list[Any], path: str) -> None:
    error = reject(commands)
    assert (error.code, error.state, error.http_status) == ("invalid_call", {"path": path}, 400)


# --- bounds ----------------------------------------------------------------------------------


def _takes_text(tp: Any) -> bool:
    return tp is str or any(_takes_text(arg) for arg in typing.get_args(tp)) or typing.is_typeddict(tp)


STRING_PARAMS = [(action, param) for action, cls in ACTIONS.items() for param in parameters(cls)
                 if _takes_text(param.type) and param.type is not Command]


@pytest.mark.parametrize(("action", "param"), STRING_PARAMS, ids=[f"{a}.{p.json_name}" for a, p in STRING_PARAMS])
def test_every_string_parameter_has_a_maximum_the_schema_shows(action: str, param: Param) -> None:
    limit = param.meta["max_length"]
    defs = command_schema()["$defs"]
    shown = json.dumps(defs[action]["properties"][param.json_name])
    if '"#/$defs/jsonValue"' in shown:  # a JSON object's strings are bounded where its values are defined
        shown = json.dumps(defs["jsonValue"])
    assert limit in {MAX_SELECTOR, MAX_URL, MAX_TEXT, MAX_JS, MAX_KEY, MAX_NAME, MAX_SESSION_NAME}
    assert f'"maxLength": {limit}' in shown


def test_a_string_at_its_maximum_is_accepted() -> None:
    assert parse_command({"action": "click", "selector": "a" * MAX_SELECTOR}) == Click(selector="a" * MAX_SELECTOR)
    assert parse_command({"action": "url", "timeout": MAX_STEP_TIMEOUT}) == Url(timeout=MAX_STEP_TIMEOUT)


def test_every_timeout_shows_its_maximum_in_the_schema() -> None:
    assert command_schema()["$defs"]["click"]["properties"]["timeout"]["maximum"] == MAX_STEP_TIMEOUT == 300
    assert batch_schema()["properties"]["timeout"]["maximum"] == MAX_CALL_TIMEOUT == 3600


def test_a_referenced_value_past_a_bound_is_refused_when_resolved() -> None:
    timed = parse_command({"action": "click", "selector": "${$0.css}", "timeout": "${$0.seconds}"})
    with pytest.raises(KitsuneError) as caught:
        resolve_command(timed, lambda step: {"css": "a", "seconds": 86400})
    assert (caught.value.code, caught.value.state) == ("invalid_parameter", {"param": "timeout"})
    with pytest.raises(KitsuneError) as caught:
        resolve_command(timed, lambda step: {"css": "a" * (MAX_SELECTOR + 1), "seconds": 1})
    assert (caught.value.code, caught.value.state) == ("invalid_parameter", {"param": "selector"})


def test_a_cookie_with_every_field_parses() -> None:
    cookie = {"name": "n", "value": "v", "url": "https://a.example", "path": "/", "expires": 1, "httpOnly": True,
              "secure": True, "sameSite": "Lax", "partitionKey": "https://a.example"}
    parsed = parse_command({"action": "cookies", "op": "set", "cookies": [cookie]})
    assert parsed == Cookies(op="set", cookies=({**cookie, "expires": 1.0},))  # type: ignore[typeddict-item]


def test_a_command_that_takes_a_selector_takes_a_ref_instead_never_both() -> None:
    assert parse_command({"action": "click", "ref": "t3d2e13"}) == Click(ref="t3d2e13")
    assert parse_command({"action": "fill", "ref": "t3d2f1e4", "value": "x"}) == Fill(ref="t3d2f1e4", value="x")
    assert parse_command({"action": "pageText", "ref": "t3d2e1"}) == PageText(ref="t3d2e1")
    both = reject([{"action": "click", "selector": "#go", "ref": "t3d2e13"}])
    assert (both.code, (both.state or {}).get("param")) == ("invalid_parameter", "ref")
    neither = reject([{"action": "fill", "value": "x"}])
    assert (neither.code, (neither.state or {}).get("param")) == ("missing_parameter", "selector")
    bare = reject([{"action": "click", "ref": "e13"}])  # Playwright's own ref, without its tab and document
    assert (bare.code, (bare.state or {}).get("param")) == ("invalid_parameter", "ref")
    assert parse_call("batch", [{"action": "snapshot"}, {"action": "click", "ref": "${$0.document}e13"}]).commands
