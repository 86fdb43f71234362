"""Pieces the node benchmarks share: nodes started as ``kitsune serve`` starts them, a second node
joining the first one's NATS, a batch of clicks alternating with reads, each step's duration timed
from the events of the node that runs the call, and the driver's time of each action."""

from __future__ import annotations

import gc
import itertools
import os
import secrets
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import yaml

from bridge.node import Browser, Node
from bridge.wiring import run_node
from core.settings import NatsConfig, NodeConfig
from driver import ChromiumBrowser
from messages.commands import Command
from messages.events import Event, StepFailed, StepHeld, StepOutcomeUnknown, StepSkipped, StepSucceeded
from messages.results import Outcome

KITSUNE = Path(sys.executable).parent / "kitsune"

Plan = list[tuple[str, str | None]]
"""A batch's steps as (action, selector)."""


def start_node(browser: Browser, audit_dir: Path, *, joining: Node | None = None) -> Node:
    """A started node with its audit log in a file of ``audit_dir`` (as ``kitsune serve``): on an
    embedded nats-server, or joining ``joining``'s, in its fleet (their tabs reach each other over NATS). What the
    process made so far is then kept out of the collector's passes, as ``kitsune serve`` keeps its start's
    (``gc.freeze``)."""
    audit_file = audit_dir / f"audit-{secrets.token_hex(4)}.jsonl"
    if joining is None:
        node = run_node(browser, NodeConfig(audit_file=audit_file))
    else:
        assert joining.nats is not None
        node = run_node(browser, NodeConfig(nats=NatsConfig(joining.nats.url, joining.nats.auth),
                                            fleet=joining.config.fleet, audit_file=audit_file))
    gc.freeze()
    return node


def alternating(steps: int, reads: Sequence[tuple[str, str | None]]) -> Plan:
    """``steps`` steps: a click (``#b0``..``#b9`` in turn), a read (``reads`` in turn), a click..."""
    plan: Plan = []
    for i in range(steps // 2):
        plan.append(("click", f"#b{i % 10}"))
        plan.append(reads[i % len(reads)])
    return plan


def commands(plan: Plan) -> list[dict[str, Any]]:
    """The plan as a batch's commands."""
    return [{"action": action, **({"selector": selector} if selector else {})} for action, selector in plan]


def kind(action: str) -> str:
    return "click" if action == "click" else "read"


class TimedBrowser(ChromiumBrowser):
    """The driver, timing each action it runs."""

    def __init__(self) -> None:
        super().__init__()
        self.timings: list[float] = []

    async def execute(self, command: Command, tab_id: int | None, timeout: float, **options: Any) -> Outcome:
        started = time.perf_counter()
        try:
            return await super().execute(command, tab_id, timeout, **options)
        finally:
            self.timings.append((time.perf_counter() - started) * 1000)


class StepClock:
    """When each step of the calls a node runs ends: ``time.perf_counter()`` at each step's outcome event, in the
    node's event listener (one call at a time: ``clear`` before it, ``durations`` after). A step's duration is from
    the end of the step before to its own end: all the node does for it (its start, records, request, the browser,
    its outcome) and nothing of the next step's. (Its ``StepStarted`` is no mark for it: a read on the node's own tab
    is told started once its request is out, a write before its records, so intervals between starts would count a
    read's start in the step before it.)"""

    def __init__(self, node: Node) -> None:
        self._lock = threading.Lock()
        self._ended: list[tuple[float, str]] = []
        node.event_listeners.append(self._listen)

    def _listen(self, event: Event) -> None:
        if isinstance(event, StepSucceeded | StepFailed | StepOutcomeUnknown | StepHeld | StepSkipped):
            now = time.perf_counter()
            with self._lock:
                self._ended.append((now, event.path))

    def clear(self) -> None:
        with self._lock:
            self._ended.clear()

    def durations(self, plan: Plan) -> list[float]:
        """Milliseconds from each step's end to the next one's (the first step has none before it), in step order;
        the steps ended must be ``plan``'s."""
        with self._lock:
            ended = sorted(self._ended)
        assert [path for _, path in ended] == [str(n) for n in range(len(plan))]
        return [(t1 - t0) * 1000 for (t0, _), (t1, _) in itertools.pairwise(ended)]


def load_line(before: tuple[float, ...], after: tuple[float, ...]) -> str:
    """The machine's load averages (1, 5, 15 minutes) before and after the run."""
    return (f"load average before {before[0]:.2f} {before[1]:.2f} {before[2]:.2f}, "
            f"after {after[0]:.2f} {after[1]:.2f} {after[2]:.2f}")


def p95(values: Sequence[float]) -> float:
    """The 95th percentile of ``values`` (inclusive method: within their range even for a few values)."""
    return statistics.quantiles(values, n=20, method="inclusive")[-1]


class ServedNode:
    """A ``kitsune serve`` with embedded NATS and its own Chromium, for one agent (``bench``, with ``token``)."""

    def __init__(self, directory: Path, token: str, *, tree: Path | None = None) -> None:
        """``tree``, when given: another checkout of Kitsune whose code it runs (on ``PYTHONPATH``)."""
        config = directory / "kitsune.yaml"
        config.write_text(yaml.safe_dump({"agents": [{"name": "bench", "token": token}], "caps": ["core", "automation"],
                                          "audit_file": str(directory / "audit.jsonl")}))
        self.token_file = directory / "token"
        self.token_file.write_text(token)
        self._log = (directory / "serve.log").open("w")
        self.process = subprocess.Popen([str(KITSUNE), "serve", "--port", "0", "--config", str(config),
                                         "--state-dir", str(directory / "state")],
                                        stdout=subprocess.PIPE, stderr=self._log, text=True,
                                        env=None if tree is None else {**os.environ, "PYTHONPATH": str(tree)})
        assert self.process.stdout is not None
        for line in self.process.stdout:
            if line.startswith("kitsune serving "):
                self.base = line.split()[2]
                return
        raise SystemExit(f"kitsune serve did not start: {(directory / 'serve.log').read_text()}")

    def stop(self) -> None:
        self.process.terminate()
        self.process.wait(timeout=30)
