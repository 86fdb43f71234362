"""Who may act through a Live View link: the rule, and the grant of control an agent may ask for.

A Live View is a person's channel into a tab, and an agent holds the links it asks for: an agent's
own link must not carry its writes around its policy. So:

- an operator's link (the console's) always carries control: operators are people, signed in;
- an agent's link carries control by default only when its policy lets it write freely; under
  ``ask_before_act`` or ``read_only`` it is view-only (``"control": false``: frames only; mouse,
  keys and paste are refused and audited as ``input_refused``; it takes no control of the tab, so
  it blocks none of the agents' writes);
- ``{"op": "live_view", "control": true}`` under ``ask_before_act`` is held like any write
  (``needs_user`` with a confirm token bound to the agent, session, tab and this grant); once a
  person approves and it is asked again with the token, the link carries control, whatever the agent's
  policy becomes. Under
  ``read_only`` no agent can grant it (``read_only``): only an operator's link acts;
- ``"control": false`` asks for a view-only link, whatever the policy;
- ``"mode": "devtools"`` asks for a link to DevTools for the tab: it runs script in the page, so it is always a
  link that controls, granted as ``"control": true`` is (held under ``ask_before_act``, with an approval of its
  own: one for the screencast's control approves no DevTools; refused under ``read_only``);
- a link's control that its agent's policy gave (none granted it) follows that policy as it is when a
  connection opens and at each input: an agent that became ``ask_before_act`` or ``read_only`` since
  keeps no control through an older link (``LiveViews.may_control``).

Whatever a person does through a link that controls is audited under the link's agent, click by
click and key by key, without a typed value (``driver.live_inputs``).
"""

from __future__ import annotations

from typing import Any

import orjson

from bridge.live.views import OPERATOR
from bridge.services import LiveLinkService
from core.policy import ConfirmTokens, Policy
from messages.errors import KitsuneError

__all__ = ["MODES", "grant_link"]

MODES = ("tab", "devtools")
"""What a link opens: the screencast page, or DevTools for the tab."""


async def grant_link(views: LiveLinkService, confirms: ConfirmTokens, policy: Policy, agent: str, session: str | None,
                     tab: int, control: object, confirm_token: str | None, base_url: str,
                     mode: object = None) -> dict[str, Any]:
    """The answer of ``POST /api/tabs {"op": "live_view"}``: the link, or the hold of a grant of control."""
    if control is not None and not isinstance(control, bool):
        raise KitsuneError("invalid_parameter", "control must be a boolean", state={"param": "control"})
    if mode is not None and mode not in MODES:
        raise KitsuneError("invalid_parameter", "mode must be tab or devtools", state={"param": "mode"})
    mode = "tab" if mode is None else str(mode)
    if mode == "devtools" and control is False:
        raise KitsuneError("invalid_parameter", "A DevTools link always controls the tab (it runs script in the "
                           "page): control cannot be false", state={"param": "control"})
    control = True if mode == "devtools" else control
    if control is not True or agent.startswith(OPERATOR) or not (policy.read_only or policy.ask_before_act):
        return {"ok": True, **await views.issue(tab, agent, base_url, control, mode=mode)}
    if policy.read_only:
        raise KitsuneError("read_only", "This agent is read-only: a Live View link it asks for is view-only (and "
                           "DevTools none); only an operator's link (the console) can act in its tab",
                           state={"tabId": tab})
    views.may_show(tab, agent)  # never an approval in vain: the link could not be made
    grant = {"control": True} if mode == "tab" else {"control": True, "mode": mode}
    hold = confirms.hold(confirm_token, agent, session, "live_view", tab, orjson.dumps(grant),
                         grant="control" if mode == "tab" else "devtools")
    if hold is not None:
        return {**hold.failure.to_json(), "status": "held"}
    return {"ok": True, **await views.issue(tab, agent, base_url, True, granted=True, mode=mode)}  # a person approved
