"""The step engine: runs a call's commands against a driver and tells it as events.

Pure core: the driver, clock, tab claims and the runner of parallel sequences are ports
(``Protocol``s); the actors of ``actors/`` and the Playwright driver of ``bridge/`` plug in,
unit tests use fakes. A write records ``StepDispatched`` before it is sent. The report's
progress, status and summary are the fold of the events the run emitted.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Literal, Protocol

from core.claims import TabClaims
from messages.commands import (
    Broadcast,
    CallSpec,
    Command,
    If,
    Js,
    NewTab,
    Parallel,
    Retry,
    Sequence,
    SyncBarrier,
    Try,
    While,
    children,
    is_write,
    resolve_command,
    secret_values,
)
from messages.contract import STEP_TIMEOUT
from messages.errors import KitsuneError
from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
    EndReason,
    Event,
    OutlineStep,
    StepDispatched,
    StepFailed,
    StepHeld,
    StepKept,
    StepObserved,
    StepOutcomeUnknown,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from messages.references import Ref
from messages.results import (
    Done,
    Failed,
    Failure,
    HeldForApproval,
    Ok,
    Outcome,
    Result,
    Status,
    Unknown,
    result_to_json,
    worst,
)
from messages.steplog import StepLog, StepLogBuilder, StepRecord

__all__ = [
    "NO_AUDIT", "Clock", "Decision", "Driver", "EngineConfig", "EventSinkPort", "Ports", "Prior", "RunReport",
    "Sequences", "StepAudit", "SystemClock", "ThreadedSequences", "leaf_paths", "outline_of", "run_call",
]

log = logging.getLogger(__name__)

Decision = Literal["keep", "run", "applied", "not_applied"]
"""What a resume does with a step: reuse it, send it, mark it ok unsent, or send it after observation."""


# --- ports ---------------------------------------------------------------------------------


class Driver(Protocol):
    """Runs one action in one tab; answers within ``timeout`` seconds."""

    def execute(self, command: Command, tab_id: int | None, timeout: float) -> Outcome:
        """Run an action (never a block) whose references are resolved."""

    def list_tabs(self) -> frozenset[int]:
        """Ids of the open tabs; raises :class:`KitsuneError` when they cannot be listed."""


class Clock(Protocol):
    """Monotonic time, injectable for tests."""

    def now(self) -> float: ...

    def sleep(self, seconds: float) -> None: ...


class SystemClock:
    """The real monotonic clock."""

    def now(self) -> float:
        return time.monotonic()

    def sleep(self, seconds: float) -> None:
        time.sleep(seconds)


class Sequences(Protocol):
    """Runs the sequences of a parallel, and their ``syncBarrier`` meetings."""

    def run_all(self, jobs: list[Callable[[], None]]) -> None:
        """Run every job (concurrently where it can) and return when all have ended."""

    def barrier(self, key: str, parties: int, timeout: float) -> bool:
        """Wait until ``parties`` sequences reached ``key``; False on timeout or abort."""

    def abort(self, key: str) -> None:
        """Release everyone waiting at ``key`` with a failure (a party will not come)."""

    def discard(self, key: str) -> None:
        """Forget ``key``: every sequence that meets there has ended."""


class ThreadedSequences:
    """Sequences on threads of this process; the actor runtime uses sequence actors instead."""

    def __init__(self) -> None:
        self._barriers: dict[str, threading.Barrier] = {}
        self._lock = threading.Lock()

    def run_all(self, jobs: list[Callable[[], None]]) -> None:
        errors: list[BaseException] = []

        def run(job: Callable[[], None]) -> None:
            try:
                job()
            except BaseException as e:  # re-raised on the caller's thread below
                errors.append(e)

        threads = [threading.Thread(target=run, args=(job,), name="kitsune-sequence") for job in jobs]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        if errors:
            raise errors[0]

    def _get(self, key: str, parties: int) -> threading.Barrier:
        with self._lock:
            return self._barriers.setdefault(key, threading.Barrier(parties))

    def barrier(self, key: str, parties: int, timeout: float) -> bool:
        try:
            self._get(key, parties).wait(timeout)
        except threading.BrokenBarrierError:
            return False
        return True

    def abort(self, key: str) -> None:
        self._get(key, 1).abort()

    def discard(self, key: str) -> None:
        with self._lock:
            self._barriers.pop(key, None)


class StepAudit(Protocol):
    """Where a run records its steps before it sends them (the audit log)."""

    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        """Start recording a step about to be sent.

        Answers a wait that returns once the entry is written and raises :class:`KitsuneError`
        when it cannot be (or None when it is written already); the engine waits on it only
        before sending a write, so the entry is written meanwhile.
        """

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        """Record a step the caller reported ``applied``: marked ok, not sent."""


class _NoAudit:
    def step(self, call: int, path: str, command: Command, tab_id: int | None, *,
             resumed: bool) -> Callable[[], None] | None:
        return None

    def observed(self, call: int, path: str, command: Command, tab_id: int | None) -> None:
        return None


NO_AUDIT: StepAudit = _NoAudit()


EventSinkPort = Callable[[Event], Callable[[], None] | None]
"""Where a run's events go: answers None, or a wait that returns once the event is stored."""


@dataclass(frozen=True, slots=True)
class Ports:
    """Everything a run talks to."""

    driver: Driver
    clock: Clock
    claims: TabClaims
    sequences: Sequences
    audit: StepAudit = NO_AUDIT




@dataclass(frozen=True, slots=True)
class EngineConfig:
    """Engine settings."""

    step_timeout: float = STEP_TIMEOUT
    """Seconds a command may take when it gives no ``timeout``."""


@dataclass(frozen=True, slots=True)
class Prior:
    """What a resume starts from: the checkpoint's records and results, and the plan."""

    records: Mapping[str, StepRecord]
    results: Mapping[str, Result]
    plan: Mapping[str, Decision]
    claims: Mapping[str, frozenset[int]]
    attempt: int


@dataclass(frozen=True, slots=True)
class RunReport:
    """What a run did: the step log (the fold of its events), results and claims."""

    log: StepLog
    results: Mapping[str, Result]
    """Every step's result by path (containers included); steps that never ran have none."""
    claims: Mapping[str, frozenset[int]]
    """The tabs each parallel sequence claimed, by sequence path."""
    refused: frozenset[str]
    """Sequences refused before they started (tab_closed, tab_owned, tab_claimed)."""

    def results_json(self) -> list[dict[str, Any] | None]:
        """Top-level results; trailing steps that never ran are left out, others are null."""
        out = [result_to_json(self.results.get(str(i))) for i in range(len(self.log.steps))]
        while out and out[-1] is None:
            out.pop()
        return out

    def to_json(self) -> dict[str, Any]:
        """``results``, ``progress``, ``status`` and ``summary`` (spec: Checkpoints)."""
        return {"results": self.results_json(), "progress": self.log.progress, "status": self.log.status,
                "summary": self.log.summary}


# --- outline and paths ---------------------------------------------------------------------


def outline_of(command: Command, tab: int | None) -> OutlineStep:
    """The step's shape for ``progress``, with the tab it acts on when known before it runs."""
    own = command.tab_id if isinstance(command.tab_id, int) else None
    if isinstance(command, Sequence):
        inner = own if own is not None else (None if isinstance(command.tab_id, Ref) else tab)
        return OutlineStep("sequence", own, steps=tuple(outline_of(c, inner) for c in command.steps))
    if isinstance(command, Parallel):
        return OutlineStep("parallel", None, sequences=tuple(
            tuple(outline_of(c, tab) for c in seq) for seq in command.sequences))
    if own is None and command.acts_on_tab and command.tab_id is None:
        own = tab
    return OutlineStep(command.action, own)


def leaf_paths(command: Command, path: str) -> list[tuple[str, Command]]:
    """The steps resumed one by one under ``command``: itself, or a container's steps."""
    if isinstance(command, Sequence):
        return [leaf for i, c in enumerate(command.steps) for leaf in leaf_paths(c, f"{path}.{i}")]
    if isinstance(command, Parallel):
        return [leaf for q, seq in enumerate(command.sequences) for i, c in enumerate(seq)
                for leaf in leaf_paths(c, f"{path}.{q}.{i}")]
    return [(path, command)]


def _lookup(scope: list[Result | None]) -> Callable[[int], Any]:
    def result_of(step: int) -> Any:
        return result_to_json(scope[step]) if step < len(scope) else None
    return result_of


def _scrub(failure: Failure, secrets: list[str]) -> Failure:
    """The failure with every typed value and JavaScript body cut out of its message and state."""
    cuts = sorted({secret for secret in secrets if len(secret) >= 3}, key=len, reverse=True)
    if not cuts:
        return failure

    def clean(value: Any) -> Any:
        if isinstance(value, str):
            for secret in cuts:
                value = value.replace(secret, "[redacted]")
            return value
        if isinstance(value, Mapping):
            return {key: clean(item) for key, item in value.items()}
        if isinstance(value, list | tuple):
            return [clean(item) for item in value]
        return value

    return Failure(clean(failure.error), failure.code, failure.retryable,
                   None if failure.state is None else clean(failure.state))


# --- the run -------------------------------------------------------------------------------


class _Run:
    """One run of a call: its first run, or one resume."""

    def __init__(self, call: int, spec: CallSpec, ports: Ports, sink: EventSinkPort,
                 config: EngineConfig, prior: Prior | None, deadline: float) -> None:
        self.call, self.spec, self.ports, self.sink, self.config, self.prior = call, spec, ports, sink, config, prior
        self.timeout = deadline
        self.deadline = ports.clock.now() + deadline
        self.plan: Mapping[str, Decision] = prior.plan if prior else {}
        self.builder = StepLogBuilder()
        self.lock = threading.Lock()
        self.results: dict[str, Result] = {}
        self.status: dict[str, Status] = {}
        self.claims: dict[str, set[int]] = {}
        self.refused: set[str] = set()
        self.dispatched: set[str] = set()
        self.wrote: set[str] = set()
        self.parties: dict[str, int] = {}
        self.audits: dict[str, Callable[[], None]] = {}
        """Audit entries being written, by step: a write waits for its own before it is sent."""
        self.secrets: dict[str, list[str]] = {}
        """Typed values and JavaScript bodies of each step, nested commands' included."""
        self.warnings: dict[str, str] = {}
        """The first warning of a command inside each one-step block."""
        self.timed_out = self.stopped = False

    # events

    def emit(self, event: Event) -> None:
        """Fold ``event`` in and hand it to the sink; an event the sink loses is logged, the run goes on."""
        try:
            stored = self._hand_over(event)
            if stored is not None:  # waited for outside the lock: other sequences go on meanwhile
                stored()
        except Exception as e:
            log.error("event of call %s not recorded (%s)", self.call, type(e).__name__)

    def _hand_over(self, event: Event) -> Callable[[], None] | None:
        """Fold ``event`` in and queue it in the sink; the sink's wait until it is stored, if any."""
        with self.lock:  # events reach the fold and the sink in one order
            self.builder.apply(event)
            return self.sink(event)

    def _dispatch(self, path: str) -> None:
        """Record a write before it is sent: its ``StepDispatched`` stored and its audit entry written,
        both on their way at once. Raises :class:`KitsuneError` if either cannot be: nothing is sent."""
        try:
            stored = self._hand_over(StepDispatched(self.call, path))
        except Exception as e:
            raise _not_recorded() from e
        self._audited(path)
        try:
            if stored is not None:
                stored()
        except Exception as e:
            raise _not_recorded() from e
        self.dispatched.add(path)

    def execute(self) -> RunReport:
        outline = tuple(outline_of(c, self.spec.default_tab) for c in self.spec.commands)
        if self.prior is None:
            self.emit(CallStarted(self.call, self.spec.kind, outline, self.timeout))
        else:
            self.emit(CallResumed(self.call, self.spec.kind, outline, self.timeout, self.prior.attempt))
        reason: EndReason
        try:
            status = self._run_list(self.spec.commands, [str(i) for i in range(len(self.spec.commands))],
                                    None, self.spec.default_tab)
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

    def _run_list(self, commands: tuple[Command, ...], paths: list[str], owner: str | None,
                  tab: int | None) -> Status:
        scope: list[Result | None] = [None] * len(commands)
        stop = False
        for i, (command, path) in enumerate(zip(commands, paths, strict=True)):
            if not stop and self.ports.clock.now() >= self.deadline:
                self.timed_out = stop = True
            if stop:
                self._leave(command, path, "the call stopped before this step")
            else:
                kept = self._step(command, path, scope, i, owner, tab)
                result = self.results.get(path)
                warned = isinstance(result, Ok) and result.warning is not None
                if self.status[path] != "ok" or (warned and self.spec.stop_on_warning and not kept):
                    stop = self.stopped = True
            scope[i] = self.results.get(path)
        return worst([self.status[p] for p in paths])

    def _step(self, command: Command, path: str, scope: list[Result | None], index: int,
              owner: str | None, tab: int | None) -> bool:
        """Run (or keep) one step; True when it was kept from an earlier run."""
        decision = self.plan.get(path, "run")
        if decision == "keep":
            self._keep(path)
            return True
        if decision == "applied":
            self._applied(command, path)
            return False
        if decision == "not_applied":
            self.emit(StepObserved(self.call, path, "not_applied"))
        lookup = _lookup(scope[:index])
        if isinstance(command, Sequence):
            self._sequence(command, path, lookup, owner, tab)
        elif isinstance(command, Parallel):
            self._parallel(command, path, tab)
        else:
            self._leaf(command, path, lookup, owner, tab)
        return False

    def _keep(self, path: str) -> None:
        assert self.prior is not None
        self.emit(StepKept(self.call, path, self.prior.records[path].tab_id))
        self.results[path] = self.prior.results[path]
        self.status[path] = "ok"

    def _applied(self, command: Command, path: str) -> None:
        assert self.prior is not None
        self.ports.audit.observed(self.call, path, command, self.prior.records[path].tab_id)
        self.emit(StepObserved(self.call, path, "applied"))
        self.results[path] = Ok({"observed": "applied"})
        self.status[path] = "ok"

    def _leave(self, command: Command, path: str, reason: str) -> None:
        """A step the run did not reach: kept if it ran ok before, else skipped."""
        if isinstance(command, Sequence | Parallel):
            inner = _direct_children(command, path)
            for p, child in inner:
                self._leave(child, p, reason)
            self._close_container(command, path, [p for p, _ in inner])
            return
        prior = self.prior.records.get(path) if self.prior else None
        if prior is not None and prior.status == "ok" and path in self.prior.results:  # type: ignore[union-attr]
            self._keep(path)
        elif self.plan.get(path) == "applied":
            self._applied(command, path)
        else:
            self.emit(StepSkipped(self.call, path, reason))
            self.status[path] = "skipped"

    def _close_container(self, command: Command, path: str, child_paths: list[str]) -> None:
        """Set a sequence's or parallel's status and result from its steps'."""
        self.status[path] = worst([self.status[p] for p in child_paths])
        if isinstance(command, Parallel):
            nested: Any = [_trimmed([self.results.get(f"{path}.{q}.{i}") for i in range(len(seq))])
                           for q, seq in enumerate(command.sequences)]
            key = "sequences"
        else:
            nested = _trimmed([self.results.get(p) for p in child_paths])
            key = "results"
        if self.status[path] == "ok":
            self.results[path] = Ok({key: nested})
            return
        failures = [r for p, _ in leaf_paths(command, path)
                    if self.status[p] != "ok" and isinstance(r := self.results.get(p), Failure)]
        first = failures[0] if failures else Failure("Steps were skipped", "skipped", True)
        self.results[path] = Failure(first.error, first.code, first.retryable, {key: nested})

    # containers

    def _sequence(self, command: Sequence, path: str, lookup: Callable[[int], Any], owner: str | None,
                  tab: int | None) -> None:
        try:
            inner_tab = self._tab_of(command, lookup, tab)
        except KitsuneError as e:
            for i, child in enumerate(command.steps):
                self._refuse(child, f"{path}.{i}", Failure.of(e))
            self._close_container(command, path, [f"{path}.{i}" for i in range(len(command.steps))])
            return
        paths = [f"{path}.{i}" for i in range(len(command.steps))]
        self._run_list(command.steps, paths, owner, inner_tab)
        self._close_container(command, path, paths)

    def _parallel(self, command: Parallel, path: str, tab: int | None) -> None:
        sequences = list(enumerate(command.sequences))
        active = [q for q, seq in sequences
                  if any(self.plan.get(p, "run") != "keep" for i, c in enumerate(seq)
                         for p, _ in leaf_paths(c, f"{path}.{q}.{i}"))]
        refusals = self._check_sequences(command, path, active, tab)
        runnable = [q for q in active if q not in refusals]
        for q, seq in sequences:
            paths = [f"{path}.{q}.{i}" for i in range(len(seq))]
            if q in refusals:
                self.refused.add(f"{path}.{q}")
                for child, p in zip(seq, paths, strict=True):
                    self._refuse(child, p, refusals[q])
            elif q not in runnable:
                for child, p in zip(seq, paths, strict=True):
                    self._leave(child, p, "nothing left to run")
        meetings = {q: _barriers(command.sequences[q], f"{path}.{q}", self.plan) for q in runnable}
        keys = {name: self._barrier_key(path, name) for names in meetings.values() for name, _ in names}
        for names in meetings.values():
            for name in {name for name, _ in names}:
                self.parties[keys[name]] = self.parties.get(keys[name], 0) + 1

        def job(q: int) -> Callable[[], None]:
            def run() -> None:
                seq = command.sequences[q]
                self._run_list(seq, [f"{path}.{q}.{i}" for i in range(len(seq))], f"{path}.{q}", tab)
                for name, step in meetings[q]:  # a barrier this sequence will not reach: release the others
                    if self.status.get(step) == "skipped":
                        self.ports.sequences.abort(keys[name])
            return run

        self.ports.sequences.run_all([job(q) for q in runnable])
        for key in keys.values():
            self.ports.sequences.discard(key)
        self._close_container(command, path, [f"{path}.{q}.{i}" for q, seq in sequences for i in range(len(seq))])

    def _refuse(self, command: Command, path: str, failure: Failure) -> None:
        """A step of a refused sequence: kept if it ran ok before, else failed unsent."""
        if isinstance(command, Sequence | Parallel):
            inner = _direct_children(command, path)
            for p, child in inner:
                self._refuse(child, p, failure)
            self._close_container(command, path, [p for p, _ in inner])
        elif self.plan.get(path) == "keep":
            self._keep(path)
        else:
            self.emit(StepFailed(self.call, path, failure.code, failure.error, failure.retryable))
            self.results[path] = failure
            self.status[path] = "failed"

    def _check_sequences(self, command: Parallel, path: str, active: list[int],
                         tab: int | None) -> dict[int, Failure]:
        """Refuse sequences before they start: tab_closed, tab_owned, tab_claimed (spec: Parallel)."""
        if not active:
            return {}
        try:
            open_tabs = self.ports.driver.list_tabs()
        except KitsuneError as e:
            return {q: Failure.of(e) for q in active}
        refusals: dict[int, Failure] = {}
        for q in active:
            owner = f"{path}.{q}"
            seq = command.sequences[q]
            reads, writes = self._tabs_needed(seq, [f"{owner}.{i}" for i in range(len(seq))], tab)
            closed = sorted((reads | writes) - open_tabs)
            if closed:
                refusals[q] = Failure(f"Tab {closed[0]} is closed; a closed tab is never replaced", "tab_closed",
                                      False, {"tabId": closed[0]})
                continue
            earlier = self.prior.claims.get(owner, frozenset()) if self.prior else frozenset()
            for t in sorted(writes | (earlier & open_tabs)):
                conflict = self.ports.claims.claim(self.call, owner, t)
                if conflict is not None:
                    self.ports.claims.release(self.call, owner)
                    self.claims.pop(owner, None)
                    refusals[q] = conflict
                    break
                self.claims.setdefault(owner, set()).add(t)
        return refusals

    def _tabs_needed(self, steps: tuple[Command, ...], paths: list[str], tab: int | None) -> tuple[set[int], set[int]]:
        """Tabs the remaining steps act on, known before they run: (read, written)."""
        reads: set[int] = set()
        writes: set[int] = set()
        scope: list[Result | None] = [
            self.prior.results.get(p) if self.prior and self.plan.get(p) == "keep" else None for p in paths
        ]
        for command, path in zip(steps, paths, strict=True):
            if all(self.plan.get(p, "run") in ("keep", "applied") for p, _ in leaf_paths(command, path)):
                continue
            for target, writing in _targets(command, _lookup(scope), tab):
                (writes if writing else reads).add(target)
        return reads, writes

    # one step

    def _leaf(self, command: Command, path: str, lookup: Callable[[int], Any], owner: str | None,
              tab: int | None) -> None:
        self.secrets[path] = secret_values(command)
        try:
            target = self._tab_of(command, lookup, tab)
        except KitsuneError as e:
            self.emit(StepStarted(self.call, path, command.action, None))
            self._finish(path, Failed(Failure.of(e)))
            return
        self.emit(StepStarted(self.call, path, command.action, target))
        try:
            resolved = resolve_command(command, lookup)
        except KitsuneError as e:
            self._finish(path, Failed(Failure.of(e)))
            return
        self.secrets[path] += secret_values(resolved)
        try:
            self._audit(resolved, path, target)
            outcome = self._perform(resolved, target, path, lookup, owner, inner=False)
        except KitsuneError as e:  # a port answered with an error instead of an outcome
            failure = Failure.of(e)
            outcome = Unknown(failure) if path in self.dispatched else Failed(failure)
        self._finish(path, outcome)

    def _audit(self, command: Command, path: str, tab: int | None) -> None:
        """Start recording the step; a write waits for its entry before it is sent (:meth:`_audited`)."""
        written = self.ports.audit.step(self.call, path, command, tab, resumed=self.prior is not None)
        if written is not None:
            self.audits[path] = written

    def _audited(self, path: str) -> None:
        """Wait until the step's audit entry is written: a write that cannot be recorded is not sent."""
        written = self.audits.pop(path, None)
        if written is not None:
            written()

    def _finish(self, path: str, outcome: Outcome) -> None:
        if isinstance(outcome, Done):
            warning = outcome.warning or self.warnings.get(path)
            self.emit(StepSucceeded(self.call, path, warning))
            self.results[path] = Ok(outcome.value, warning)
            self.status[path] = "ok"
            return
        failure = _scrub(outcome.failure, self.secrets.get(path, []))
        if isinstance(outcome, Failed):
            self.emit(StepFailed(self.call, path, failure.code, failure.error, failure.retryable))
            self.status[path] = "failed"
        elif isinstance(outcome, Unknown):
            self.emit(StepOutcomeUnknown(self.call, path, failure.code, failure.error))
            self.status[path] = "unknown"
        else:
            self.emit(StepHeld(self.call, path, failure.code, failure.error))
            self.status[path] = "held"
        self.results[path] = failure

    def _tab_of(self, command: Command, lookup: Callable[[int], Any], tab: int | None) -> int | None:
        if command.tab_id is None:
            return tab if command.acts_on_tab or isinstance(command, Sequence) else None
        value = resolve_command(command, lookup).tab_id if isinstance(command.tab_id, Ref) else command.tab_id
        assert value is None or isinstance(value, int)
        return value

    def _perform(self, command: Command, tab: int | None, path: str, lookup: Callable[[int], Any],
                 owner: str | None, *, inner: bool) -> Outcome:
        """Run an action or a one-step block; everything it sends is under ``path``."""
        if isinstance(command, If):
            return self._if(command, tab, path, lookup, owner)
        if isinstance(command, While):
            return self._while(command, tab, path, lookup, owner)
        if isinstance(command, Try):
            return self._try(command, tab, path, lookup, owner)
        if isinstance(command, Retry):
            return self._retry(command, tab, path, lookup, owner)
        if isinstance(command, Broadcast):
            return self._broadcast(command, path, lookup, owner)
        if isinstance(command, Sequence):
            return self._inline_sequence(command, tab, path, owner)
        return self._action(command, tab, path, owner, inner=inner)

    def _action(self, command: Command, tab: int | None, path: str, owner: str | None, *, inner: bool) -> Outcome:
        writes = is_write(command)
        if writes and tab is not None and command.acts_on_tab:
            conflict = self._claim(tab, owner)
            if conflict is not None:
                return Failed(conflict)
        if self.ports.clock.now() >= self.deadline:
            self.timed_out = True
            return _deadline_outcome(self.timeout, path in self.dispatched)
        if writes and path not in self.dispatched:
            self._dispatch(path)
        outcome = self._barrier(command, owner) if isinstance(command, SyncBarrier) else self._send(command, tab)
        if isinstance(outcome, Done):
            if inner and outcome.warning is not None:
                self.warnings.setdefault(path, outcome.warning)
            if inner and writes and path not in self.wrote:
                self.wrote.add(path)
                self.emit(BlockWriteSucceeded(self.call, path))
            new_tab = outcome.value.get("tabId")
            if isinstance(command, NewTab) and owner is not None and isinstance(new_tab, int):
                self._claim(new_tab, owner)
        return outcome

    def _send(self, command: Command, tab: int | None) -> Outcome:
        step_timeout = command.timeout if isinstance(command.timeout, float) else self.config.step_timeout
        remaining = self.deadline - self.ports.clock.now()
        outcome = self.ports.driver.execute(command, tab, min(step_timeout, remaining))
        if not isinstance(outcome, Done) and self.ports.clock.now() >= self.deadline and remaining < step_timeout:
            self.timed_out = True  # the container's deadline cut it short: unknown only if it was sent
            return _deadline_outcome(self.timeout, isinstance(outcome, Unknown))
        return outcome

    def _claim(self, tab: int, owner: str | None) -> Failure | None:
        if owner is None:
            return self.ports.claims.check_write(self.call, tab)
        conflict = self.ports.claims.claim(self.call, owner, tab)
        if conflict is None:
            self.claims.setdefault(owner, set()).add(tab)
        return conflict

    def _barrier_key(self, parallel: str, name: str) -> str:
        """Where the sequences of one parallel meet, unique to this run."""
        return f"{self.call}.{self.prior.attempt if self.prior else 0}:{parallel}:{name}"

    def _barrier(self, command: SyncBarrier, owner: str | None) -> Outcome:
        key = self._barrier_key(owner.rsplit(".", 1)[0] if owner else "", command.barrier)
        timeout = command.timeout if isinstance(command.timeout, float) else self.config.step_timeout
        timeout = min(timeout, max(0.0, self.deadline - self.ports.clock.now()))
        if self.ports.sequences.barrier(key, self.parties.get(key, 1), timeout):
            return Done({"barrier": command.barrier})
        return Failed(Failure(f"Barrier {command.barrier!r}: not every sequence arrived", "barrier_timeout", True))

    # one-step blocks

    def _inner(self, commands: tuple[Command, ...], tab: int | None, path: str, lookup: Callable[[int], Any],
               owner: str | None) -> tuple[Outcome, list[dict[str, Any] | None]]:
        """Run the commands inside a block in order, stopping at the first that is not done."""
        results: list[dict[str, Any] | None] = []
        for command in commands:
            try:
                resolved = resolve_command(command, lookup)
                self.secrets[path] += secret_values(resolved)
                target = self._tab_of(resolved, lookup, tab)
                outcome = self._perform(resolved, target, path, lookup, owner, inner=True)
            except KitsuneError as e:
                outcome = Failed(Failure.of(e))
            if not isinstance(outcome, Done):
                outcome = type(outcome)(_scrub(outcome.failure, self.secrets[path]))
            results.append(_outcome_json(outcome))
            if not isinstance(outcome, Done):
                return outcome, results
        return Done({"results": results}), results

    def _inline_sequence(self, command: Sequence, tab: int | None, path: str, owner: str | None) -> Outcome:
        scope: list[Result | None] = []
        for step in command.steps:
            outcome, _ = self._inner((step,), tab, path, _lookup(scope), owner)
            scope.append(Ok(outcome.value, outcome.warning) if isinstance(outcome, Done) else outcome.failure)
            if not isinstance(outcome, Done):
                return outcome
        return Done({"results": [result_to_json(r) for r in scope]})

    def _condition(self, code: str, tab: int | None, path: str, owner: str | None) -> Outcome:
        return self._action(Js(code=code, tab_id=tab), tab, path, owner, inner=True)

    def _if(self, command: If, tab: int | None, path: str, lookup: Callable[[int], Any],
            owner: str | None) -> Outcome:
        assert isinstance(command.condition, str)
        condition = self._condition(command.condition, tab, path, owner)
        if not isinstance(condition, Done):
            return condition
        branch = "then" if condition.value.get("value") else "else"
        outcome, results = self._inner(command.then if branch == "then" else command.otherwise, tab, path,
                                       lookup, owner)
        return Done({"branch": branch, "results": results}) if isinstance(outcome, Done) else outcome

    def _while(self, command: While, tab: int | None, path: str, lookup: Callable[[int], Any],
               owner: str | None) -> Outcome:
        assert isinstance(command.condition, str)
        for iteration in range(command.max_iterations + 1):
            condition = self._condition(command.condition, tab, path, owner)
            if not isinstance(condition, Done):
                return condition
            if not condition.value.get("value"):
                return Done({"iterations": iteration})
            if iteration == command.max_iterations:
                break
            outcome, _ = self._inner(command.body, tab, path, lookup, owner)
            if not isinstance(outcome, Done):
                return outcome
        return Failed(Failure(f"while reached maxIterations ({command.max_iterations})", "max_iterations", False))

    def _try(self, command: Try, tab: int | None, path: str, lookup: Callable[[int], Any],
             owner: str | None) -> Outcome:
        outcome, results = self._inner(command.body, tab, path, lookup, owner)
        if not isinstance(outcome, Failed) or not command.catch:
            return outcome
        caught, catch_results = self._inner(command.catch, tab, path, lookup, owner)
        if isinstance(caught, Done):
            return Done({"caught": outcome.failure.to_json(), "results": results, "catch": catch_results})
        return caught

    def _retry(self, command: Retry, tab: int | None, path: str, lookup: Callable[[int], Any],
               owner: str | None) -> Outcome:
        delay = command.delay if isinstance(command.delay, float) else 0.0
        outcome: Outcome = Failed(Failure("retry made no attempt", "internal", False))
        for attempt in range(1, command.attempts + 1):
            sent_before = path in self.dispatched
            outcome, results = self._inner(command.body, tab, path, lookup, owner)
            if isinstance(outcome, Done):
                return Done({"attempts": attempt, "results": results})
            sent = path in self.dispatched and not sent_before
            if not isinstance(outcome, Failed) or not (outcome.failure.retryable or not sent):
                return outcome
            if attempt < command.attempts:
                remaining = self.deadline - self.ports.clock.now()
                if remaining <= delay:
                    return outcome
                self.ports.clock.sleep(delay)
        return outcome

    def _broadcast(self, command: Broadcast, path: str, lookup: Callable[[int], Any], owner: str | None) -> Outcome:
        outcomes: list[Outcome] = []
        per_tab: list[dict[str, Any]] = []
        for target in command.tab_ids:
            assert isinstance(target, int)
            outcome, results = self._inner((command.command,), target, path, lookup, owner)
            outcomes.append(outcome)
            own = results[-1] if results else _outcome_json(outcome)  # the command's own result on this tab
            per_tab.append({"tabId": target, **(own or {})})
        for kind in (Unknown, HeldForApproval, Failed):
            failing = next((o for o in outcomes if isinstance(o, kind)), None)
            if failing is not None:
                assert not isinstance(failing, Done)
                f = failing.failure
                return type(failing)(Failure(f.error, f.code, f.retryable, {"results": per_tab}))
        return Done({"results": per_tab})


def _deadline_outcome(timeout: float, sent: bool) -> Outcome:
    failure = Failure(f"Container timed out after {timeout:g}s", "container_timeout", False)
    return Unknown(failure) if sent else Failed(failure)


def _outcome_json(outcome: Outcome) -> dict[str, Any] | None:
    if isinstance(outcome, Done):
        return Ok(outcome.value, outcome.warning).to_json()
    return outcome.failure.to_json()


def _trimmed(results: list[Result | None]) -> list[dict[str, Any] | None]:
    out = [result_to_json(r) for r in results]
    while out and out[-1] is None:
        out.pop()
    return out


def _direct_children(command: Command, path: str) -> list[tuple[str, Command]]:
    """The steps directly inside a sequence or parallel, with their paths."""
    if isinstance(command, Parallel):
        return [(f"{path}.{q}.{i}", c) for q, seq in enumerate(command.sequences) for i, c in enumerate(seq)]
    assert isinstance(command, Sequence)
    return [(f"{path}.{i}", c) for i, c in enumerate(command.steps)]


def _barriers(steps: tuple[Command, ...], prefix: str, plan: Mapping[str, Decision]) -> list[tuple[str, str]]:
    """(name, path) of the barriers a sequence will meet in this run."""
    found: list[tuple[str, str]] = []
    for i, command in enumerate(steps):
        path = f"{prefix}.{i}"
        if isinstance(command, SyncBarrier) and plan.get(path, "run") not in ("keep", "applied"):
            found.append((command.barrier, path))
        elif isinstance(command, Sequence):
            found += _barriers(command.steps, path, plan)
    return found


def _targets(command: Command, lookup: Callable[[int], Any], tab: int | None) -> list[tuple[int, bool]]:
    """(tab, writes) for each tab ``command`` and the commands inside it act on, where known now."""
    found: list[tuple[int, bool]] = []
    if isinstance(command, Broadcast):
        inner_writes = is_write(command.command)
        for target in command.tab_ids:
            if isinstance(target, int):
                found.append((target, inner_writes))
        return found
    own: int | None = None
    if isinstance(command.tab_id, int):
        own = command.tab_id
    elif isinstance(command.tab_id, Ref):
        try:
            value = resolve_command(command, lookup).tab_id
        except KitsuneError:
            value = None
        own = value if isinstance(value, int) else None
    elif command.acts_on_tab or isinstance(command, Sequence):
        own = tab
    if own is not None and command.acts_on_tab:
        found.append((own, command.writes))
    inner_tab = own if own is not None else tab
    if isinstance(command, If | While) and inner_tab is not None:
        found.append((inner_tab, True))
    for child in children(command):
        found += _targets(child.command, lookup, inner_tab)
    return found


def _not_recorded() -> KitsuneError:
    return KitsuneError("events_unavailable", "The step could not be recorded before sending; nothing was sent",
                        retryable=True)


def run_call(call: int, spec: CallSpec, ports: Ports, sink: EventSinkPort, *,
             config: EngineConfig = EngineConfig(), prior: Prior | None = None,
             deadline: float | None = None) -> RunReport:
    """Run a call (or, with ``prior``, resume it) to its end and report it.

    ``sink`` receives every event as it happens (the event stream) and may answer a wait for
    the event to be stored, which the engine calls before going on; ``deadline`` overrides the
    call's own container timeout (a resume's is fixed at 300 s).
    """
    return _Run(call, spec, ports, sink, config, prior, spec.timeout if deadline is None else deadline).execute()
