"""Continuation tokens end with their task's authority (issue 33): revoking a task, or taking it over, ends
the site-tool calls its owner had running on its tabs, their outstanding tokens revoked (a redemption is
refused), on the two-node fleet of ``task_fleet`` (real Chromium, real nats-server). The call runs through
one node and its tab is on the other: the revocation follows the task's record wherever it is changed."""

from __future__ import annotations

import concurrent.futures
from typing import Any
from urllib.parse import urlencode

import httpx
import pytest

from messages.errors import ERROR_CODES
from tests.integration.fleet_nodes import until
from tests.integration.task_fleet import Fleet, answer, api, create, open_tab, sessions
from tests.integration.test_site_tools import REFUSED, kept_tokens, redeem_in
from tests.site import TestSite


def _held_call(owner: httpx.Client, tab: int) -> tuple[int, dict[str, Any]]:
    """A direct call of the hold page's tool (it asks for a token and stays): its status and body."""
    response = owner.post("/api/act", json={"command": {"action": "callSiteTool", "tabId": tab, "name": "hold",
                                                        "input": {}, "timeout": 30}})
    body: dict[str, Any] = response.json()
    return response.status_code, body


@pytest.mark.parametrize("ending", ["revoke", "takeover"])
def test_a_task_revoked_or_taken_over_revokes_its_calls_continuation_tokens(
        fleet: Fleet, site: TestSite, ending: str) -> None:
    s1, s2 = sessions(2)
    far = fleet.nodes[1]
    with api(fleet.bases[0], session=s1) as owner, api(fleet.bases[0], session=s2) as heir, \
            concurrent.futures.ThreadPoolExecutor(1) as apart:
        tab = open_tab(owner, site.url("/shop/hold"), far, session=f"far-{s1}")
        task = create(owner, [tab], "Hold on")["id"]
        held = apart.submit(_held_call, owner, tab)
        [token] = until(lambda: kept_tokens(far, tab), 30, "the hold page's token")  # a bound on failing, no wait
        if ending == "revoke":
            answer(owner.delete(f"/api/tasks/{task}"))
        else:
            answer(heir.post(f"/api/tasks/{task}/takeover", json={"force": True}))
        status, body = held.result(timeout=15)  # long before the token's own 60 s
        code = "task_revoked" if ending == "revoke" else "task_leased"
        assert (status, body["status"], body["code"]) == (ERROR_CODES[code].http_status, "unknown", code), body
        assert redeem_in(far, tab, site.url("/shop/redeem?" + urlencode({"token": token}))) == REFUSED
