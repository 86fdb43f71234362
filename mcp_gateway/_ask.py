"""``browser_ask_user``: a question to the user, in a prompt, or answered by the page they act on."""

from __future__ import annotations

from typing import Any

from mcp_gateway._caller import Caller
from mcp_gateway._checkpoints import DirectCheckpoint, StopKind
from mcp_gateway._direct import DirectCalls, Outcome, hint
from mcp_gateway._pages import PAGE_STATE_CHECKS, current_tab

__all__ = ["ASK_MAX", "ask_user", "resume_ask"]

ASK_MAX = 120.0
"""A browser_ask_user prompt stays open at most this long."""

_ANSWER_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {
        "answer": {"type": "string", "title": "Answer",
                   "oneOf": [{"const": "done", "title": "Done"}, {"const": "cant", "title": "Can't"}]},
        "note": {"type": "string", "title": "Note", "description": "Anything the agent should know."},
    },
    "required": ["answer"],
}


async def ask_user(direct: DirectCalls, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """Ask in a prompt when the client shows one; otherwise a stop the agent asks about in its reply
    (with a checkpoint when the page shows what to watch)."""
    question, reason = args["question"], args.get("reason", "other")
    wait = min(float(args.get("wait", ASK_MAX)), ASK_MAX)
    tab = args.get("tabId")
    watched = reason in PAGE_STATE_CHECKS
    if watched and tab is None:
        tab = await current_tab(caller)
    evidence = None
    if watched and isinstance(tab, int):
        hinted = await caller.bridge.get("/api/needs-user", params={"tabId": tab}, timeout=10.0)
        if "error" not in hinted and hinted.get("needs_user") and hinted.get("reason") == reason:
            evidence = hinted.get("evidence")
    state: dict[str, Any] = {"reason": reason, "question": question}
    if watched:
        state.update(tabId=tab, evidence=evidence)
    if caller.elicits:
        answered = await _ask(caller, question, reason, tab if watched else None, wait)
        if answered is not None:
            return answered
        state["decision"] = "cancelled"
        stop: dict[str, Any] = {"error": "The user did not answer in time; nothing was done", "code": "needs_user",
                                "retryable": False, "state": state}
        return await _ask_stop(direct, caller, args, stop, "ask_prompt", tab if watched else None)
    stop = {"error": f"Ask the user in your reply: {question}", "code": "needs_user", "retryable": False,
            "state": state}
    if evidence is None:
        stop["hint"] = ("This client shows no prompt and the page shows nothing to watch: ask the user in your "
                        "reply, then continue.")
        return stop
    stop["error"] = f"The user has to act in tab {tab} ({reason}): {question}"
    return await _ask_stop(direct, caller, args, stop, "ask_page", tab)


async def _ask(caller: Caller, question: str, reason: str, tab: int | None, wait: float) -> dict[str, Any] | None:
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


async def _ask_stop(direct: DirectCalls, caller: Caller, args: dict[str, Any], stop: dict[str, Any], kind: StopKind,
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
    result["resume_token"] = direct.checkpoints.keep(checkpoint)
    result["hint"] = hint("browser_ask_user", Outcome("stop", stop, kind, tab), caller.elicits, tab)
    return result


async def resume_ask(direct: DirectCalls, caller: Caller, checkpoint: DirectCheckpoint,
                     wait: float) -> dict[str, Any]:
    """An ask's resume: the prompt again, or a wait for the page; the same stop again when neither answers."""
    args = checkpoint.arguments
    reason = str(args.get("reason", "other"))
    if checkpoint.kind == "ask_prompt":
        if not caller.elicits or wait <= 0:
            return direct.stop_again(caller, checkpoint)
        answered = await _ask(caller, str(args["question"]), reason, checkpoint.tab, min(wait, ASK_MAX))
        if answered is None:
            return direct.stop_again(caller, checkpoint)
        direct.checkpoints.drop(checkpoint.agent, checkpoint.call)
        return answered
    check = PAGE_STATE_CHECKS[reason]
    if checkpoint.tab is None or not await direct.poll(caller, check, checkpoint.tab, wait):
        return direct.stop_again(caller, checkpoint)
    direct.checkpoints.drop(checkpoint.agent, checkpoint.call)
    return {"ok": True, "answer": "done", "via": "page", "reason": reason, "tabId": checkpoint.tab}
