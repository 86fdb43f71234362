"""Benchmark: a read step, stage by stage, through Kitsune and raw Playwright.

``bench/overhead.py``'s mixed batch (clicks on the test site's /clicks page alternating with ``title`` and
``pageText`` reads; ``--plan reads``: its reads' batch) on a node's own tab and on raw Playwright's page, in the
same process, rounds interleaved. Every message Playwright's client sends to its server and every message it dispatches
back is timed on the loop (``time.perf_counter()`` in ``Connection.send_message_to_server`` and
``Connection.dispatch``), and so is each action through the driver (``ChromiumBrowser.execute``
entered and left) or, raw, each awaited call. Per read step, medians in ms:

- gap: the step before's end (its ``execute`` left; raw: its ``await`` back) to the read's start;
- to send: the read's start to its message sent (the action's own code, Playwright's client);
- browser: the message sent to its reply dispatched (the Playwright server, Chromium, the pipe, and
  the loop's turns before the reply is dispatched), with the count of other messages dispatched
  meanwhile (the click's events, ...);
- after: the reply dispatched to the read's end;
- the click's tail: its last reply dispatched to its end;
- ahead first: whether the next write was recorded ahead (``core.ahead``) before the read's message went
  out (1) or after (0); the mean is printed;
- to send cpu: the loop thread's CPU time from the read's start to its message sent;
- loop cpu: the loop thread's CPU time (``time.thread_time()``) between the read's message sent and its
  reply dispatched: the loop's own work while the read is in flight (that the reply may wait behind).

    PYTHONPATH=$PWD .venv/bin/python bench/read_stages.py [--rounds N] [--plan mixed|reads]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from playwright._impl.connection import Connection

from bench.overhead import PLANS, KitsuneSide, RawSide
from bench.shared import TimedBrowser, load_line
from core.ahead import Ahead
from messages.commands import Command
from messages.results import Outcome
from tests.site import TestSite

ROUNDS = 4

Mark = tuple[float, str, Any]
"""(perf_counter, what, detail): "send"/"recv" (message id, or None for an event), "enter"/"leave" (action)."""

_marks: dict[int, list[Mark]] = {}
"""Marks per Playwright connection (``id`` of it): each side's own."""
_recording: set[int] = set()
_cpu: dict[int, float] = {}
_entered: dict[int, float] = {}
"""The loop thread's CPU clock as each connection's side last began an action."""
_to_send: dict[int, list[tuple[Any, float]]] = {}
_to_send_of: dict[Any, float] = {}
_busy_of: dict[Any, float] = {}
_busy: dict[int, list[tuple[Any, float]]] = {}


def _hook() -> None:
    send, dispatch = Connection.send_message_to_server, Connection.dispatch

    def timed_send(self: Connection, object: Any, method: str, params: Any, options: dict[str, Any]) -> Any:
        future = send(self, object, method, params, options)
        if id(self) in _recording:
            call = None if method == "__waitInfo__" else next(reversed(self._callbacks))
            _marks[id(self)].append((time.perf_counter(), "send" if call is not None else "info", call))
            _cpu[id(self)] = time.thread_time()
            _to_send.setdefault(id(self), []).append((call, (_cpu[id(self)] - _entered.get(id(self), 0)) * 1000))
        return future

    def timed_dispatch(self: Connection, message: dict[str, Any]) -> None:
        if id(self) in _recording:
            _marks[id(self)].append((time.perf_counter(), "recv", message.get("id")))
            if (call := message.get("id")) is not None:
                _busy.setdefault(id(self), []).append((call, (time.thread_time() - _cpu.get(id(self), 0)) * 1000))
        dispatch(self, message)

    record = Ahead.__call__

    def timed_record(self: Ahead) -> None:
        for conn in _recording:
            _marks[conn].append((time.perf_counter(), "ahead", None))
        record(self)

    Ahead.__call__ = timed_record  # type: ignore[method-assign]
    Connection.send_message_to_server = timed_send  # type: ignore[method-assign]
    Connection.dispatch = timed_dispatch  # type: ignore[method-assign]


def _connection_of(page: Any) -> Connection:
    return page._impl_obj._connection  # type: ignore[no-any-return]


class MarkedBrowser(TimedBrowser):
    """The driver, marking each action's start and end among its connection's messages."""

    async def execute(self, command: Command, tab_id: int | None, timeout: float, **options: Any) -> Outcome:
        marks = _marks.setdefault(self.connection_id, [])
        marks.append((time.perf_counter(), "enter", command.action))
        _entered[self.connection_id] = time.thread_time()
        try:
            return await super().execute(command, tab_id, timeout, **options)
        finally:
            marks.append((time.perf_counter(), "leave", command.action))

    connection_id = 0


async def _raw_round(page: Any, plan: str) -> None:
    marks = _marks[id(_connection_of(page))]
    for action, selector in PLANS[plan]:
        marks.append((time.perf_counter(), "enter", action))
        _entered[id(_connection_of(page))] = time.thread_time()
        if action == "click":
            await page.click(selector)
        elif action == "title":
            await page.title()
        else:
            await page.inner_text(selector)
        marks.append((time.perf_counter(), "leave", action))


def stages(marks: list[Mark]) -> dict[str, list[float]]:
    """Per read step: the stages (ms) and the events dispatched while it waited."""
    out: dict[str, list[float]] = {k: [] for k in ("gap", "to send", "browser", "after", "events", "click tail",
                                                         "ahead first")}
    last_leave: float | None = None
    click_last_recv: float | None = None
    i = 0
    while i < len(marks):
        t, what, detail = marks[i]
        if what == "leave":
            last_leave = t
            recvs = [m[0] for m in marks[:i] if m[1] == "recv" and m[2] is not None] if detail == "click" else []
            click_last_recv = recvs[-1] if recvs else None
        if what == "enter" and detail != "click" and last_leave is not None:
            j = i + 1
            while marks[j][1] != "send":
                j += 1
            sent, call = marks[j][0], marks[j][2]
            k, events = j + 1, 0
            while not (marks[k][1] == "recv" and marks[k][2] == call):
                events += marks[k][1] == "recv" and marks[k][2] is None
                k += 1
            end = k + 1
            while marks[end][1] != "leave":
                end += 1
            out.setdefault(f"browser {detail}", []).append((marks[k][0] - sent) * 1000)
            out.setdefault(f"to send {detail}", []).append((sent - t) * 1000)
            out["gap"].append((t - last_leave) * 1000)
            out["ahead first"].append(int(any(m[1] == "ahead" and last_leave < m[0] < sent for m in marks[i - 8:j])))
            out.setdefault("loop cpu", []).append(_busy_of.get(call, -1))
            out.setdefault("to send cpu", []).append(_to_send_of.get(call, -1))
            out["to send"].append((sent - t) * 1000)
            out["browser"].append((marks[k][0] - sent) * 1000)
            out["after"].append((marks[end][0] - marks[k][0]) * 1000)
            out["events"].append(events)
            if click_last_recv is not None:
                out["click tail"].append((last_leave - click_last_recv) * 1000)
            last_leave = marks[end][0]
            i = end
        i += 1
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each side")
    parser.add_argument("--plan", choices=sorted(PLANS), default="mixed",
                        help="the batch: clicks alternating with reads (a read right after a click), or reads alone")
    args = parser.parse_args()
    _hook()
    load_before = os.getloadavg()
    pooled: dict[str, dict[str, list[float]]] = {"kitsune": {}, "raw": {}}
    with TestSite() as site:
        kitsune, raw = KitsuneSide(site, browser=MarkedBrowser()), RawSide(site)
        k_conn, r_conn = _connection_of(kitsune.browser.page(kitsune.tab)), _connection_of(raw.page)
        assert isinstance(kitsune.browser, MarkedBrowser)
        kitsune.browser.connection_id = id(k_conn)
        sides: dict[str, tuple[int, Callable[[], object]]] = {
            "kitsune": (id(k_conn), lambda: kitsune.round(args.plan)),
            "raw": (id(r_conn), lambda: raw.io.run(_raw_round(raw.page, args.plan), 120))}
        try:
            for r in range(args.rounds + 1):
                for name in (["kitsune", "raw"] if r % 2 == 0 else ["raw", "kitsune"]):
                    conn, run = sides[name]
                    _marks[conn] = []
                    _recording.add(conn)
                    run()
                    _recording.discard(conn)
                    _busy_of.clear()
                    _busy_of.update(dict(_busy.pop(conn, [])))
                    _to_send_of.clear()
                    _to_send_of.update(dict(_to_send.pop(conn, [])))
                    if r:  # the first round warms up
                        for stage, values in stages(_marks[conn]).items():
                            pooled[name].setdefault(stage, []).extend(values)
        finally:
            kitsune.stop()
            raw.stop()
    after = "right after a click" if args.plan == "mixed" else "after a read"
    print(f"a read {after}, {args.rounds} rounds of {len(PLANS[args.plan])} steps a side, {os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    print("median ms        | kitsune |    raw")
    for stage in ("gap", "to send", "browser", "after", "events", "click tail", "to send title", "to send pageText",
                  "browser title", "browser pageText", "to send cpu", "loop cpu", "ahead first"):
        average = statistics.mean if stage == "ahead first" else statistics.median
        if not pooled["raw"].get(stage):
            continue
        mine, theirs = average(pooled["kitsune"][stage]), average(pooled["raw"][stage])
        print(f"  {stage:16s} | {mine:7.3f} | {theirs:6.3f}")
    for name in ("kitsune", "raw"):
        whole = [a + b + c for a, b, c in zip(pooled[name]["to send"], pooled[name]["browser"],
                                              pooled[name]["after"], strict=True)]
        print(f"  {name} read, entered to left: median {statistics.median(whole):.3f} ms")


if __name__ == "__main__":
    main()
