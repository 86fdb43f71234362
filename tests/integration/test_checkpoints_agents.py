"""Checkpoints belong to their agent, on a live ``kitsune serve`` (real NATS, real Chromium, the test site).

Agent bob's 25 calls that stop push out none of agent alice's checkpoints, only bob's own oldest;
bob cannot resume alice's checkpoint even with her call id and her valid token (404
``checkpoint_not_found``, as for a call with none, and the site counts no write); alice resumes it
afterwards with that same token.
"""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from prometheus_client.parser import text_string_to_metric_families

from tests.integration.serving import Served, open_tab
from tests.site import TestSite

HIT = "POST /clicks/hit"


@pytest.fixture
def served(plain: Served) -> Served:
    """The session's plain node (tests/conftest.py): alice and bob may have checkpoints of other tests there."""
    return plain


def _stopping_call(client: httpx.Client, tab: int) -> dict[str, Any]:
    """A batch that stops at a failed wait, before its click is sent; its body (with a checkpoint)."""
    answer = client.post("/api/batch", json={"commands": [{"action": "waitFor", "selector": "#never", "timeout": 0.2},
                                                          {"action": "click", "selector": "#hit"}], "tabId": tab})
    assert answer.status_code == 200, answer.text
    body: dict[str, Any] = answer.json()
    assert [p["status"] for p in body["progress"]] == ["failed", "skipped"]
    return body


def _resume(client: httpx.Client, body: dict[str, Any], **extra: Any) -> httpx.Response:
    return client.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"], **extra})


def _refused_not_found(client: httpx.Client) -> float:
    """The node's count of resumes refused with checkpoint_not_found."""
    text = client.get("/metrics").text
    return sum(sample.value for family in text_string_to_metric_families(text) for sample in family.samples
               if sample.name == "kitsune_resumes_total" and sample.labels == {"outcome": "refused",
                                                                               "code": "checkpoint_not_found"})


def test_another_agents_calls_push_out_none_of_an_agents_checkpoints_and_it_cannot_resume_them(
        served: Served, site: TestSite) -> None:
    with served.client("alice") as alice, served.client("bob") as bob:
        alices_tab, bobs_tab = open_tab(alice, site.url("/clicks")), open_tab(bob, site.url("/clicks"))
        alices = [_stopping_call(alice, alices_tab) for _ in range(2)]
        bobs = [_stopping_call(bob, bobs_tab) for _ in range(25)]

        for pushed_out in bobs[:5]:  # bob's own oldest went: 20 each
            answer = _resume(bob, pushed_out, observed={"0": "applied"})
            assert (answer.status_code, answer.json()["code"]) == (404, "checkpoint_not_found")
        kept = bob.post("/api/resume", json={"call": bobs[5]["call"], "resume_token": "not-the-token-0000000000"})
        assert (kept.status_code, kept.json()["code"]) == (403, "resume_token_invalid")

        refused_before = _refused_not_found(alice)
        theirs = _resume(bob, alices[0], observed={"0": "applied"})  # alice's call id and her valid token
        unknown = bob.post("/api/resume", json={"call": alices[0]["call"] + 100_000,
                                                "resume_token": alices[0]["resume_token"]})
        assert theirs.status_code == unknown.status_code == 404
        assert theirs.json() == {**unknown.json(), "error": unknown.json()["error"].replace(
            str(alices[0]["call"] + 100_000), str(alices[0]["call"]))}
        assert _refused_not_found(alice) == refused_before + 2  # counted as the unknown call is
        assert site.count(HIT) == 0  # nothing was sent

        for body in alices:  # the same tokens work for alice: nothing was taken, rotated or dropped
            resumed = _resume(alice, body, observed={"0": "applied"})
            assert resumed.status_code == 200 and resumed.json()["status"] == "ok", resumed.text
        assert site.wait_for_count(HIT, 2) == 2
    ours = {body["call"] for body in alices + bobs}
    resumes = [e for e in served.audit() if e.get("kind") == "resume" and e["parent"]["call"] in ours]
    assert sorted((e["agent"], e["parent"]["call"]) for e in resumes) == sorted(
        ("alice", body["call"]) for body in alices)  # bob's refused resumes left no entry
    assert site.count(HIT) == 2
