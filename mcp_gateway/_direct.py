"""Direct calls: a direct tool's requests to ``POST /api/act``, one per write, with their holds settled.

A request held for approval is asked about in an elicitation prompt (or answered with its confirm
token when the client shows none); a failure on a tab that shows a sign-in or a human check is a
stop the page resolves. A stop keeps a checkpoint here (spec: Direct calls), which
``browser_resume`` continues from its held request.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any, Literal

from mcp_gateway._caller import Caller
from mcp_gateway._checkpoints import Continuations, DirectCheckpoint, DirectCheckpoints, StopKind
from mcp_gateway._live import handback_or_sleep, handbacks, live_view_link, with_link
from mcp_gateway._pages import PAGE_FAILURES, PAGE_STATE_CHECKS, POLL_EVERY, PageCheck, current_tab
from mcp_gateway._tools import CDP_READS, FORM_FIELDS, PAGE_MAX_CHARS, ToolSpec
from messages.contract import APPROVAL_PROMPT_MAX, CONFIRM_TTL, SETTLE, STEP_TIMEOUT

__all__ = ["DirectCalls", "Outcome", "Plan", "commands_of", "hint", "unkept_stop", "with_page"]


@dataclass
class Outcome:
    """What one request came to after its hold (if any) was settled."""

    kind: Literal["ok", "stop", "final"]
    result: dict[str, Any]
    stop: StopKind | None = None
    tab: int | None = None
    decision: str | None = None
    link: dict[str, Any] | None = None
    """The tab's Live View link, when one was made for the approval prompt."""


@dataclass
class Plan:
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


def commands_of(tool: str, args: Mapping[str, Any], tab: int | None) -> list[dict[str, Any]]:
    """The bridge commands a direct tool sends, one per write, in order."""
    common: dict[str, Any] = {}
    if args.get("tabId") is not None:
        common["tabId"] = args["tabId"]
    elif tab is not None:
        common["tabId"] = tab
    if args.get("timeout") is not None:
        common["timeout"] = args["timeout"]
    own = {k: v for k, v in args.items() if k not in ("tabId", "timeout", "confirm_token", "snapshot")}
    if tool == "browser_type":
        submit = bool(own.pop("submit", False))
        typed = [{"action": "type", **own, **common}]
        if submit:
            target: dict[str, Any] = {k: own[k] for k in ("selector", "ref") if k in own}
            typed.append({"action": "press", "key": "Enter", **target, **common})
        return typed
    if tool == "browser_fill_form":
        return [_field_command(f, common) for f in own["fields"]]
    if tool == "browser_cdp":
        read = own.pop("read", None)
        return [{"action": "cdp" if read is None else CDP_READS[read], **own, **common}]
    action = {"browser_navigate": "navigate", "browser_click": "click", "browser_select": "select",
              "browser_press": "press", "browser_page_text": "pageText", "browser_find": "find",
              "browser_screenshot": "screenshot", "browser_site_tools": "siteTools",
              "browser_call_site_tool": "callSiteTool", "browser_snapshot": "snapshot"}[tool]
    return [{"action": action, **own, **common}]


def _field_command(given: Mapping[str, Any], common: Mapping[str, Any]) -> dict[str, Any]:
    """The one request a form field sends: fill a text field, select options, check or uncheck."""
    key = next(k for k in FORM_FIELDS if k in given)
    return {"action": FORM_FIELDS[key], **{k: given[k] for k in ("selector", "ref") if k in given},
            key: given[key], **common}


def act_timeout(command: Mapping[str, Any]) -> float:
    """How long the gateway waits for the bridge's answer to one request."""
    timeout = command.get("timeout")
    seconds = float(timeout) if isinstance(timeout, int | float) else STEP_TIMEOUT
    return max(seconds, STEP_TIMEOUT) + SETTLE + 15.0


def _status(result: Mapping[str, Any]) -> str:
    status = result.get("status")
    if isinstance(status, str):
        return status
    return "failed" if "error" in result else "ok"


def _step(command: Mapping[str, Any], result: Mapping[str, Any]) -> dict[str, Any]:
    return {"action": command["action"], "status": _status(result), "call": result.get("call")}


_PHRASES = {"liveViewControl": "make a Live View link that acts (whoever opens it can click and type in the tab, "
                               "each input audited, until they press Done)",
            "liveViewDevtools": "make a DevTools link of the tab (whoever opens it can inspect the page, run script "
                                "in it and change it, until they press Done or close it)"}
"""Requests that are no command of the language, as a prompt names them."""


def _describe(command: Mapping[str, Any]) -> str:
    """A command as a person reads it in a prompt; typed values are counted, never shown."""
    action = "uncheck" if command["action"] == "check" and command.get("checked") is False else str(command["action"])
    if action in _PHRASES:
        return _PHRASES[action]
    parts = []
    for key in ("url", "selector", "ref", "key", "name", "taskId", "method"):
        if isinstance(command.get(key), str):
            parts.append(f"{key} {command[key]!r}")
    if isinstance(command.get("values"), list):
        parts.append(f"values {', '.join(map(str, command['values']))}")
    for key in ("text", "value"):
        if isinstance(command.get(key), str):
            parts.append(f"{len(command[key])} typed characters")
    if isinstance(command.get("input"), dict):
        fields = len(command["input"])
        parts.append(f"input of {fields} typed field{'' if fields == 1 else 's'}")
    return action + (f" ({'; '.join(parts)})" if parts else "")


_APPROVAL_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"approve": {"type": "boolean", "title": "Allow this action",
                               "description": "Yes to let the agent do it now; no to refuse."}},
    "required": ["approve"],
}


def hint(tool: str, outcome: Outcome, elicits: bool, tab: int | None, *, again: bool = False) -> str:
    """What a stop's ``hint`` tells the agent to do next."""
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


def unkept_stop(caller: Caller, outcome: Outcome, what: str, tool: str) -> dict[str, Any]:
    """A hold of a request that keeps no checkpoint (``what``, asked for again by calling ``tool``): asked
    about in a prompt already, or answered with its confirm token for the agent to ask the user."""
    result = dict(outcome.result)
    state = dict(result.get("state") or {})
    state["approval"] = "elicitation" if caller.elicits else "confirm_token"
    if caller.elicits:
        state.pop("confirm_token", None)
        state.pop("expires_in", None)
    if outcome.decision is not None:
        state["decision"] = outcome.decision
    result["state"] = state
    result["hint"] = (f"{what} keeps no checkpoint. " + (
        f"Call {tool} again to ask the user again." if caller.elicits else
        "Ask the user; if they approve, repeat this exact request with confirm_token=state.confirm_token "
        "(valid 120 s), or make a fresh request."))
    return result


def _unknown_site_tool_hint(result: Mapping[str, Any]) -> str:
    """What an unknown outcome of a site tool tells the agent: observe, never retry blindly."""
    state = result.get("state")
    why = (state.get("reason") if isinstance(state, dict) else None) or result.get("code")
    return (f"The site tool may have done its work before it stopped ({why}). Look at the page or the site first "
            "(browser_page_text, browser_site_tools) and call it again only if you saw that it did not take "
            "effect; never retry it blindly.")


class DirectCalls:
    """Runs direct calls and keeps the checkpoints of those that stop on needs_user (in memory)."""

    def __init__(self, approval_wait: float, clock: Callable[[], float]) -> None:
        self.approval_wait = min(max(approval_wait, 0.0), APPROVAL_PROMPT_MAX)
        """How long a direct call's approval prompt stays open."""
        self.checkpoints = DirectCheckpoints(clock)
        self.continuations = Continuations(clock, ttl=CONFIRM_TTL)
        self.clock = clock

    async def start(self, caller: Caller, spec: ToolSpec, arguments: dict[str, Any]) -> dict[str, Any]:
        """A direct tool's call; with a confirm token, it continues from the hold that token answers."""
        args = {k: v for k, v in arguments.items() if k != "confirm_token"}
        token = arguments.get("confirm_token")
        plan = Plan(spec, args, commands_of(spec.name, args, None), confirm_token=token,
                    prompt_wait=self.approval_wait)
        continued = None
        if isinstance(token, str):
            continued = self.continuations.claim(token, caller.agent, spec.name, args)
        if continued is not None:
            plan.start, plan.done = continued.step, [dict(d) for d in continued.done]
        if continued is not None and continued.call is not None:
            # the hold that checkpoint was kept for is answered by this call: a resume must not send it again
            self.checkpoints.drop(caller.agent, continued.call)
        return await self.run(caller, plan)

    async def run(self, caller: Caller, plan: Plan) -> dict[str, Any]:
        """Send the plan's requests from ``plan.start``; its result, or its stop (with a checkpoint)."""
        done = list(plan.done)
        last: dict[str, Any] = {}
        caller.progress.begin(plan.start, len(plan.commands))
        for index in range(plan.start, len(plan.commands)):
            command = plan.commands[index]
            token = plan.confirm_token if index == plan.start else None
            outcome = await self.settle(caller, plan.tool, command, await self.act(caller, command, token),
                                        plan.prompt_wait)
            if outcome.kind == "ok":
                done.append(_step(command, outcome.result))
                last = outcome.result
                await caller.progress.step(f"{command['action']} done")
                continue
            if outcome.kind == "stop" and (outcome.stop == "page" or plan.tool.confirmable):
                return await self._stopped(caller, plan, index, done, outcome)
            return self._ended(plan, done, outcome.result, command)
        return await _with_diff(caller, plan, self._ended(plan, done, last, None))

    def _ended(self, plan: Plan, done: list[dict[str, Any]], result: dict[str, Any],
               failed: dict[str, Any] | None) -> dict[str, Any]:
        if plan.tool.name == "browser_call_site_tool" and _status(result) == "unknown":
            result = {**result, "hint": _unknown_site_tool_hint(result)}
        if len(plan.commands) == 1:
            return result
        if failed is None:  # every request ran ok: the page's diff says what they did, no step echoes it
            return {"ok": True, "status": "ok", "call": result.get("call")}
        return {**result, "steps": [*done, _step(failed, result)]}

    async def act(self, caller: Caller, command: dict[str, Any], confirm_token: str | None) -> dict[str, Any]:
        """One request to ``POST /api/act``."""
        body: dict[str, Any] = {"command": command}
        if confirm_token is not None:
            body["confirm_token"] = confirm_token
        caller.sent = True
        return await caller.bridge.post("/api/act", body, timeout=act_timeout(command))

    async def settle(self, caller: Caller, tool: ToolSpec, command: dict[str, Any], answer: dict[str, Any],
                     prompt_wait: float, *, resend: Callable[[str], Awaitable[dict[str, Any]]] | None = None
                     ) -> Outcome:
        """What a request's answer comes to: approval holds are asked about, page blocks recognised."""
        state: dict[str, Any] = answer["state"] if isinstance(answer.get("state"), dict) else {}
        if answer.get("code") in ("needs_user", "confirm_token_invalid") and state.get("reason") == "approval":
            tab = state.get("tabId") if isinstance(state.get("tabId"), int) else None
            token = state.get("confirm_token")
            if not tool.confirmable or state.get("approvable") is False or not isinstance(token, str):
                return Outcome("final", answer)  # a hold that cannot be approved: no prompt, no checkpoint
            if not caller.elicits:
                return Outcome("stop", answer, "approval", tab)
            if prompt_wait <= 0:
                return Outcome("stop", answer, "approval", tab, decision=None)
            link = await live_view_link(caller, tab, "approval")
            reply = await caller.prompt(_approval_message(command, tab, link), _APPROVAL_SCHEMA, prompt_wait)
            if reply is None or reply.action == "cancel":
                return Outcome("stop", answer, "approval", tab, decision="cancelled", link=link)
            if reply.action == "decline" or not (reply.content or {}).get("approve"):
                return Outcome("stop", answer, "approval", tab, decision="declined", link=link)
            again = await (resend(token) if resend is not None else self.act(caller, command, token))
            return await self.settle(caller, tool, command, again, 0.0, resend=resend)
        if "error" in answer:
            if answer.get("status") == "failed" and answer.get("code") in PAGE_FAILURES:
                blocked = await _page_block(caller, command, answer)
                if blocked is not None:
                    return blocked
            return Outcome("final", answer)
        return Outcome("ok", answer)

    async def _stopped(self, caller: Caller, plan: Plan, index: int, done: list[dict[str, Any]],
                       outcome: Outcome) -> dict[str, Any]:
        """A stop on needs_user: keep (or renew) the checkpoint, answer with call, resume_token and the
        tab's Live View link."""
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
        result["hint"] = hint(plan.tool.name, outcome, caller.elicits, tab)
        return with_link(result, outcome.link or await live_view_link(caller, tab, state.get("reason")))

    async def stop_again(self, caller: Caller, checkpoint: DirectCheckpoint,
                         link: dict[str, Any] | None = None) -> dict[str, Any]:
        """The same stop, nothing sent: the checkpoint renewed with a new resume token, and a Live View
        link to its tab (``link``, or a fresh one: a link lives 5 minutes)."""
        token = self.checkpoints.keep(replace(checkpoint))
        result = dict(checkpoint.held)
        result["call"] = checkpoint.call
        result["resume_token"] = token
        outcome = Outcome("stop", result, checkpoint.kind, checkpoint.tab,
                          decision=(checkpoint.held.get("state") or {}).get("decision"))
        result["hint"] = hint(checkpoint.tool, outcome, caller.elicits, checkpoint.tab, again=True)
        reason = (checkpoint.held.get("state") or {}).get("reason")
        return with_link(result, link or await live_view_link(caller, checkpoint.tab, reason))

    async def poll(self, caller: Caller, check: PageCheck, tab: int, wait: float) -> bool:
        """Whether ``check`` passes within ``wait`` seconds: checked once at least, then every second, or at
        once when a person hands the tab back from Live View (the bridge's wait on its hand-backs)."""
        deadline = self.clock() + wait
        seen = await handbacks(caller.bridge, tab)  # None: the bridge counts none, so sleep between checks
        with caller.progress.waiting(f"waiting for the page in tab {tab}"):
            while True:
                if await check(caller.bridge, tab):
                    return True
                left = deadline - self.clock()
                if left <= 0:
                    return False
                seen = await handback_or_sleep(caller.bridge, tab, seen, min(POLL_EVERY, left))


DIFF_TOOLS = frozenset({"browser_navigate", "browser_click", "browser_type", "browser_fill_form", "browser_select",
                        "browser_press"})
"""Direct writes that answer the page after them (``snapshot: "diff"``, their default): what changed since this
session's last snapshot of the tab, or the whole snapshot of a document it has not seen (after a navigation)."""


async def with_page(caller: Caller, tab: int | None, result: dict[str, Any]) -> dict[str, Any]:
    """A write's ``result`` with the page after it as its ``page`` (a read: ``snapshot {since: "last"}`` of ``tab``,
    the current tab when None; ``truncated`` only when it was cut); as it is when that read failed."""
    command = {"action": "snapshot", "since": "last", "maxChars": PAGE_MAX_CHARS, **({} if tab is None else
                                                                                     {"tabId": tab})}
    answer = await caller.bridge.post("/api/act", {"command": command}, timeout=act_timeout(command))
    if "error" in answer:
        return result
    return {**result, "page": {k: answer[k] for k in ("diff", "snapshot", "document", "documentChanged", "truncated",
                                                      "nextOffset") if answer.get(k) not in (None, False)}}


async def _with_diff(caller: Caller, plan: Plan, result: dict[str, Any]) -> dict[str, Any]:
    """A direct write's result with the page after it, unless it failed or was told ``snapshot: "none"``."""
    if plan.tool.name not in DIFF_TOOLS or plan.arguments.get("snapshot", "diff") != "diff" or "error" in result:
        return result
    return await with_page(caller, plan.commands[-1].get("tabId"), result)


async def _page_block(caller: Caller, command: Mapping[str, Any], answer: dict[str, Any]) -> Outcome | None:
    """A needs_user stop when the request's tab shows a hint a page state check resolves."""
    tab = command.get("tabId")
    if not isinstance(tab, int):
        tab = await current_tab(caller)
    if tab is None:
        return None
    hinted = await caller.bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
    reason = hinted.get("reason")
    if "error" in hinted or not hinted.get("needs_user") or reason not in PAGE_STATE_CHECKS:
        return None
    person = {"sign_in": "to sign in", "human_check": "to pass a human check"}.get(str(reason), "to act")
    stop = {
        "error": f"The page in tab {tab} needs the user {person}; the {command['action']} was not done",
        "code": "needs_user", "retryable": False, "status": "failed",
        "state": {"reason": reason, "evidence": hinted.get("evidence"), "tabId": tab, "action": command["action"],
                  "failure": {"code": answer.get("code"), "error": answer.get("error")}},
        "call": answer.get("call"),
    }
    return Outcome("stop", stop, "page", tab)


def _approval_message(command: Mapping[str, Any], tab: int | None, link: dict[str, Any] | None) -> str:
    where = f" on tab {tab}" if tab is not None else ""
    see = f" See the tab live: {link['url']}" if link is not None else ""
    return (f"Kitsune: the agent wants to {_describe(command)}{where}. Allow it? "
            f"Nothing is done unless you allow it.{see}")
