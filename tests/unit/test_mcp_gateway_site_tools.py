"""The MCP gateway's site tools on a scripted bridge: ``browser_site_tools`` and ``browser_call_site_tool``
send ``siteTools`` and ``callSiteTool`` through ``POST /api/act``, a call is held and approved as any
direct write (its input never in the prompt), and an unknown outcome tells the agent to observe first."""

from __future__ import annotations

import re
from typing import Any

import jsonschema
import mcp_types as types
import pytest

from mcp_gateway._caller import Caller
from mcp_gateway._tools import TOOLS, enabled_tools
from mcp_gateway.server import Gateway
from messages.schema import command_schema
from tests.unit.test_mcp_gateway import PromptingCaller, ScriptedBridge, _held

pytestmark = pytest.mark.anyio

_SEARCH = {"name": "search", "input": {"query": "green tea secret-value"}, "tabId": 3}
_FOUND = {"ok": True, "status": "ok", "call": 7, "tool": "search", "output": {"results": ["Green tea"]},
          "documents": [{"url": "http://shop.test/shop", "frame": "main"}]}


class RecordingCaller(PromptingCaller):
    """A prompting caller that keeps each prompt's message."""

    def __init__(self, bridge: Any, *answers: Any) -> None:
        super().__init__(bridge, *answers)
        self.messages: list[str] = []

    async def prompt(self, message: str, schema: dict[str, Any], wait: float) -> types.ElicitResult | None:
        self.messages.append(message)
        return await super().prompt(message, schema, wait)


def test_both_are_core_tools_with_the_command_language_s_parameters() -> None:
    core = {spec.name for spec in enabled_tools(frozenset({"core"}))}
    automation = {spec.name for spec in enabled_tools(frozenset({"automation"}))}
    assert {"browser_site_tools", "browser_call_site_tool"} <= core - automation
    listing, calling = TOOLS["browser_site_tools"], TOOLS["browser_call_site_tool"]
    assert listing.read_only and not listing.confirmable and set(listing.input_schema["properties"]) == {
        "tabId", "timeout"}
    assert calling.confirmable and not calling.read_only
    schema = calling.input_schema
    assert schema["required"] == ["name"] and set(schema["properties"]) == {
        "name", "input", "tabId", "timeout", "confirm_token"}
    language = command_schema()["$defs"]["callSiteTool"]["properties"]
    assert schema["properties"]["name"]["pattern"] == language["name"]["pattern"]
    assert schema["properties"]["input"] == language["input"] and set(schema["$defs"]) == {"jsonValue"}
    assert "browser_site_tools lists" in calling.description
    assert "#/$defs/reference" not in repr(schema)


def test_every_tool_s_schema_holds_the_definitions_it_refers_to() -> None:
    for name, spec in TOOLS.items():
        refs = set(re.findall(r"'#/\$defs/([A-Za-z]+)'", repr(spec.input_schema)))
        assert refs <= set(spec.input_schema.get("$defs", {})), name
    nested = {"query": "tea", "filters": [{"colour": "green", "max": 9.5}, None, True]}
    jsonschema.validate({"name": "search", "input": nested}, TOOLS["browser_call_site_tool"].input_schema)


def test_the_descriptions_say_what_a_site_tool_is_and_that_an_unknown_outcome_is_observed_first() -> None:
    assert "WebMCP" in TOOLS["browser_site_tools"].description
    assert "not MCP tools" in TOOLS["browser_site_tools"].description
    described = TOOLS["browser_call_site_tool"].description
    for words in ("by its name", "invalid_input", "followed by the node", "navigated mid-execution",
                  "continuation expired", "never blindly"):
        assert words in described, words


async def test_each_sends_its_action_through_api_act_and_answers_the_bridge_s_result() -> None:
    listed = {"ok": True, "status": "ok", "call": 6, "url": "http://shop.test/shop",
              "tools": [{"name": "search", "description": "Search", "inputSchema": {}, "origin": "http://shop.test",
                         "frame": "main"}]}
    bridge = ScriptedBridge({"POST /api/act": [listed, _FOUND]})
    gateway = Gateway(frozenset({"core"}))
    caller = Caller("a", bridge)
    assert await gateway.call(caller, "browser_site_tools", {"tabId": 3}) == listed
    assert await gateway.call(caller, "browser_call_site_tool", _SEARCH) == _FOUND
    assert bridge.acts() == [{"command": {"action": "siteTools", "tabId": 3}},
                             {"command": {"action": "callSiteTool", **_SEARCH}}]
    assert len(gateway.checkpoints) == 0


async def test_a_held_call_is_asked_about_without_its_input_and_sent_again_with_its_confirm_token() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1, action="callSiteTool"), _FOUND]})
    gateway = Gateway(frozenset({"core"}))
    caller = RecordingCaller(bridge, "accept")
    assert await gateway.call(caller, "browser_call_site_tool", _SEARCH) == _FOUND
    assert bridge.acts()[-1] == {"command": {"action": "callSiteTool", **_SEARCH}, "confirm_token": "confirm-1"}
    (message,) = caller.messages
    assert "callSiteTool (name 'search'; input of 1 typed field) on tab 3" in message
    assert "secret-value" not in message and "query" not in message


async def test_a_held_call_without_a_prompt_stops_with_a_checkpoint_and_its_confirm_token() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_held(1, action="callSiteTool"), _FOUND]})
    gateway = Gateway(frozenset({"core"}))
    caller = Caller("a", bridge)
    held = await gateway.call(caller, "browser_call_site_tool", _SEARCH)
    assert (held["code"], held["state"]["confirm_token"]) == ("needs_user", "confirm-1") and held["resume_token"]
    done = await gateway.call(caller, "browser_call_site_tool", {**_SEARCH, "confirm_token": "confirm-1"})
    assert done == _FOUND and gateway.checkpoints.find("a", 1) is None


async def test_an_unknown_outcome_tells_the_agent_to_observe_before_calling_again() -> None:
    navigated = {"error": "The page navigated while the tool ran", "code": "navigated", "retryable": False,
                 "status": "unknown", "call": 9, "state": {"reason": "navigated_mid_execution"}}
    refused = {"error": "input /query: 'query' is a required property", "code": "invalid_input",
               "retryable": False, "status": "failed", "state": {"path": "/query"}}
    bridge = ScriptedBridge({"POST /api/act": [navigated, refused],
                               "GET /api/needs-user": {"needs_user": True, "reason": "sign_in"}})
    gateway = Gateway(frozenset({"core"}))
    unknown = await gateway.call(Caller("a", bridge), "browser_call_site_tool", _SEARCH)
    assert {k: v for k, v in unknown.items() if k != "hint"} == navigated
    assert "navigated_mid_execution" in unknown["hint"] and "never retry it blindly" in unknown["hint"]
    assert await gateway.call(Caller("a", bridge), "browser_call_site_tool", _SEARCH) == refused
    assert len(bridge.acts()) == 2 and len(gateway.checkpoints) == 0


async def test_arguments_the_tool_s_schema_refuses_send_nothing() -> None:
    bridge = ScriptedBridge({"POST /api/act": [_FOUND]})
    gateway = Gateway(frozenset({"core"}))
    refusals: list[dict[str, Any]] = [{"input": {}}, {"name": "search", "input": "query=tea"}, {"name": "not a name"}]
    for arguments in refusals:
        refused = await gateway.call(Caller("a", bridge), "browser_call_site_tool", arguments)
        assert refused["code"] == "invalid_parameter", (arguments, refused)
        assert "tea" not in refused["error"] and "not a name" not in refused["error"]  # never the value itself
    assert bridge.acts() == []
