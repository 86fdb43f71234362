"""``browser_ask_user``: a question to the user, in a prompt, or answered by the page they act on.

When it is about a tab, the prompt and the stop carry the tab's Live View link, and a person's
hand-back of that tab answers a prompt still open (``via: "live_view"``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import anyio

from mcp_gateway._caller import Caller
from mcp_gateway._checkpoints import DirectCheckpoint, StopKind
from mcp_gateway._direct import DirectCalls, Outcome, hint
from mcp_gateway._live import handed_back, live_view_link, with_link
from mcp_gateway._pages import PAGE_STATE_CHECKS, current_tab

if TYPE_CHECKING:
    import mcp_types as types

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
    link = await live_view_link(caller, tab, reason)
    if caller.elicits:
        answered = await _ask(caller, question, reason, tab, wait, link)
        if answered is not None:
            return answered
        state["decision"] = "cancelled"
        stop: dict[str, Any] = {"error": "The user did not answer in time; nothing was done", "code": "needs_user",
                                "retryable": False, "state": state}
        return await _ask_stop(direct, caller, args, stop, "ask_prompt", tab, link)
    stop = {"error": f"Ask the user in your reply: {question}", "code": "needs_user", "retryable": False,
            "state": state}
    if evidence is None:
        stop["hint"] = ("This client shows no prompt and the page shows nothing to watch: ask the user in your "
                        "reply, then continue.")
        return with_link(stop, link)
    stop["error"] = f"The user has to act in tab {tab} ({reason}): {question}"
    return await _ask_stop(direct, caller, args, stop, "ask_page", tab, link)


async def _ask(caller: Caller, question: str, reason: str, tab: int | None, wait: float,
               link: dict[str, Any] | None) -> dict[str, Any] | None:
    """The user's answer in a prompt; on a tab, a hand-back of it from Live View answers first (the prompt is
    then cancelled). None when neither came within ``wait`` seconds."""
    where = f" (in tab {tab})" if tab is not None else ""
    see = (f" Open {link['url']} to see and act in the tab, then press \"Done — hand back\" there."
           if link is not None else "")
    message = f"Kitsune: {question}{where}{see}"
    if tab is None:
        return _answer(await caller.prompt(message, _ANSWER_SCHEMA, wait), reason, tab)
    answers: list[dict[str, Any] | None] = []
    async with anyio.create_task_group() as group:
        async def prompt() -> None:
            answers.append(_answer(await caller.prompt(message, _ANSWER_SCHEMA, wait), reason, tab))
            group.cancel_scope.cancel()

        async def hand_back() -> None:
            if await handed_back(caller.bridge, tab, wait):
                answers.append({"ok": True, "answer": "done", "via": "live_view", "reason": reason, "tabId": tab})
                group.cancel_scope.cancel()

        group.start_soon(prompt)
        group.start_soon(hand_back)
    return answers[0] if answers else None


def _answer(reply: types.ElicitResult | None, reason: str, tab: int | None) -> dict[str, Any] | None:
    """What a prompt's reply answers (None: no answer)."""
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
                    tab: int | None, link: dict[str, Any] | None) -> dict[str, Any]:
    """Keep an ask's checkpoint; its call is the audit id of a tab listing the gateway makes as it asks."""
    marker = await caller.bridge.post("/api/act", {"command": {"action": "getTabs"}}, timeout=20.0)
    call = marker.get("call")
    if not isinstance(call, int):
        stop["hint"] = "No checkpoint could be kept (the bridge gave no call id): ask the user in your reply."
        return with_link(stop, link)
    checkpoint = DirectCheckpoint(caller.agent, call, "browser_ask_user", dict(args), dict(stop), tab, kind)
    result = dict(stop)
    result["call"] = call
    result["resume_token"] = direct.checkpoints.keep(checkpoint)
    result["hint"] = hint("browser_ask_user", Outcome("stop", stop, kind, tab), caller.elicits, tab)
    return with_link(result, link)


async def resume_ask(direct: DirectCalls, caller: Caller, checkpoint: DirectCheckpoint,
                     wait: float) -> dict[str, Any]:
    """An ask's resume: the prompt again, or a wait for the page; the same stop again when neither answers."""
    args = checkpoint.arguments
    reason = str(args.get("reason", "other"))
    if checkpoint.kind == "ask_prompt":
        if not caller.elicits or wait <= 0:
            return await direct.stop_again(caller, checkpoint)
        link = await live_view_link(caller, checkpoint.tab, reason)
        answered = await _ask(caller, str(args["question"]), reason, checkpoint.tab, min(wait, ASK_MAX), link)
        if answered is None:
            return await direct.stop_again(caller, checkpoint, link)
        direct.checkpoints.drop(checkpoint.agent, checkpoint.call)
        return answered
    check = PAGE_STATE_CHECKS[reason]
    if checkpoint.tab is None or not await direct.poll(caller, check, checkpoint.tab, wait):
        return await direct.stop_again(caller, checkpoint)
    direct.checkpoints.drop(checkpoint.agent, checkpoint.call)
    return {"ok": True, "answer": "done", "via": "page", "reason": reason, "tabId": checkpoint.tab}
