"""The MCP server: Kitsune's tools over the bridge's HTTP API, and direct-call checkpoints.

One :class:`Gateway` serves every MCP connection of one transport (stdio, or ``/mcp`` on a node).
It is built on the SDK's low-level ``Server``, so tool input schemas are the command language's
own JSON Schema. Each tool call runs as one agent: the agent whose bearer token the transport
carries, and the bridge checks that token on every request the gateway makes for it.

Container tools (``browser_batch``, ``browser_parallel``, ``browser_workflow``) pass their body to
the bridge, whose checkpoints they use. Direct tools send one request per write through
``POST /api/act``; a direct call that stops on ``needs_user`` keeps a checkpoint here (spec:
Direct calls), and ``browser_resume`` continues it from its held request.

Approval prompts are elicitation requests the server sends during the tool call, which the
handshake protocol (2025-11-25 and earlier) carries. A client on the 2026-07-28 per-request
protocol cannot take a server request during a call; it is served as a client without
elicitation: a hold answers ``needs_user`` with the confirm token, never a prompt.
"""

from __future__ import annotations

import json
import logging
import math
import os
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from contextlib import asynccontextmanager, suppress
from dataclasses import dataclass, field, replace
from importlib.metadata import version
from typing import Any, Literal

import anyio
import jsonschema  # type: ignore[import-untyped]
import mcp_types as types
from mcp.server.context import ServerRequestContext
from mcp.server.lowlevel.server import Server
from mcp.shared.exceptions import MCPError

from mcp_gateway._bridge import Bridge
from mcp_gateway._checkpoints import Continuations, DirectCheckpoint, DirectCheckpoints, StopKind
from mcp_gateway._tools import TOOLS, ToolSpec, enabled_tools
from messages.contract import APPROVAL_PROMPT_MAX, CALL_TIMEOUT, CONFIRM_TTL, RESUME_DEADLINE, SETTLE, STEP_TIMEOUT

__all__ = ["PAGE_STATE_CHECKS", "PROGRESS_EVERY", "RESUME_WAIT_MAX", "Caller", "Gateway",
           "PageCheck", "approval_wait_from_env"]

log = logging.getLogger(__name__)

PageCheck = Callable[[Bridge, int], Awaitable[bool]]
"""Whether a stop the page resolves is resolved now on a tab (a failed read is not resolved)."""


def _hint_gone(reason: str) -> PageCheck:
    async def check(bridge: Bridge, tab: int) -> bool:
        answer = await bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
        if "error" in answer:
            return False  # a failed read is not resolved
        return not (answer.get("needs_user") and answer.get("reason") == reason)

    check.__doc__ = f"Resolved once the tab no longer shows a needs-user hint with reason {reason!r}."
    return check


PAGE_STATE_CHECKS: dict[str, PageCheck] = {
    "sign_in": _hint_gone("sign_in"),
    "human_check": _hint_gone("human_check"),
}
"""Stops the page resolves, by ``state.reason`` (the spec's ``kitsune.server.PAGE_STATE_CHECKS``):
``browser_resume`` polls the check every second for up to ``wait`` seconds before it runs the call
again, and returns the stop again (with a new resume token, nothing sent) while it fails."""

ASK_MAX = 120.0
"""A browser_ask_user prompt stays open at most this long."""
RESUME_WAIT_MAX = 300.0
"""browser_resume's wait is capped at this."""
PROGRESS_EVERY = 10.0
"""Seconds between progress notifications while the gateway waits for a person or a page."""
POLL_EVERY = 1.0
"""Seconds between checks of a page state."""

PAGE_FAILURES = frozenset({"not_found", "not_actionable", "not_editable", "timeout", "wrong_element",
                           "option_not_found"})
"""Failures of a request that sent nothing to the page because its target was not there: on a tab
that shows a needs-user hint they are a stop the page resolves."""


def approval_wait_from_env(env: Mapping[str, str] | None = None) -> float:
    """``KITSUNE_APPROVAL_WAIT``: how long a direct call's approval prompt stays open (0 to 115 s, default 115)."""
    raw = (os.environ if env is None else env).get("KITSUNE_APPROVAL_WAIT", "").strip()
    try:
        value = float(raw) if raw else APPROVAL_PROMPT_MAX
    except ValueError:
        value = APPROVAL_PROMPT_MAX
    return min(max(value, 0.0), APPROVAL_PROMPT_MAX) if math.isfinite(value) else APPROVAL_PROMPT_MAX


# --- callers --------------------------------------------------------------------------------------------


@dataclass
class Caller:
    """One tool call: the agent it runs as, its bridge, and its MCP request (prompts, progress)."""

    agent: str
    """Whose checkpoints it sees: the MCP client's (stdio: the one client; HTTP: the agent's session)."""
    bridge: Bridge
    ctx: ServerRequestContext[Any, Any] | None = None
    sent: bool = False
    """Whether a request that may act on a page has been sent during this call."""

    @property
    def elicits(self) -> bool:
        """Whether the client can show a prompt now (elicitation, on a channel that carries requests)."""
        if self.ctx is None:
            return False
        capabilities = self.ctx.session.client_capabilities
        return capabilities is not None and capabilities.elicitation is not None and self.ctx.session.can_send_request

    async def progress(self, done: float, total: float, message: str) -> None:
        if self.ctx is not None:
            with suppress(Exception):  # a call that sent no progressToken gets nothing
                await self.ctx.session.report_progress(done, total, message)

    async def prompt(self, message: str, schema: dict[str, Any], wait: float) -> types.ElicitResult | None:
        """The user's answer, or None when the prompt was not answered within ``wait`` seconds.

        While it is open, a call that sent a progressToken gets a notification every 10 s. A prompt
        given up on is cancelled at the client (notifications/cancelled).
        """
        if self.ctx is None or wait <= 0:
            return None
        ctx = self.ctx
        async with _ticking(self, wait, "waiting for the user's answer"):
            with anyio.move_on_after(wait):
                try:
                    return await ctx.session.elicit_form(message, schema, related_request_id=ctx.request_id)
                except (MCPError, ValueError):
                    return None  # the client could not show it: as good as no answer
        return None


@asynccontextmanager
async def _ticking(caller: Caller, total: float, message: str) -> AsyncIterator[None]:
    """Progress notifications every ``PROGRESS_EVERY`` seconds while the body runs."""
    async def tick() -> None:
        started = anyio.current_time()
        while True:
            await anyio.sleep(PROGRESS_EVERY)
            await caller.progress(round(anyio.current_time() - started, 1), total, message)

    async with anyio.create_task_group() as group:
        group.start_soon(tick)
        try:
            yield
        finally:
            group.cancel_scope.cancel()


# --- results --------------------------------------------------------------------------------------------


def _error(code: str, message: str, **state: Any) -> dict[str, Any]:
    body: dict[str, Any] = {"error": message, "code": code, "retryable": False}
    if state:
        body["state"] = state
    return body


def _status(result: Mapping[str, Any]) -> str:
    status = result.get("status")
    if isinstance(status, str):
        return status
    return "failed" if "error" in result else "ok"


def _step(command: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    return {"action": command["action"], "status": _status(result), "call": result.get("call")}


def _describe(command: Mapping[str, Any]) -> str:
    """A command as a person reads it in a prompt; typed values are counted, never shown."""
    action = str(command["action"])
    parts = []
    for key in ("url", "selector", "key"):
        if isinstance(command.get(key), str):
            parts.append(f"{key} {command[key]!r}")
    if isinstance(command.get("values"), list):
        parts.append(f"values {', '.join(map(str, command['values']))}")
    for key in ("text", "value"):
        if isinstance(command.get(key), str):
            parts.append(f"{len(command[key])} typed characters")
    return action + (f" ({'; '.join(parts)})" if parts else "")


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this action",
                               "description": "Yes to let the agent do it now; no to refuse."}},
    "required": ["approve"],
}

_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "title": "Answer",
                   "oneOf": [{"const": "done", "title": "Done"}, {"const": "cant", "title": "Can't"}]},
        "note": {"type": "string", "title": "Note", "description": "Anything the agent should know."},
    },
    "required": ["answer"],
}


@dataclass
class _Outcome:
    """What one request came to after its hold (if any) was settled."""

    kind: Literal["ok", "stop", "final"]
    result: dict[str, Any]
    stop: StopKind | None = None
    tab: int | None = None
    decision: str | None = None


@dataclass
class _Plan:
    """A direct call's requests to the bridge, and where a run of it starts."""

    tool: ToolSpec
    arguments: dict[str, Any]
    """Without confirm_token."""
    commands: list[dict[str, Any]]
    start: int = 0
    done: list[dict[str, Any]] = field(default_factory=list)
    """Step records of the requests before ``start`` (they ran ok)."""
    confirm_token: str | None = None
    """Sent with the request at ``start`` only."""
    call: int | None = None
    """The checkpoint's call when this run resumes one (kept across resumes)."""
    tab: int | None = None
    """The tab the call runs on when known (a resume pins it)."""
    prompt_wait: float = APPROVAL_PROMPT_MAX


def _commands(tool: str, args: Mapping[str, Any], tab: int | None) -> list[dict[str, Any]]:
    """The bridge commands a direct tool sends, one per write, in order."""
    common: dict[str, Any] = {}
    if args.get("tabId") is not None:
        common["tabId"] = args["tabId"]
    elif tab is not None:
        common["tabId"] = tab
    if args.get("timeout") is not None:
        common["timeout"] = args["timeout"]
    own = {k: v for k, v in args.items() if k not in ("tabId", "timeout", "confirm_token")}
    if tool == "browser_type":
        submit = bool(own.pop("submit", False))
        typed = [{"action": "type", **own, **common}]
        if submit:
            typed.append({"action": "press", "key": "Enter", "selector": own["selector"], **common})
        return typed
    if tool == "browser_fill_form":
        return [{"action": "fill", "selector": f["selector"], "value": f["value"], **common} for f in own["fields"]]
    action = {"browser_navigate": "navigate", "browser_click": "click", "browser_select": "select",
              "browser_press": "press", "browser_page_text": "pageText", "browser_find": "find",
              "browser_screenshot": "screenshot"}[tool]
    return [{"action": action, **own, **common}]


def _act_timeout(command: Mapping[str, Any]) -> float:
    timeout = command.get("timeout")
    seconds = float(timeout) if isinstance(timeout, int | float) else STEP_TIMEOUT
    return max(seconds, STEP_TIMEOUT) + SETTLE + 15.0


# --- the gateway ----------------------------------------------------------------------------------------


Identify = Callable[[ServerRequestContext[Any, Any]], Caller]
"""Who a request runs as: its agent and bridge."""


_BRIDGE_PARSED = frozenset({"browser_batch", "browser_parallel", "browser_workflow"})
"""Tools whose arguments are a call body the bridge parses strictly (a 400 naming the bad command's
path, relayed as is): a second check against the JSON Schema here cost 15 ms (90 ms on a loaded
machine) for a 20-command batch, against the parser's 0.2 ms."""


class Gateway:
    """Kitsune's MCP tools for every connection of one transport; direct-call checkpoints in memory."""

    def __init__(self, caps: frozenset[str], *, approval_wait: float = APPROVAL_PROMPT_MAX,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.caps = caps
        """The capability groups this gateway offers (those the bridge also enables are listed)."""
        self.approval_wait = min(max(approval_wait, 0.0), APPROVAL_PROMPT_MAX)
        """How long a direct call's approval prompt stays open."""
        self.checkpoints = DirectCheckpoints(clock)
        self.continuations = Continuations(clock, ttl=CONFIRM_TTL)
        self._clock = clock
        self._bridge_caps: dict[str, tuple[float, frozenset[str]]] = {}
        self._validators = {name: jsonschema.Draft202012Validator(spec.input_schema) for name, spec in TOOLS.items()
                            if name not in _BRIDGE_PARSED}

    def server(self, identify: Identify, name: str = "kitsune") -> Server[Any]:
        """An MCP server over this gateway; ``identify`` says who each request runs as."""
        async def list_tools(ctx: ServerRequestContext[Any, Any],
                             params: types.PaginatedRequestParams | None) -> types.ListToolsResult:
            caps = await self.enabled_caps(identify(ctx))
            return types.ListToolsResult(tools=[_tool(spec) for spec in enabled_tools(caps)])

        async def call_tool(ctx: ServerRequestContext[Any, Any],
                            params: types.CallToolRequestParams) -> types.CallToolResult:
            try:
                result = await self.call(identify(ctx), params.name, dict(params.arguments or {}))
            except Exception as e:  # a bug here must not take the connection down
                log.exception("tool %s failed", params.name)
                result = _error("internal", f"The gateway failed ({type(e).__name__})")
            return to_call_tool_result(result)

        return Server(name, version=version("kitsune"), title="Kitsune",
                      instructions="Browser tools on real Chromium tabs. A result with call and resume_token "
                                   "can be continued with browser_resume; nothing that ran ok is sent again.",
                      on_list_tools=list_tools, on_call_tool=call_tool)

    async def enabled_caps(self, caller: Caller) -> frozenset[str]:
        """This gateway's groups that the bridge enables too (its GET /api/caps, cached 30 s)."""
        now = self._clock()
        cached = self._bridge_caps.get(caller.agent)
        if cached is None or cached[0] <= now:
            answer = await caller.bridge.get("/api/caps", timeout=10.0)
            groups = answer.get("caps")
            if "error" in answer or not isinstance(groups, list):
                return self.caps
            cached = (now + 30.0, frozenset(str(g) for g in groups))
            self._bridge_caps[caller.agent] = cached
        return self.caps & cached[1]

    async def call(self, caller: Caller, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        """Run one tool call; its structured result (an ``error`` key when it did not succeed)."""
        spec = TOOLS.get(name)
        if spec is None:
            return _error("unknown_tool", f"No tool named {name!r}")
        if not spec.groups & await self.enabled_caps(caller):
            return _error("capability_disabled", f"{name} is in the {'/'.join(sorted(spec.groups))} capability "
                          "group, which is not enabled (KITSUNE_CAPS)")
        problem = None if name in _BRIDGE_PARSED else next(
            iter(sorted(self._validators[name].iter_errors(arguments), key=lambda e: list(e.path))), None)
        if problem is not None:
            where = "/".join(str(p) for p in problem.path)
            return _error("invalid_parameter", f"{name}: {where + ': ' if where else ''}{problem.message}",
                          param=where or None)
        if name in ("browser_batch", "browser_parallel"):
            return await self._container(caller, "/api/" + name.removeprefix("browser_"), arguments)
        if name == "browser_workflow":
            return await self._container(caller, "/api/workflow", arguments)
        if name == "browser_resume":
            return await self.resume(caller, arguments)
        if name == "browser_tabs":
            return await self._tabs(caller, arguments)
        if name == "browser_ask_user":
            return await self._ask_user(caller, arguments)
        return await self._direct(caller, spec, arguments)

    # containers

    async def _container(self, caller: Caller, path: str, body: dict[str, Any]) -> dict[str, Any]:
        timeout = body.get("timeout", CALL_TIMEOUT)
        caller.sent = True
        return await caller.bridge.post(path, body, timeout=float(timeout) + SETTLE + 30.0)

    # direct calls

    async def _direct(self, caller: Caller, spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        args = {k: v for k, v in arguments.items() if k != "confirm_token"}
        token = arguments.get("confirm_token")
        plan = _Plan(spec, args, _commands(spec.name, args, None), confirm_token=token,
                     prompt_wait=self.approval_wait)
        continued = None
        if isinstance(token, str):
            continued = self.continuations.claim(token, caller.agent, spec.name, args)
        if continued is not None:
            plan.start, plan.done = continued.step, [dict(d) for d in continued.done]
        if continued is not None and continued.call is not None:
            # the hold that checkpoint was kept for is answered by this call: a resume must not send it again
            self.checkpoints.drop(caller.agent, continued.call)
        return await self._run(caller, plan)

    async def _run(self, caller: Caller, plan: _Plan) -> dict[str, Any]:
        """Send the plan's requests from ``plan.start``; its result, or its stop (with a checkpoint)."""
        done = list(plan.done)
        last: dict[str, Any] = {}
        for index in range(plan.start, len(plan.commands)):
            command = plan.commands[index]
            token = plan.confirm_token if index == plan.start else None
            outcome = await self._settle(caller, plan.tool, command, await self._act(caller, command, token),
                                         plan.prompt_wait)
            if outcome.kind == "ok":
                done.append(_step(command, outcome.result))
                last = outcome.result
                continue
            if outcome.kind == "stop" and (outcome.stop == "page" or plan.tool.confirmable):
                return self._stopped(caller, plan, index, done, outcome)
            return self._ended(plan, done, outcome.result, command)
        return self._ended(plan, done, last, None)

    def _ended(self, plan: _Plan, done: list[dict[str, Any]], result: dict[str, Any],
               failed: dict[str, Any] | None) -> dict[str, Any]:
        if len(plan.commands) == 1:
            return result
        steps = [*done]
        if failed is not None:
            steps.append(_step(failed, result))
        if failed is None:
            body: dict[str, Any] = {"ok": True, "status": "ok", "call": result.get("call")}
        else:
            body = dict(result)
        body["steps"] = steps
        return body

    async def _act(self, caller: Caller, command: dict[str, Any], confirm_token: str | None) -> dict[str, Any]:
        body: dict[str, Any] = {"command": command}
        if confirm_token is not None:
            body["confirm_token"] = confirm_token
        caller.sent = True
        return await caller.bridge.post("/api/act", body, timeout=_act_timeout(command))

    async def _settle(self, caller: Caller, tool: ToolSpec, command: dict[str, Any], answer: dict[str, Any],
                      prompt_wait: float, *, resend: Callable[[str], Awaitable[dict[str, Any]]] | None = None
                      ) -> _Outcome:
        """What a request's answer comes to: approval holds are asked about, page blocks recognised."""
        state: dict[str, Any] = answer["state"] if isinstance(answer.get("state"), dict) else {}
        if answer.get("code") in ("needs_user", "confirm_token_invalid") and state.get("reason") == "approval":
            tab = state.get("tabId") if isinstance(state.get("tabId"), int) else None
            token = state.get("confirm_token")
            if not tool.confirmable or state.get("approvable") is False or not isinstance(token, str):
                return _Outcome("final", answer)  # a hold that cannot be approved: no prompt, no checkpoint
            if not caller.elicits:
                return _Outcome("stop", answer, "approval", tab)
            if prompt_wait <= 0:
                return _Outcome("stop", answer, "approval", tab, decision=None)
            reply = await caller.prompt(self._approval_message(command, tab), _APPROVAL_SCHEMA, prompt_wait)
            if reply is None or reply.action == "cancel":
                return _Outcome("stop", answer, "approval", tab, decision="cancelled")
            if reply.action == "decline" or not (reply.content or {}).get("approve"):
                return _Outcome("stop", answer, "approval", tab, decision="declined")
            again = await (resend(token) if resend is not None else self._act(caller, command, token))
            return await self._settle(caller, tool, command, again, 0.0, resend=resend)
        if "error" in answer:
            if answer.get("status") == "failed" and answer.get("code") in PAGE_FAILURES:
                blocked = await self._page_block(caller, command, answer)
                if blocked is not None:
                    return blocked
            return _Outcome("final", answer)
        return _Outcome("ok", answer)

    async def _page_block(self, caller: Caller, command: Mapping[str, Any], answer: dict[str, Any]) -> _Outcome | None:
        """A needs_user stop when the request's tab shows a hint a page state check resolves."""
        tab = command.get("tabId")
        if not isinstance(tab, int):
            tab = await self._current_tab(caller)
        if tab is None:
            return None
        hint = await caller.bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
        reason = hint.get("reason")
        if "error" in hint or not hint.get("needs_user") or reason not in PAGE_STATE_CHECKS:
            return None
        person = {"sign_in": "to sign in", "human_check": "to pass a human check"}.get(str(reason), "to act")
        stop = {
            "error": f"The page in tab {tab} needs the user {person}; the {command['action']} was not done",
            "code": "needs_user", "retryable": False, "status": "failed",
            "state": {"reason": reason, "evidence": hint.get("evidence"), "tabId": tab, "action": command["action"],
                      "failure": {"code": answer.get("code"), "error": answer.get("error")}},
            "call": answer.get("call"),
        }
        return _Outcome("stop", stop, "page", tab)

    async def _current_tab(self, caller: Caller) -> int | None:
        tabs = await caller.bridge.get("/api/tabs", timeout=15.0)
        current = tabs.get("current")
        return current if isinstance(current, int) and "error" not in tabs else None

    @staticmethod
    def _approval_message(command: Mapping[str, Any], tab: int | None) -> str:
        where = f" on tab {tab}" if tab is not None else ""
        return (f"Kitsune: the agent wants to {_describe(command)}{where}. Allow it? "
                "Nothing is done unless you allow it.")

    def _stopped(self, caller: Caller, plan: _Plan, index: int, done: list[dict[str, Any]],
                 outcome: _Outcome) -> dict[str, Any]:
        """A stop on needs_user: keep (or renew) the checkpoint, answer with call and resume_token."""
        held = dict(outcome.result)
        state = dict(held.get("state") or {})
        confirm_token = state.pop("confirm_token", None)
        expires_in = state.pop("expires_in", None)
        if outcome.stop == "approval":
            state["approval"] = "elicitation" if caller.elicits else "confirm_token"
            if outcome.decision is not None:
                state["decision"] = outcome.decision
        held["state"] = state
        request_call = held.get("call")
        call = plan.call if plan.call is not None else request_call
        tab = plan.tab if plan.tab is not None else outcome.tab
        steps = [*done, _step(plan.commands[index], held)] if len(plan.commands) > 1 else None
        if not isinstance(call, int):
            return held  # the bridge gave the request no call id: nothing to resume by
        checkpoint = DirectCheckpoint(caller.agent, call, plan.tool.name, dict(plan.arguments), dict(held), tab,
                                      outcome.stop or "approval", step=index, done=tuple(done))
        resume_token = self.checkpoints.keep(checkpoint)
        result = dict(held)
        if not caller.elicits and outcome.stop == "approval" and isinstance(confirm_token, str):
            result["state"] = {**state, "confirm_token": confirm_token, "expires_in": expires_in}
            self.continuations.remember(confirm_token, caller.agent, plan.tool.name, plan.arguments, index,
                                        tuple(done), call)
        if request_call != call:
            result["held_call"] = request_call
        result["call"] = call
        result["resume_token"] = resume_token
        if steps is not None:
            result["steps"] = steps
        result["hint"] = _hint(plan.tool.name, outcome, caller.elicits, tab)
        return result

    # resume

    async def resume(self, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        """browser_resume: a direct call from its checkpoint here, a container call through the bridge."""
        call, token, observed = args["call"], args["resume_token"], args.get("observed")
        wait = min(max(float(args.get("wait", 120.0)), 0.0), RESUME_WAIT_MAX)
        checkpoint = self.checkpoints.find(caller.agent, call)
        if checkpoint is None:
            body: dict[str, Any] = {"call": call, "resume_token": token}
            if observed is not None:
                body["observed"] = observed
            caller.sent = True
            return await caller.bridge.post("/api/resume", body, timeout=RESUME_DEADLINE + SETTLE + 30.0)
        if not self.checkpoints.token_matches(checkpoint, token):
            return _error("resume_token_invalid", f"The resume token does not match call {call}'s latest")
        if observed is not None:
            return _error("observed_invalid", "observed was given, but a direct call has no steps to observe; "
                          "resume it with call and resume_token alone", steps=[])
        if checkpoint.on_current_tab:
            tabs = await caller.bridge.get("/api/tabs", timeout=15.0)
            if "error" in tabs:
                return tabs
            if tabs.get("current") != checkpoint.tab:
                return _error("current_tab_changed",
                              f"The call acts on the current tab, which was tab {checkpoint.tab}; tab "
                              f"{tabs.get('current')} is current now. Select tab {checkpoint.tab} with browser_tabs "
                              "or call the tool again", tabId=checkpoint.tab, currentTab=tabs.get("current"))
        if not self.checkpoints.take(checkpoint, token):  # another resume took it while the tabs were listed
            return _error("checkpoint_not_found", f"Call {call} is being resumed by another request, or its "
                          "checkpoint expired")
        caller.sent = False
        try:
            return await self._resume(caller, checkpoint, wait)
        except BaseException:
            if caller.sent:  # something may have reached the page: never send it again from here
                self.checkpoints.drop(checkpoint.agent, checkpoint.call, "internal_error")
            else:
                self.checkpoints.put_back(checkpoint)
            raise

    async def _resume(self, caller: Caller, checkpoint: DirectCheckpoint, wait: float) -> dict[str, Any]:
        if checkpoint.kind in ("ask_prompt", "ask_page"):
            return await self._resume_ask(caller, checkpoint, wait)
        spec = TOOLS[checkpoint.tool]
        remaining = wait
        if checkpoint.kind == "page":
            check = PAGE_STATE_CHECKS.get(str(checkpoint.held.get("state", {}).get("reason")))
            started = self._clock()
            if check is None or checkpoint.tab is None or not await self._poll(caller, check, checkpoint.tab, wait):
                return self._stop_again(caller, checkpoint)
            remaining = max(0.0, wait - (self._clock() - started))
        plan = _Plan(spec, dict(checkpoint.arguments), _commands(spec.name, checkpoint.arguments, checkpoint.tab),
                     start=checkpoint.step, done=[dict(d) for d in checkpoint.done], call=checkpoint.call,
                     tab=checkpoint.tab, prompt_wait=min(remaining, APPROVAL_PROMPT_MAX))
        result = await self._run(caller, plan)
        if result.get("resume_token") is None or result.get("call") != checkpoint.call:
            self.checkpoints.drop(checkpoint.agent, checkpoint.call)  # no longer stops on needs_user
        return result

    def _stop_again(self, caller: Caller, checkpoint: DirectCheckpoint) -> dict[str, Any]:
        """The same stop, nothing sent: the checkpoint renewed with a new resume token."""
        token = self.checkpoints.keep(replace(checkpoint))
        result = dict(checkpoint.held)
        result["call"] = checkpoint.call
        result["resume_token"] = token
        outcome = _Outcome("stop", result, checkpoint.kind, checkpoint.tab,
                           decision=(checkpoint.held.get("state") or {}).get("decision"))
        result["hint"] = _hint(checkpoint.tool, outcome, caller.elicits, checkpoint.tab, again=True)
        return result

    async def _poll(self, caller: Caller, check: PageCheck, tab: int, wait: float) -> bool:
        """Whether ``check`` passes within ``wait`` seconds, checking every second (and once at least)."""
        deadline = self._clock() + wait
        async with _ticking(caller, wait, f"waiting for the page in tab {tab}"):
            while True:
                if await check(caller.bridge, tab):
                    return True
                left = deadline - self._clock()
                if left <= 0:
                    return False
                await anyio.sleep(min(POLL_EVERY, left))

    # tabs (tab handoff requests: never a checkpoint)

    async def _tabs(self, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        op = args.get("op", "list")
        if op == "list":
            listed = await caller.bridge.get("/api/tabs", timeout=15.0)
            return listed if "error" in listed else {"ok": True, **listed}
        tab = args.get("tabId")
        token = args.get("confirm_token")
        if op in ("select", "takeover"):
            body = {"op": op, "tabId": tab}
            caller.sent = True
            return await caller.bridge.post("/api/tabs", body, timeout=15.0)
        if op == "new":
            command: dict[str, Any] = {"action": "newTab"}
            if args.get("url") is not None:
                command["url"] = args["url"]
            first = {"op": "open", **({"url": args["url"]} if args.get("url") is not None else {})}
        else:
            command = {"action": "closeTab", "tabId": tab}
            first = {"op": "close", "tabId": tab}

        async def resend(confirm: str) -> dict[str, Any]:
            return await self._act(caller, command, confirm)

        if isinstance(token, str):
            answer = await resend(token)
        else:
            caller.sent = True
            answer = await caller.bridge.post("/api/tabs", first, timeout=_act_timeout(command))
        outcome = await self._settle(caller, TOOLS["browser_tabs"], command, answer, self.approval_wait,
                                     resend=resend)
        result = dict(outcome.result)
        if outcome.kind == "stop":
            state = dict(result.get("state") or {})
            state["approval"] = "elicitation" if caller.elicits else "confirm_token"
            if caller.elicits:
                state.pop("confirm_token", None)
                state.pop("expires_in", None)
            if outcome.decision is not None:
                state["decision"] = outcome.decision
            result["state"] = state
            result["hint"] = ("A tab handoff request keeps no checkpoint. " + (
                "Call browser_tabs again to ask the user again." if caller.elicits else
                "Ask the user; if they approve, repeat this exact request with confirm_token=state.confirm_token "
                "(valid 120 s), or make a fresh request."))
        return result

    # browser_ask_user

    async def _ask_user(self, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
        question, reason = args["question"], args.get("reason", "other")
        wait = min(float(args.get("wait", ASK_MAX)), ASK_MAX)
        tab = args.get("tabId")
        watched = reason in PAGE_STATE_CHECKS
        if watched and tab is None:
            tab = await self._current_tab(caller)
        evidence = None
        if watched and isinstance(tab, int):
            hint = await caller.bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
            if "error" not in hint and hint.get("needs_user") and hint.get("reason") == reason:
                evidence = hint.get("evidence")
        state: dict[str, Any] = {"reason": reason, "question": question}
        if watched:
            state.update(tabId=tab, evidence=evidence)
        if caller.elicits:
            answered = await self._ask(caller, question, reason, tab if watched else None, wait)
            if answered is not None:
                return answered
            state["decision"] = "cancelled"
            stop: dict[str, Any] = {"error": "The user did not answer in time; nothing was done", "code": "needs_user",
                                    "retryable": False, "state": state}
            return await self._ask_stop(caller, args, stop, "ask_prompt", tab if watched else None)
        stop = {"error": f"Ask the user in your reply: {question}", "code": "needs_user", "retryable": False,
                "state": state}
        if evidence is None:
            stop["hint"] = ("This client shows no prompt and the page shows nothing to watch: ask the user in your "
                            "reply, then continue.")
            return stop
        stop["error"] = f"The user has to act in tab {tab} ({reason}): {question}"
        return await self._ask_stop(caller, args, stop, "ask_page", tab)

    async def _ask(self, caller: Caller, question: str, reason: str, tab: int | None,
                   wait: float) -> dict[str, Any] | None:
        where = f" (in tab {tab})" if tab is not None else ""
        reply = await caller.prompt(f"Kitsune: {question}{where}", _ANSWER_SCHEMA, wait)
        if reply is None or reply.action == "cancel":
            return None
        content = reply.content or {}
        answer = content.get("answer") if reply.action == "accept" else "cant"
        result: dict[str, Any] = {"ok": True, "answer": answer if answer in ("done", "cant") else "cant",
                                  "via": "elicitation", "reason": reason}
        if isinstance(content.get("note"), str) and content["note"]:
            result["note"] = content["note"]
        if tab is not None:
            result["tabId"] = tab
        return result

    async def _ask_stop(self, caller: Caller, args: dict[str, Any], stop: dict[str, Any], kind: StopKind,
                        tab: int | None) -> dict[str, Any]:
        """Keep an ask's checkpoint; its call is the audit id of a tab listing the gateway makes as it asks."""
        marker = await caller.bridge.post("/api/act", {"command": {"action": "getTabs"}}, timeout=20.0)
        call = marker.get("call")
        if not isinstance(call, int):
            stop["hint"] = "No checkpoint could be kept (the bridge gave no call id): ask the user in your reply."
            return stop
        checkpoint = DirectCheckpoint(caller.agent, call, "browser_ask_user", dict(args), dict(stop), tab, kind)
        result = dict(stop)
        result["call"] = call
        result["resume_token"] = self.checkpoints.keep(checkpoint)
        result["hint"] = _hint("browser_ask_user", _Outcome("stop", stop, kind, tab), caller.elicits, tab)
        return result

    async def _resume_ask(self, caller: Caller, checkpoint: DirectCheckpoint, wait: float) -> dict[str, Any]:
        args = checkpoint.arguments
        reason = str(args.get("reason", "other"))
        if checkpoint.kind == "ask_prompt":
            if not caller.elicits or wait <= 0:
                return self._stop_again(caller, checkpoint)
            answered = await self._ask(caller, str(args["question"]), reason, checkpoint.tab, min(wait, ASK_MAX))
            if answered is None:
                return self._stop_again(caller, checkpoint)
            self.checkpoints.drop(checkpoint.agent, checkpoint.call)
            return answered
        check = PAGE_STATE_CHECKS[reason]
        if checkpoint.tab is None or not await self._poll(caller, check, checkpoint.tab, wait):
            return self._stop_again(caller, checkpoint)
        self.checkpoints.drop(checkpoint.agent, checkpoint.call)
        return {"ok": True, "answer": "done", "via": "page", "reason": reason, "tabId": checkpoint.tab}


def _hint(tool: str, outcome: _Outcome, elicits: bool, tab: int | None, *, again: bool = False) -> str:
    resume = "browser_resume(call, resume_token)"
    if outcome.stop == "page":
        reason = (outcome.result.get("state") or {}).get("reason")
        what = {"sign_in": "sign in", "human_check": "pass the human check"}.get(str(reason), "act")
        return (f"{'Still waiting. ' if again else ''}Ask the user to {what} in tab {tab}. {resume} waits (up to "
                f"wait seconds) until the page no longer shows it, then runs {tool} again from the request that "
                "was stopped; nothing that ran ok is sent again.")
    if outcome.stop == "ask_prompt":
        return (f"The user did not answer. {resume} asks them again (up to wait seconds, at most 120); wait=0 "
                "asks nothing.")
    if outcome.stop == "ask_page":
        return (f"Ask the user to do it in tab {tab}. {resume} waits until the page no longer shows it and answers "
                "done; the question never reaches the page.")
    decision = outcome.decision
    if elicits:
        said = {"declined": "the user declined it", "cancelled": "the approval prompt got no answer in time"}.get(
            str(decision), "no approval prompt was shown")
        return (f"The held action did not run: {said}. {resume} asks them again in the approval prompt (open up to "
                "wait seconds, at most 115) and sends it only if they allow it; nothing that ran ok is sent again.")
    return (f"The held action did not run. Ask the user; if they approve, call {tool} again with the same arguments "
            f"and confirm_token=state.confirm_token (valid 120 s): it continues from the held request. {resume} "
            "checks the hold once more and returns a fresh confirm token while it holds.")


def _tool(spec: ToolSpec) -> types.Tool:
    return types.Tool(name=spec.name, description=spec.description, input_schema=spec.input_schema,
                      annotations=types.ToolAnnotations(read_only_hint=spec.read_only,
                                                        destructive_hint=False if spec.read_only else None,
                                                        open_world_hint=True))


def _headline(result: Mapping[str, Any]) -> str:
    if "error" in result:
        return f"{result.get('code')}: {result['error']}"
    if isinstance(result.get("summary"), str):
        return str(result["summary"])
    return f"ok ({result.get('status', 'ok')})"


def to_call_tool_result(result: dict[str, Any]) -> types.CallToolResult:
    """A result as MCP carries it: structured, readable as text, a screenshot as an image."""
    content: list[types.ContentBlock] = []
    structured = dict(result)
    image = structured.pop("image", None)
    if isinstance(image, str):
        content.append(types.ImageContent(data=image, mime_type=str(structured.get("mimeType", "image/png"))))
        structured["bytes"] = len(image) * 3 // 4
    lines = [_headline(structured)]
    if isinstance(structured.get("hint"), str):
        lines.append(str(structured["hint"]))
    lines.append(json.dumps(structured, ensure_ascii=False, indent=1, default=str))
    content.append(types.TextContent(text="\n".join(lines)))
    return types.CallToolResult(content=content, structured_content=structured, is_error="error" in structured)
