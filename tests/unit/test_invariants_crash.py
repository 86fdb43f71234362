"""Property tests of a write's records against crashes (spec: Checkpoint and resume; ``core.ahead``).

A write is sent only once its ``StepDispatched`` is stored and its audit entry written; the next
write of a list is recorded ahead, while a step before it runs (the write before it, across the reads
between). Hypothesis runs random calls (leaves, sequences, a parallel; writes whose values name earlier
steps' results, which are recorded only once those steps ran; answers that fail, hold, end unknown or
break the engine) against stores that acknowledge in their own time, in order, and a driver that
notes each send. One timeline holds what was stored, written and sent, in order. A crash may come at
any point of it: what a node then replays is the fold of the events stored before that point. At every point:

1. a write sent before the crash had its ``StepDispatched`` stored and its audit entry written
   before it was sent;
2. no write the replay reports ``skipped`` was sent, and nothing it reports ``ok`` was not sent
   and answered ok (or kept from an earlier run); a write sent is ``unknown`` or what its answer
   says (a read's events are posted, not waited for: sending a read again changes nothing);
3. nothing is sent twice in a run, and a resume never sends again a write that ran ok.

So resuming by hand after a crash (send what is not ok, after observing what is unknown) never
sends a write twice. The run's own report (no crash) is the fold of all its events.
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import hypothesis.strategies as st
from hypothesis import event, given, settings

from actors.threads import ThreadedSequences
from core.calls import Calls, SequentialIds
from core.checkpoints import CheckpointStore
from core.claims import ClaimTable
from core.ports import Ports, Recorded, wait_recorded
from messages.codec import encode, replay
from messages.commands import Command, parse_call
from messages.events import CallEnded, CallStarted, Event, StepDispatched
from messages.results import Outcome
from messages.steplog import StepLog, fold
from tests.unit.fakes import FakeClock, LoopHere, ScriptedDriver
from tests.unit.test_invariants import STATUS_OF, call_shapes

ANSWERS = ("ok", "ok", "ok", "warn", "fail", "fail_retryable", "unknown", "hang", "hold", "break")
"""The driver's answers; ``break``: sent, then the driver raises what no port may (the engine stops)."""


@dataclass(frozen=True)
class Stored:
    """An event the store acknowledged."""

    event: Event


@dataclass(frozen=True)
class Written:
    """An audit entry the audit log acknowledged."""

    call: int
    path: str
    command: Command
    """The command as the entry records it (references resolved)."""


@dataclass(frozen=True)
class SentTo:
    """A command that reached the page."""

    key: str
    command: Command


Entry = Stored | Written | SentTo


class Timeline:
    """What was stored, written and sent, in order; stores that acknowledge in their own time."""

    def __init__(self, rng: random.Random) -> None:
        self.entries: list[Entry] = []
        self._rng = rng
        self._lock = threading.RLock()
        self._events: list[Event] = []
        """Events handed over, not yet acknowledged."""
        self._audit: list[Written] = []
        """Audit entries on their way."""
        self.withdrawn: list[str] = []
        """The paths of the writes recorded ahead whose turn did not come, as the audit log told them."""

    def _settle(self, queue: list[Any], upto: int, wrap: Callable[[Any], Entry]) -> None:
        """Acknowledge the first ``upto`` items of ``queue``, in order."""
        self.entries.extend(wrap(item) for item in queue[:upto])
        del queue[:upto]

    def _maybe_settle(self) -> None:
        """Either store may acknowledge what it holds at any time."""
        if self._rng.random() < 0.3:
            self._settle(self._events, len(self._events), Stored)
        if self._rng.random() < 0.3:
            self._settle(self._audit, len(self._audit), lambda w: w)

    def sink(self, event: Event) -> Callable[[], None] | None:
        """The event sink: a dispatch and a call's end are waited for, the rest posted."""
        with self._lock:
            self._maybe_settle()
            self._events.append(event)
            if not isinstance(event, StepDispatched | CallEnded):
                return None

        def stored() -> None:
            with self._lock:
                if event in self._events:
                    self._settle(self._events, self._events.index(event) + 1, Stored)
        return stored

    def audit(self, call: int, path: str, command: Command) -> Callable[[], None]:
        written = Written(call, path, command)
        with self._lock:
            self._maybe_settle()
            self._audit.append(written)

        def wait() -> None:
            with self._lock:
                if written in self._audit:
                    self._settle(self._audit, self._audit.index(written) + 1, lambda w: w)
        return wait

    def sent(self, key: str, command: Command) -> None:
        with self._lock:
            self._maybe_settle()
            self.entries.append(SentTo(key, command))

    def settle_all(self) -> None:
        with self._lock:
            self._settle(self._events, len(self._events), Stored)
            self._settle(self._audit, len(self._audit), lambda w: w)


class TimelineAudit:
    """The engine's audit port: each step's entry goes to the timeline's audit log."""

    def __init__(self, timeline: Timeline) -> None:
        self._timeline = timeline

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        return self._timeline.audit(call, path, command)

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self._timeline.audit(call, path, command)()

    def withdrawn(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        self._timeline.withdrawn.append(path)


class TimelineDriver(ScriptedDriver):
    """The scripted driver, noting each command on the timeline as it is sent (its records made)."""

    def __init__(self, clock: FakeClock, timeline: Timeline) -> None:
        super().__init__(clock)
        self.timeline = timeline

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        wait_recorded(recorded)
        key = self.key_of(command)
        self.timeline.sent(key, command)
        if self.script[key] and self.script[key][0] == "break":
            self.script[key].popleft()
            raise RuntimeError("the driver broke after sending")
        return super().execute(command, tab_id, timeout, (), as_read=as_read)


@dataclass(frozen=True)
class Leaf:
    path: str
    key: str
    write: bool
    answer: str


class Build:
    """A generated call: its commands (some writes naming an earlier read's text) and its leaves."""

    def __init__(self, shape: list[tuple[str, Any]], rng: random.Random) -> None:
        self.leaves: dict[str, Leaf] = {}
        self._rng = rng
        self.raw: list[dict[str, Any]] = []
        for i, (kind, item) in enumerate(shape):
            if kind == "leaf":
                self.raw.append(self._leaf(str(i), item, None, self.raw))
            elif kind == "sequence":
                steps: list[dict[str, Any]] = []
                for j, s in enumerate(item):
                    steps.append(self._leaf(f"{i}.{j}", s, None, steps))
                self.raw.append({"action": "sequence", "steps": steps})
            else:
                sequences = []
                for q, seq in enumerate(item):
                    steps = []
                    for j, s in enumerate(seq):
                        steps.append(self._leaf(f"{i}.{q}.{j}", s, q + 1, steps))
                    sequences.append(steps)
                self.raw.append({"action": "parallel", "sequences": sequences})

    def _leaf(self, path: str, shape: tuple[bool, str], tab: int | None,
              earlier: list[dict[str, Any]]) -> dict[str, Any]:
        write, answer = shape
        if self._rng.random() < 0.1:
            answer = "break"
        key = f"#{'w' if write else 'r'}{path}"
        raw: dict[str, Any] = {"action": "fill" if write else "pageText", "selector": key}
        if write:
            reads = [j for j, c in enumerate(earlier) if c["action"] == "pageText"]
            # a value naming an earlier read (recorded ahead only when it is not the step just before)
            raw["value"] = f"${{${self._rng.choice(reads)}.text}}" if reads and self._rng.random() < 0.5 else "v"
        if tab is not None:
            raw["tabId"] = tab
        self.leaves[path] = Leaf(path, key, write, answer)
        return raw


def check_crash_points(timeline: Timeline, leaves: dict[str, Leaf], ran_ok: set[str]) -> None:
    """Invariants 1-3 at every point of the timeline where a crash may come."""
    by_key = {leaf.key: leaf for leaf in leaves.values()}
    dispatched: set[str] = set()
    written: dict[str, Command] = {}
    stored: list[Event] = []
    sent: list[str] = []
    for entry in [*timeline.entries, None]:
        log = replay(encode(e) for e in stored) if any(isinstance(e, CallStarted) for e in stored) else None
        if log is not None:
            check_replay(log, by_key, sent, ran_ok)
        if isinstance(entry, Stored):
            stored.append(entry.event)
            if isinstance(entry.event, StepDispatched):
                dispatched.add(entry.event.path)
        elif isinstance(entry, Written):
            written[entry.path] = entry.command
        elif isinstance(entry, SentTo):
            leaf = by_key[entry.key]
            if leaf.write:  # invariant 1
                assert leaf.path in dispatched, f"write {leaf.path} sent before its StepDispatched was stored"
                assert leaf.path in written, f"write {leaf.path} sent before its audit entry was written"
                assert written[leaf.path] == entry.command, f"write {leaf.path} sent as its audit entry does not say"
                assert entry.key not in ran_ok, f"write {leaf.path} ran ok and was sent again"
            assert entry.key not in sent, f"{leaf.path} sent twice in one run"  # invariant 3
            sent.append(entry.key)


def check_replay(log: StepLog, by_key: dict[str, Leaf], sent: list[str], ran_ok: set[str]) -> None:
    """Invariant 2: the replay after a crash here claims nothing that might be false."""
    for leaf in by_key.values():
        record = log.find(leaf.path)
        assert record is not None
        if record.status == "ok" and not record.kept and record.observed is None:
            assert leaf.key in sent and STATUS_OF.get(leaf.answer) == "ok", f"{leaf.path} reported ok, not run ok"
        if not leaf.write:
            continue  # a read's events are posted: a crash may lose them, and sending it again changes nothing
        if record.status == "skipped":
            assert leaf.key not in sent, f"write {leaf.path} reported skipped, but it was sent"
        if leaf.key in sent:
            assert record.status in ("unknown", STATUS_OF.get(leaf.answer, "unknown")), (leaf, record.status)


def check_closed(timeline: Timeline, leaves: dict[str, Leaf]) -> None:
    """With no crash, a write the run did not send is reported so (skipped, failed, kept), never ``unknown``:
    one recorded ahead whose turn never came included, and the audit log says that one was not sent."""
    log = fold(e.event for e in timeline.entries if isinstance(e, Stored))
    sent = {e.key for e in timeline.entries if isinstance(e, SentTo)}
    audited = {e.path for e in timeline.entries if isinstance(e, Written)}
    for leaf in leaves.values():
        record = log.find(leaf.path)
        assert record is not None
        if leaf.write and leaf.key not in sent:
            assert record.status in ("skipped", "failed") or record.kept, (leaf, record)
        if leaf.write and record.status == "skipped" and leaf.path in audited:
            assert leaf.path in timeline.withdrawn, (leaf, record)


def run_with_crashes(shape: list[tuple[str, Any]], seed: int, kind: Literal["batch", "parallel"], here: bool) -> None:
    """``here``: the steps of tabs 1 and 3 run on the node's loop (``core.here``), tab 2's through the driver."""
    rng = random.Random(seed)
    timeline = Timeline(rng)
    clock = FakeClock()
    driver = TimelineDriver(clock, timeline)
    claims = ClaimTable()
    loop = LoopHere(driver, frozenset({1, 3})) if here else None
    calls = Calls(lambda agent: Ports(driver, clock, claims, ThreadedSequences(), TimelineAudit(timeline), here=loop),
                  CheckpointStore(clock), audit=SequentialIds(), sink=timeline.sink)
    build = Build(shape, rng)
    for leaf in build.leaves.values():
        driver.on(leaf.key, leaf.answer)
    spec = parse_call(kind, build.raw, default_tab=3, timeout=3600.0)
    response = calls.run(spec)
    timeline.settle_all()
    events = [e.event for e in timeline.entries if isinstance(e, Stored)]
    if response.body.get("code") is None:
        assert fold(events).progress == response.body["progress"]
    check_crash_points(timeline, build.leaves, set())
    check_closed(timeline, build.leaves)
    answers = {leaf.key: leaf.answer for leaf in build.leaves.values()}
    ran_ok = {e.key for e in timeline.entries if isinstance(e, SentTo) and e.command.writes
              and STATUS_OF.get(answers[e.key]) == "ok"}
    event(f"first run: {response.body.get('status')}")
    if "resume_token" not in response.body:
        return
    # resume with every unknown write observed not applied, the others answering ok this time
    progress = fold(events)
    observed = {r.path: "not_applied" for r in progress.records() if r.status == "unknown" and not r.is_container
                and build.leaves[r.path].write}
    again = {path: Leaf(leaf.path, leaf.key, leaf.write, "ok") for path, leaf in build.leaves.items()}
    for leaf in again.values():
        driver.script[leaf.key].clear()
    timeline.entries.clear()
    resumed = calls.resume(response.body["call"], response.body["resume_token"], observed)
    timeline.settle_all()
    event(f"resume: {resumed.body.get('status')}")
    check_crash_points(timeline, again, ran_ok)
    check_closed(timeline, again)


@settings(max_examples=150, deadline=None)
@given(shape=call_shapes(), seed=st.integers(0, 2**32 - 1), here=st.booleans())
def test_records_come_before_sends_and_a_crash_anywhere_reports_nothing_false(shape: list[tuple[str, Any]],
                                                                               seed: int, here: bool) -> None:
    parallel = any(kind == "parallel" for kind, _ in shape)
    run_with_crashes(shape, seed, "parallel" if parallel and len(shape) == 1 else "batch", here)


@settings(max_examples=60, deadline=None)
@given(writes=st.lists(st.sampled_from(ANSWERS), min_size=2, max_size=8), seed=st.integers(0, 2**32 - 1),
       here=st.booleans())
def test_a_list_of_writes_each_recorded_ahead(writes: list[str], seed: int, here: bool) -> None:
    """Writes in a row: each but the first is recorded ahead; a crash anywhere still reports nothing false, on the
    node's loop (``here``) as through the driver."""
    run_with_crashes([("leaf", (True, answer)) for answer in writes], seed, "batch", here)


@settings(max_examples=100, deadline=None)
@given(steps=st.lists(st.tuples(st.booleans(), st.sampled_from(ANSWERS)), min_size=3, max_size=10),
       seed=st.integers(0, 2**32 - 1), here=st.booleans())
def test_writes_recorded_ahead_across_the_reads_before_their_turn(steps: list[tuple[bool, str]], seed: int,
                                                                   here: bool) -> None:
    """Reads and writes mixed: a write is recorded ahead as the write before it is sent (or, when its value names a
    read in between, as a later read is), carried over the reads to its turn, and withdrawn when one of them stops the
    list; a crash anywhere still reports nothing false, on the node's loop (``here``) as through the driver."""
    run_with_crashes([("leaf", step) for step in steps], seed, "batch", here)
