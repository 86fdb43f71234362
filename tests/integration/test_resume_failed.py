"""``resume_failed`` over HTTP: a resume that stops on an internal error answers 200 with what ran,
and its checkpoint is gone.

An internal error cannot be provoked from outside a healthy node, so this test injects one: the
session's real node serves the real app (uvicorn on the node's own loop), and its driver port
raises an unexpected exception for the resumed step.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

import httpx
import pytest

from bridge.node import Node
from core.ports import Recorded
from kitsune.config import load_config
from messages.commands import Command
from messages.results import Outcome
from tests.integration.serving import app_over
from tests.site import TestSite

TOKEN = "resume-failed-token-0123456789"


class _Breaking:
    """The node's driver port, raising a bug's exception for one selector (from a thread, and from the loop, where the
    steps of the node's own tabs go: ``run_here``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner
        self.broken = False

    def _break(self, command: Command) -> None:
        if self.broken and getattr(command, "selector", None) == "#local":
            raise RuntimeError("a bug in a port")

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        self._break(command)
        outcome: Outcome = self.inner.execute(command, tab_id, timeout, recorded)
        return outcome

    async def run_here(self, command: Command, tab_id: int, timeout: float) -> Outcome | None:
        self._break(command)
        outcome: Outcome | None = await self.inner.run_here(command, tab_id, timeout)
        return outcome

    def list_tabs(self) -> frozenset[int]:
        tabs: frozenset[int] = self.inner.list_tabs()
        return tabs

    def for_agent(self, agent: str) -> _Breaking:
        """Every agent's calls go through this one port (its calls name no session: they need no agent)."""
        return self


@pytest.fixture
def served_node(node: Node) -> Iterator[tuple[str, _Breaking]]:
    config = load_config(None, {"KITSUNE_AGENTS": f"tester={TOKEN}", "KITSUNE_CAPS": "core,automation"})
    breaking = _Breaking(node._driver)
    node._driver = breaking  # type: ignore[assignment]
    try:
        with app_over(node, config) as base:
            yield base, breaking
    finally:
        node._driver = breaking.inner


def test_a_resume_that_stops_on_an_internal_error_answers_resume_failed_200_and_drops_the_checkpoint(
        served_node: tuple[str, _Breaking], node: Node, test_site: TestSite) -> None:
    base, breaking = served_node
    test_site.reset()
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as client:
        tab = client.post("/api/tabs", json={"op": "open", "url": test_site.url("/clicks")}).json()["tabId"]
        body = client.post("/api/batch", json={"commands": [
            {"action": "click", "selector": "#hit"}, {"action": "click", "selector": "#nothing", "timeout": 0.3},
            {"action": "click", "selector": "#local"}], "tabId": tab}).json()
        assert [p["status"] for p in body["progress"]] == ["ok", "failed", "skipped"]
        breaking.broken = True
        client.post("/api/act", json={"command": {"action": "js", "tabId": tab,
                                                  "code": "document.body.insertAdjacentHTML('beforeend', "
                                                          "'<b id=nothing>x</b>')"}})

        answer = client.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]})

        assert answer.status_code == 200
        failed = answer.json()
        assert (failed["code"], failed["retryable"]) == ("resume_failed", False)
        assert [p["status"] for p in failed["progress"]] == ["ok", "ok", "unknown"]
        assert failed["progress"][0]["resumed"] == "kept"
        assert "call" not in failed and "resume_token" not in failed
        gone = client.post("/api/resume", json={"call": body["call"], "resume_token": body["resume_token"]})
        assert (gone.status_code, gone.json()["code"]) == (404, "checkpoint_not_found")
    assert test_site.count("POST /clicks/hit") == 1
