"""``browser_resume``: a direct call from its checkpoint here, a container call through the bridge."""

from __future__ import annotations

from typing import Any

from mcp_gateway._ask import resume_ask
from mcp_gateway._caller import Caller
from mcp_gateway._checkpoints import DirectCheckpoint
from mcp_gateway._containers import run_container
from mcp_gateway._direct import DirectCalls, Plan, commands_of
from mcp_gateway._pages import PAGE_STATE_CHECKS, claimed_by_a_person
from mcp_gateway._results import error
from mcp_gateway._tools import TOOLS
from messages.contract import APPROVAL_PROMPT_MAX, RESUME_DEADLINE, RESUME_WAIT, RESUME_WAIT_MAX

__all__ = ["resume"]


async def resume(direct: DirectCalls, caller: Caller, args: dict[str, Any]) -> dict[str, Any]:
    """Continue a stopped call; a direct checkpoint is taken while it runs (put back if nothing was sent)."""
    call, token, observed = args["call"], args["resume_token"], args.get("observed")
    wait = min(max(float(args.get("wait", RESUME_WAIT)), 0.0), RESUME_WAIT_MAX)
    checkpoint = direct.checkpoints.find(caller.agent, call)
    if checkpoint is None:
        body: dict[str, Any] = {"call": call, "resume_token": token}
        if observed is not None:
            body["observed"] = observed
        return await run_container(caller, "/api/resume", body, RESUME_DEADLINE)
    if not direct.checkpoints.token_matches(checkpoint, token):
        return error("resume_token_invalid", f"The resume token does not match call {call}'s latest")
    if observed is not None:
        return error("observed_invalid", "observed was given, but a direct call has no steps to observe; "
                     "resume it with call and resume_token alone", steps=[])
    if checkpoint.on_current_tab:
        tabs = await caller.bridge.get("/api/tabs", timeout=15.0)
        if "error" in tabs:
            return tabs
        if tabs.get("current") != checkpoint.tab:
            return error("current_tab_changed",
                         f"The call acts on the current tab, which was tab {checkpoint.tab}; tab "
                         f"{tabs.get('current')} is current now. Select tab {checkpoint.tab} with browser_tabs "
                         "or call the tool again", tabId=checkpoint.tab, currentTab=tabs.get("current"))
    if not direct.checkpoints.take(checkpoint, token):  # another resume took it while the tabs were listed
        return error("checkpoint_not_found", f"Call {call} is being resumed by another request, or its "
                     "checkpoint expired")
    caller.sent = False
    try:
        return await _resume_direct(direct, caller, checkpoint, wait)
    except BaseException:
        if caller.sent:  # something may have reached the page: never send it again from here
            direct.checkpoints.drop(checkpoint.agent, checkpoint.call, "internal_error")
        else:
            direct.checkpoints.put_back(checkpoint)
        raise


async def _resume_direct(direct: DirectCalls, caller: Caller, checkpoint: DirectCheckpoint,
                         wait: float) -> dict[str, Any]:
    if checkpoint.kind in ("ask_prompt", "ask_page"):
        return await resume_ask(direct, caller, checkpoint, wait)
    spec = TOOLS[checkpoint.tool]
    remaining = wait
    if checkpoint.kind == "page":
        check = PAGE_STATE_CHECKS.get(str(checkpoint.held.get("state", {}).get("reason")))
        started = direct.clock()
        if check is None or checkpoint.tab is None or not await direct.poll(caller, check, checkpoint.tab, wait):
            return await direct.stop_again(caller, checkpoint)
        remaining = max(0.0, wait - (direct.clock() - started))
    plan = Plan(spec, dict(checkpoint.arguments), commands_of(spec.name, checkpoint.arguments, checkpoint.tab),
                start=checkpoint.step, done=[dict(d) for d in checkpoint.done], call=checkpoint.call,
                tab=checkpoint.tab, prompt_wait=min(remaining, APPROVAL_PROMPT_MAX))
    result = await direct.run(caller, plan)
    if checkpoint.kind == "page" and claimed_by_a_person(result) and _first_refused(result, checkpoint):
        return await direct.stop_again(caller, checkpoint)  # a person took the tab meanwhile: nothing was sent
    if result.get("resume_token") is None or result.get("call") != checkpoint.call:
        direct.checkpoints.drop(checkpoint.agent, checkpoint.call)  # no longer stops on needs_user
    return result


def _first_refused(result: dict[str, Any], checkpoint: DirectCheckpoint) -> bool:
    """Whether the request refused is the run's first (the held one): then nothing of the resume was sent."""
    steps = result.get("steps")
    return not isinstance(steps, list) or len(steps) == checkpoint.step + 1
