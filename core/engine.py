"""The step engine: runs a call's commands against a driver and tells it as events.

Pure core: the driver, clock, tab claims and the runner of parallel sequences are ports
(``core.ports``); the actors of ``actors/`` and the Playwright driver of ``bridge/`` plug in,
unit tests use fakes. A write records ``StepDispatched`` before it is sent. The report's
progress, status and summary are the fold of the events the run emitted, and the run reads
each step's status from that fold as it goes. The one-step blocks run in ``core.blocks``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Coroutine, Mapping
from typing import Any

from core.ahead import Ahead, Intent, ahead_of, at_turn, writes_ahead
from core.blocks import Lookup, lookup_in, scrub, tab_of
from core.here import Hand, here_target, steps_here
from core.lanes import barriers, check_sequences, leaves, outline_of
from core.ports import NO_AUDIT, Clock, Driver, EventSinkPort, Ports, Recorded, Sequences, StepAudit, StepsHere
from core.reports import Decision, EngineConfig, Prior, RunReport, trimmed
from core.step import Step, deadline_outcome
from messages.commands import (
    CallSpec,
    Command,
    NewTab,
    Parallel,
    Sequence,
    SyncBarrier,
    children,
    leaf_paths,
    resolve_command,
    secret_values,
)
from messages.contract import SETTLE
from messages.errors import KitsuneError
from messages.events import (
    CallEnded,
    CallResumed,
    CallStarted,
    EndReason,
    Event,
    StepFailed,
    StepHeld,
    StepKept,
    StepObserved,
    StepOutcomeUnknown,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from messages.paths import ROOT, StepPath
from messages.results import Done, Failed, Failure, Ok, Outcome, Result, Status, Unknown, worst
from messages.steplog import StepLogBuilder, StepRecord

__all__ = [
    "NO_AUDIT", "Clock", "Decision", "Driver", "EngineConfig", "EventSinkPort", "Ports", "Prior", "RunReport",
    "Sequences", "StepAudit", "outline_of", "run_call",
]

log = logging.getLogger(__name__)


class _Run:
    """One run of a call: its first run, or one resume.

    Each step's status, and whether a write inside a block ran ok, is the fold's (:meth:`record`);
    what a step needs only while it runs is its :class:`Step`'s. The run keeps of its own only
    what the events do not carry: each step's result, the tabs each parallel sequence claimed and
    the sequences refused, how many sequences meet at each barrier, and why the call stops.
    """

    def __init__(self, call: int, spec: CallSpec, ports: Ports, sink: EventSinkPort,
                 config: EngineConfig, prior: Prior | None, timeout: float) -> None:
        self.call, self.spec, self.ports, self.sink, self.config, self.prior = call, spec, ports, sink, config, prior
        self.timeout = timeout
        self.deadline = ports.clock.now() + timeout
        self.plan: Mapping[str, Decision] = prior.plan if prior else {}
        self.builder = StepLogBuilder()
        self.lock = threading.Lock()
        self.results: dict[str, Result] = {}
        self.claims: dict[str, set[int]] = {}
        self.refused: set[str] = set()
        self.parties: dict[str, int] = {}
        """How many sequences meet at each barrier key of this run."""
        self.timed_out = self.stopped = False

    # events and the fold

    def emit(self, event: Event) -> None:
        """Fold ``event`` in and hand it to the sink; an event the sink loses is logged, the run goes on."""
        try:
            stored = self.hand_over(event)
            if stored is not None:  # waited for outside the lock: other sequences go on meanwhile
                stored()
        except Exception as e:
            log.error("event of call %s not recorded (%s)", self.call, type(e).__name__)

    def hand_over(self, event: Event) -> Callable[[], None] | None:
        """Fold ``event`` in and queue it in the sink; the sink's wait until it is stored, if any."""
        with self.lock:  # events reach the fold and the sink in one order
            self.builder.apply(event)
            return self.sink(event)

    def record(self, path: str) -> StepRecord:
        """The step's record as the events so far tell it."""
        with self.lock:
            return self.builder.record(path)

    def _status(self, path: str) -> Status:
        with self.lock:
            return self.builder.status(path)

    def execute(self) -> RunReport:
        outline = tuple(outline_of(c, self.spec.default_tab) for c in self.spec.commands)
        if self.prior is None:
            self.emit(CallStarted(self.call, self.spec.kind, outline, self.timeout))
        else:
            self.emit(CallResumed(self.call, self.spec.kind, outline, self.timeout, self.prior.attempt))
        reason: EndReason
        try:
            status = self._run_list(self.spec.commands, ROOT, None, self.spec.default_tab)
            if self.timed_out:
                reason = "container_timeout"
            else:
                reason = "completed" if status == "ok" and not self.stopped else "stopped"
        except Exception as e:  # an engine or port bug: the call stops, what ran is reported
            log.error("call %s stopped on an internal error (%s)", self.call, type(e).__name__)
            reason = "internal_error"
        finally:
            self.ports.claims.release(self.call)
        self.emit(CallEnded(self.call, reason))
        with self.lock:
            step_log = self.builder.freeze()
        return RunReport(step_log, dict(self.results), {k: frozenset(v) for k, v in self.claims.items()},
                         frozenset(self.refused))

    # lists of steps

    def _run_list(self, commands: tuple[Command, ...], within: StepPath, owner: StepPath | None,
                  tab: int | None) -> Status:
        """Run a list's steps (at ``within.i``) in order until one is not ok; the list's status. Consecutive
        steps of the node's own tabs run on its loop, in one hop (``core.here``); a write recorded ahead
        (:meth:`ahead`) is carried to its turn, and skipped like any step not reached when it never comes (on an
        error, here)."""
        paths = [within.child(i) for i in range(len(commands))]
        scope: list[Result | None] = [None] * len(commands)
        writes = writes_ahead(commands)
        stop = False
        here, i = self.ports.here, 0
        ahead: Ahead | None = None  # the write recorded ahead (or to be, as a step before it is sent), to its turn
        try:
            while i < len(commands):
                command, path = commands[i], paths[i]
                if not stop and self.ports.clock.now() >= self.deadline:
                    self.timed_out = stop = True
                if not stop and here is not None \
                        and here_target(self, here, command, path, lookup_in(scope, i), tab, owner) is not None:
                    hand, ahead = Hand(ahead), None
                    ran, stop = self._here(here, steps_here(self, here, commands, paths, scope, writes, i, owner,
                                                            tab, hand), hand)
                    ahead, i = hand.back(), i + ran
                    continue
                ahead, intent = at_turn(ahead, path)
                if stop and intent is not None:
                    self.withdraw(intent)
                elif stop:
                    self._leave(command, path, "the call stopped before this step")
                else:
                    new = None if ahead is not None else self.ahead(commands, paths, scope, i, writes[i], tab)
                    ahead = new or ahead
                    stop = self.stops(path, self._step(command, path, scope, i, owner, tab, intent, new))
                scope[i] = self.results.get(path)
                i += 1
        except BaseException:
            if ahead is not None and (intent := ahead.take()) is not None:  # recorded, never sent
                self.withdraw(intent)
            raise
        return worst([self._status(p) for p in paths])

    def _here(self, here: StepsHere, steps: Callable[[], Coroutine[Any, Any, tuple[int, bool]]],
              hand: Hand) -> tuple[int, bool]:
        """Run ``steps`` on the node's loop; when the wait for them gives up, the write recorded ahead that the loop
        did not take is withdrawn (here, on this thread: the loop runs nothing more of the list)."""
        try:
            return here.run(steps, self.deadline - self.ports.clock.now() + 2 * SETTLE)
        except BaseException:
            if (intent := hand.close()) is not None:
                self.withdraw(intent)
            raise

    def ahead(self, commands: tuple[Command, ...], paths: list[StepPath], scope: list[Result | None], running: int,
              write: int | None, tab: int | None) -> Ahead | None:
        """What records the write at ``write`` (``core.ahead.writes_ahead``) ahead while step ``running`` runs, if it
        may be (``core.ahead``)."""
        if write is None or not self.runs(paths[write]):
            return None
        prior = self.prior.records.get(paths[write]) if self.prior else None
        if prior is not None and prior.status == "ok":
            return None
        return ahead_of(self, commands[write], paths[write], running, lookup_in(scope, running), tab,
                        resumed=self.prior is not None)

    def withdraw(self, intent: Intent) -> None:
        """A write recorded ahead whose turn did not come: skipped, and its audit entry told it was not sent."""
        self.emit(StepSkipped(self.call, intent.path, "the call stopped before this step"))
        self.ports.audit.withdrawn(self.call, intent.path, intent.command, intent.tab)

    def runs(self, path: str) -> bool:
        """Whether the step at ``path`` is to be sent (not kept or observed from an earlier run)."""
        return self.plan.get(path, "run") == "run"

    def stops(self, path: str, kept: bool) -> bool:
        """Whether the list stops after the step at ``path`` (``kept``: from an earlier run): it was not ok, or
        warned and the call stops on warnings."""
        result = self.results.get(path)
        warned = isinstance(result, Ok) and result.warning is not None
        stop = self._status(path) != "ok" or (warned and self.spec.stop_on_warning and not kept)
        if stop:
            self.stopped = True
        return stop

    def _step(self, command: Command, path: StepPath, scope: list[Result | None], index: int,
              owner: StepPath | None, tab: int | None, intent: Intent | None = None,
              ahead: Ahead | None = None) -> bool:
        """Run (or keep) one step, with its write recorded ahead (``intent``) and what records the next
        step's (``ahead``); True when it was kept from an earlier run."""
        decision = self.plan.get(path, "run")
        if decision == "keep":
            self._keep(path)
            return True
        if decision == "applied":
            self._applied(command, path)
            return False
        if decision == "not_applied":
            self.emit(StepObserved(self.call, path, "not_applied"))
        lookup = lookup_in(scope, index)
        if isinstance(command, Sequence):
            self._sequence(command, path, lookup, owner, tab)
        elif isinstance(command, Parallel):
            self._parallel(command, path, tab)
        else:
            self._leaf(command, path, lookup, owner, tab, intent, ahead)
        return False

    def _keep(self, path: str) -> None:
        assert self.prior is not None
        self.emit(StepKept(self.call, path, self.prior.records[path].tab_id))
        self.results[path] = self.prior.results[path]

    def _applied(self, command: Command, path: str) -> None:
        assert self.prior is not None
        self.ports.audit.observed(self.call, path, command, self.prior.records[path].tab_id)
        self.emit(StepObserved(self.call, path, "applied"))
        approved = self.ports.approvals.take(self.call, path) if isinstance(command, NewTab) else None
        self.results[path] = Ok({**(approved or {}), "observed": "applied"})  # an approved newTab: its tab

    def _leave(self, command: Command, path: StepPath, reason: str) -> None:
        """A step the run did not reach: kept if it ran ok before, else skipped."""
        if isinstance(command, Sequence | Parallel):
            for child in children(command, path):
                self._leave(child.command, child.path, reason)
            self._close_container(command, path)
            return
        prior = self.prior.records.get(path) if self.prior else None
        if prior is not None and prior.status == "ok" and path in self.prior.results:  # type: ignore[union-attr]
            self._keep(path)
        elif self.plan.get(path) == "applied":
            self._applied(command, path)
        else:
            self.emit(StepSkipped(self.call, path, reason))

    def _refuse(self, command: Command, path: StepPath, failure: Failure) -> None:
        """A step of a refused sequence: kept if it ran ok before, else failed unsent."""
        if isinstance(command, Sequence | Parallel):
            for child in children(command, path):
                self._refuse(child.command, child.path, failure)
            self._close_container(command, path)
        elif self.plan.get(path) == "keep":
            self._keep(path)
        else:
            self.emit(StepFailed(self.call, path, failure.code, failure.error, failure.retryable))
            self.results[path] = failure

    def _close_container(self, command: Command, path: StepPath) -> None:
        """Set a sequence's or parallel's result from its steps' (its status is the fold's, from theirs)."""
        if isinstance(command, Parallel):
            nested: Any = [trimmed([self.results.get(path.child(q, i)) for i in range(len(seq))])
                           for q, seq in enumerate(command.sequences)]
            key = "sequences"
        else:
            nested = trimmed([self.results.get(child.path) for child in children(command, path)])
            key = "results"
        if self._status(path) == "ok":
            self.results[path] = Ok({key: nested})
            return
        failures = [r for p, _ in leaf_paths(command, path)
                    if self._status(p) != "ok" and isinstance(r := self.results.get(p), Failure)]
        first = failures[0] if failures else Failure("Steps were skipped", "skipped", True)
        self.results[path] = Failure(first.error, first.code, first.retryable, {key: nested})

    # containers

    def _sequence(self, command: Sequence, path: StepPath, lookup: Lookup, owner: StepPath | None,
                  tab: int | None) -> None:
        try:
            inner_tab = tab_of(command, lookup, tab)
        except KitsuneError as e:
            for child in children(command, path):
                self._refuse(child.command, child.path, Failure.of(e))
        else:
            self._run_list(command.steps, path, owner, inner_tab)
        self._close_container(command, path)

    def _parallel(self, command: Parallel, path: StepPath, tab: int | None) -> None:
        lanes = {path.child(q): seq for q, seq in enumerate(command.sequences)}
        active = [lane for lane, seq in lanes.items()
                  if any(self.plan.get(p, "run") != "keep" for p, _ in leaves(seq, lane))]
        refusals = check_sequences(self.ports, self.call, lanes, active, tab, self.plan, self.claims,
                                   self.prior.results if self.prior else {}, self.prior.claims if self.prior else {})
        runnable = [lane for lane in active if lane not in refusals]
        for lane, seq in lanes.items():
            for i, child in enumerate(seq):
                if lane in refusals:
                    self._refuse(child, lane.child(i), refusals[lane])
                elif lane not in runnable:
                    self._leave(child, lane.child(i), "nothing left to run")
        self.refused.update(refusals)
        meetings = {lane: barriers(lanes[lane], lane, self.plan) for lane in runnable}
        keys = {name: self._barrier_key(path, name) for names in meetings.values() for name, _ in names}
        for names in meetings.values():
            for name in {name for name, _ in names}:
                self.parties[keys[name]] = self.parties.get(keys[name], 0) + 1

        def job(lane: StepPath) -> Callable[[], None]:
            def run() -> None:
                self._run_list(lanes[lane], lane, lane, tab)
                for name, step in meetings[lane]:  # a barrier this sequence will not reach: release the others
                    if self._status(step) == "skipped":
                        self.ports.sequences.abort(keys[name])
            return run

        self.ports.sequences.run_all([job(lane) for lane in runnable])
        for key in keys.values():
            self.ports.sequences.discard(key)
        self._close_container(command, path)

    # one step

    def _leaf(self, command: Command, path: StepPath, lookup: Lookup, owner: StepPath | None,
              tab: int | None, intent: Intent | None, ahead: Ahead | None) -> None:
        begun = self.begin(command, path, lookup, owner, tab, ahead, intent)
        if begun is None:
            return
        step, resolved, target = begun
        try:
            outcome = step.perform(resolved, target, lookup, inner=False)
        except KitsuneError as e:  # a port answered with an error instead of an outcome
            failure = Failure.of(e)
            outcome = Unknown(failure) if step.dispatched else Failed(failure)
        self.finish(step, outcome)

    def begin(self, command: Command, path: StepPath, lookup: Lookup, owner: StepPath | None, tab: int | None,
              ahead: Ahead | None = None, intent: Intent | None = None, *,
              told_when_sent: bool = False) -> tuple[Step, Command, int | None] | None:
        """Start a step (with what records the next step's write ``ahead``): its references resolved, its
        ``StepStarted`` and its audit entry on its way (a write's driver waits for it before it sends it:
        ``Step.dispatch``), or all that made ahead (``intent``: sent with those records); None when it ended already
        (failed). ``told_when_sent`` (a read on the loop): its ``StepStarted`` and audit entry once its request is
        out, while the browser works (``Step.sent``), or with its outcome if that comes first."""
        if intent is not None:
            step = Step(self, path, owner, secret_values(command) + secret_values(intent.command), ahead)
            self.emit(StepStarted(self.call, path, command.action, intent.tab))
            step.intent = intent.recorded
            return step, intent.command, intent.tab
        step = Step(self, path, owner, secret_values(command), ahead)
        target: int | None = None
        try:
            target = tab_of(command, lookup, tab)
            resolved = resolve_command(command, lookup)
        except KitsuneError as e:
            self.emit(StepStarted(self.call, path, command.action, target))
            self.finish(step, Failed(Failure.of(e)))
            return None
        if resolved is not command:  # its references' values may be secrets too
            step.secrets += secret_values(resolved)
        if told_when_sent:
            step.untold = lambda: self._started(step, resolved, target)
            return step, resolved, target
        try:
            self._started(step, resolved, target)
        except KitsuneError as e:
            self.finish(step, Failed(Failure.of(e)))
            return None
        return step, resolved, target

    def _started(self, step: Step, command: Command, target: int | None) -> None:
        """Tell that a step starts: its ``StepStarted``, its audit entry on its way."""
        self.emit(StepStarted(self.call, step.path, command.action, target))
        step.audit = self.ports.audit.step(self.call, step.path, command, target, resumed=self.prior is not None)

    def finish(self, step: Step, outcome: Outcome) -> None:
        """Tell a step's outcome: its event, its result (after its ``StepStarted``, if that was left until it was
        sent and it never was)."""
        step.tell_started()
        path = step.path
        if isinstance(outcome, Done):
            warning = outcome.warning or step.warning
            self.emit(StepSucceeded(self.call, path, warning))
            self.results[path] = Ok(outcome.value, warning)
            return
        failure = scrub(outcome.failure, step.secrets)
        if isinstance(outcome, Failed):
            self.emit(StepFailed(self.call, path, failure.code, failure.error, failure.retryable))
        elif isinstance(outcome, Unknown):
            self.emit(StepOutcomeUnknown(self.call, path, failure.code, failure.error))
        else:
            self.emit(StepHeld(self.call, path, failure.code, failure.error))
        self.results[path] = failure

    def send(self, command: Command, tab: int | None, recorded: tuple[Recorded, ...] = ()) -> Outcome:
        """Send an action to the driver once ``recorded`` are made, within its own timeout (the
        records' wait included) and the container's deadline."""
        step_timeout, remaining = self.budget(command)
        return self.late(self.ports.driver.execute(command, tab, min(step_timeout, remaining), recorded), step_timeout,
                         remaining)

    def budget(self, command: Command) -> tuple[float, float]:
        """The step's own timeout (seconds) and what is left of the container's."""
        step_timeout = command.timeout if isinstance(command.timeout, float) else self.config.step_timeout
        return step_timeout, self.deadline - self.ports.clock.now()

    def late(self, outcome: Outcome, step_timeout: float, remaining: float) -> Outcome:
        """``outcome``, or the container's timeout when its deadline cut the step short (unknown only if sent)."""
        if not isinstance(outcome, Done) and self.ports.clock.now() >= self.deadline and remaining < step_timeout:
            self.timed_out = True
            return deadline_outcome(self.timeout, isinstance(outcome, Unknown))
        return outcome

    def claim(self, tab: int, owner: StepPath | None) -> Failure | None:
        """Claim ``tab`` for the sequence ``owner`` (or, outside a parallel, check no sequence holds it)."""
        if owner is None:
            return self.ports.claims.check_write(self.call, tab)
        conflict = self.ports.claims.claim(self.call, owner, tab)
        if conflict is None:
            self.claims.setdefault(owner, set()).add(tab)
        return conflict

    def _barrier_key(self, parallel: str, name: str) -> str:
        """Where the sequences of one parallel meet, unique to this run."""
        return f"{self.call}.{self.prior.attempt if self.prior else 0}:{parallel}:{name}"

    def barrier(self, command: SyncBarrier, owner: StepPath | None) -> Outcome:
        """Wait at a ``syncBarrier`` until every sequence of the parallel that meets there arrived."""
        key = self._barrier_key(owner.parent if owner else ROOT, command.barrier)
        timeout = command.timeout if isinstance(command.timeout, float) else self.config.step_timeout
        timeout = min(timeout, max(0.0, self.deadline - self.ports.clock.now()))
        if self.ports.sequences.barrier(key, self.parties.get(key, 1), timeout):
            return Done({"barrier": command.barrier})
        return Failed(Failure(f"Barrier {command.barrier!r}: not every sequence arrived", "barrier_timeout", True))


def run_call(call: int, spec: CallSpec, ports: Ports, sink: EventSinkPort, *,
             config: EngineConfig = EngineConfig(), prior: Prior | None = None,
             timeout: float | None = None) -> RunReport:
    """Run a call (or, with ``prior``, resume it) to its end and report it.

    ``sink`` receives every event as it happens (the event stream) and may answer a wait for
    the event to be stored, which the engine calls before going on; ``timeout`` (seconds)
    overrides the call's own container timeout (a resume's is fixed at 300 s).
    """
    return _Run(call, spec, ports, sink, config, prior, spec.timeout if timeout is None else timeout).execute()
