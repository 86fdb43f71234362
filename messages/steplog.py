"""The step log: a fold over a call's events into progress, status and summary.

The engine reports what this fold gives, and the same fold rebuilds a call from its event
stream after the actor that ran it is gone. A step that started or was dispatched and has no terminal
event is ``unknown`` (a dispatched write is never guessed ``ok``, nor one recorded ahead of its turn
``skipped``); a step that never started is ``skipped``.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from operator import itemgetter
from typing import Any, ClassVar, cast

from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallStarted,
    EndReason,
    Event,
    Observation,
    SessionChanged,
    SiteToolEvent,
    StepDispatched,
    StepEvent,
    StepFailed,
    StepHeld,
    StepKept,
    StepObserved,
    StepOutcomeUnknown,
    StepSkipped,
    StepStarted,
    StepSucceeded,
)
from messages.paths import StepPath
from messages.results import STATUSES, Status, worst

__all__ = ["IndexTexts", "Paths", "StepLog", "StepLogBuilder", "StepNode", "StepRecord", "fold", "node_started",
           "record_from_json", "record_to_json"]


@dataclass(frozen=True, slots=True)
class StepRecord:
    """What happened to one step, as its ``progress`` record shows it and resume reads it."""

    path: str
    """The step's progress path (``"0.1.3"``)."""
    index: int
    """Its index in its list (batch, sequence)."""
    action: str
    tab_id: int | None
    status: Status
    kept: bool = False
    """A resume kept it from an earlier run (``resumed: "kept"``)."""
    observed: Observation | None = None
    """``applied`` when the caller reported it took effect and it was not sent."""
    dispatched: bool = False
    """A write of this step was sent (or about to be) to the page."""
    wrote: bool = False
    """A write inside this one-step block ran ok."""
    code: str | None = None
    error: str | None = None
    warning: str | None = None
    steps: tuple[StepRecord, ...] = ()
    """A sequence's steps."""
    sequences: tuple[tuple[StepRecord, ...], ...] = ()
    """A parallel's sequences."""
    retryable: bool = False
    """A failed step's failure may pass when it is sent again (its ``retryable``)."""

    @property
    def is_container(self) -> bool:
        """A sequence or parallel: resumed step by step, never observed as a whole."""
        return self.action in ("sequence", "parallel")

    def children(self) -> Iterator[StepRecord]:
        """The records directly inside a sequence or parallel."""
        yield from self.steps
        for seq in self.sequences:
            yield from seq

    def walk(self) -> Iterator[StepRecord]:
        """This record and every record inside it, in path order."""
        yield self
        for child in self.children():
            yield from child.walk()

    def to_progress(self) -> dict[str, Any]:
        """The ``progress`` record: ``{"index", "action", "tabId", "status"}`` and extras."""
        out: dict[str, Any] = {"index": self.index, "action": self.action, "tabId": self.tab_id,
                               "status": self.status}
        if self.kept:
            out["resumed"] = "kept"
        if self.observed == "applied":
            out["observed"] = "applied"
        if self.action == "sequence":
            out["steps"] = [s.to_progress() for s in self.steps]
        elif self.action == "parallel":
            out["sequences"] = [[s.to_progress() for s in seq] for seq in self.sequences]
        return out


@dataclass(frozen=True, slots=True)
class StepLog:
    """A call's steps as its events tell them."""

    call: int
    kind: str
    timeout: float
    steps: tuple[StepRecord, ...]
    ended: EndReason | None
    """Why the call stopped; None while it runs (or when its actor died)."""
    sessions: tuple[SessionChanged, ...] = ()
    """The browser sessions the call opened, promoted or closed, and later closes or sweeps of those it opened."""
    site_tools: tuple[SiteToolEvent, ...] = ()
    """What happened inside its ``callSiteTool`` steps: tools called, continuations requested, redeemed, ended."""

    @property
    def status(self) -> Status:
        """The container status: the worst of its top-level steps."""
        return worst([s.status for s in self.steps])

    @property
    def progress(self) -> list[dict[str, Any]]:
        return [s.to_progress() for s in self.steps]

    def records(self) -> Iterator[StepRecord]:
        """Every record, in path order."""
        for step in self.steps:
            yield from step.walk()

    def find(self, path: str) -> StepRecord | None:
        """The record at ``path``, or None."""
        return next((r for r in self.records() if r.path == path), None)

    @property
    def summary(self) -> str:
        """One line a person can read: counts, then the first thing needing attention."""
        counts = dict.fromkeys(STATUSES, 0)
        for step in self.steps:
            counts[step.status] += 1
        noun = "command" if len(self.steps) == 1 else "commands"
        line = f"{len(self.steps)} {noun}: " + ", ".join(f"{n} {s}" for s, n in counts.items() if n) + "."
        problem = next((r for r in self.records() if r.status in ("unknown", "held", "failed")
                        and not r.is_container), None)
        if problem is not None:
            detail = f": {problem.error}" if problem.error else ""  # a step cut off mid-run has no error
            line += f" Step {problem.path} ({_on_tab(problem)}) {_PHRASES[problem.status]}{detail}."
        elif self.status == "skipped":
            warned = next((r for r in self.records() if r.warning is not None and not r.kept), None)
            if warned is not None:
                line += f" Stopped at a warning of step {warned.path} ({_on_tab(warned)}): {warned.warning}."
        if self.ended == "container_timeout":
            line += f" The call reached its {self.timeout:g}s deadline."
        if self.status == "failed" and not any(r.retryable for r in self.records() if r.status == "failed"):
            line += _NOT_RETRYABLE  # a resume would send it again and meet the same failure
        elif self.status in ("unknown", "held", "failed", "skipped"):
            line += _ADVICE[self.status]
        return line


_PHRASES = {"unknown": "has an unknown outcome", "held": "is held for approval", "failed": "failed"}
_ADVICE = {
    "unknown": " Observe the page, then resume with observed for each unknown write.",
    "held": " Approve it, then resume.",
    "failed": " Resume to send the failed and skipped steps again.",
    "skipped": " Resume to run the skipped steps.",
}
_NOT_RETRYABLE = " The failure is not retryable: a resume would meet it again, so fix its cause or send a new call."
"""The advice of a failed call none of whose failures is retryable (``url_denied``, ``tab_closed``...)."""


def _on_tab(record: StepRecord) -> str:
    return record.action if record.tab_id is None else f"{record.action} on tab {record.tab_id}"


_FIELDS = tuple(f.name for f in dataclasses.fields(StepRecord))
_ACTION, _TAB = itemgetter("action"), itemgetter("tab_id")
_CONTAINERS = ("sequence", "parallel")


class StepNode:
    """A step's record while events are folded: a :class:`StepRecord`'s layout, not frozen (or one being built).
    Its status is the step's as the events so far tell it, None while no start or end told it anything: ``unknown``
    if a write of it was sent (a dispatch), else ``skipped`` (:func:`_unfolded`)."""

    __slots__ = _FIELDS

    def __init__(self, path: str, index: int, action: str, tab_id: int | None) -> None:
        self.path = path
        self.index = index
        self.action = action
        self.tab_id = tab_id
        self.status: Status | None = None
        self.kept = False
        self.observed: Observation | None = None
        self.dispatched = False
        self.wrote = False
        self.code: str | None = None
        self.error: str | None = None
        self.warning: str | None = None
        self.steps: Sequence[Any] = ()
        """Its steps' nodes while folded (a sequence's), their records once sealed."""
        self.sequences: Sequence[Sequence[Any]] = ()
        self.retryable = False

    def freeze(self) -> StepRecord:
        """Its record as the events so far tell it (the node folds on)."""
        if self.action not in _CONTAINERS:  # most steps: nothing inside to freeze
            return _record(self.path, self.index, self.action, self.tab_id, self.status or _unfolded(self), self.kept,
                           self.observed, self.dispatched, self.wrote, self.code, self.error, self.warning, (), (),
                           self.retryable)
        steps = tuple(n.freeze() for n in self.steps)
        sequences = tuple(tuple(n.freeze() for n in seq) for seq in self.sequences)
        return _record(self.path, self.index, self.action, self.tab_id, *_inside(steps, sequences), self.observed,
                       self.dispatched, self.wrote, self.code, self.error, self.warning, steps, sequences, False)

    def seal(self) -> StepRecord:
        """Its record, made of this node itself (and of those inside it), which folds nothing more."""
        if self.action in _CONTAINERS:
            steps = tuple(n.seal() for n in self.steps)
            sequences = tuple(tuple(n.seal() for n in seq) for seq in self.sequences)
            self.steps, self.sequences = steps, sequences
            self.status, self.kept = _inside(steps, sequences)
            self.retryable = False
        elif self.status is None:
            self.status = _unfolded(self)
        self.__class__ = StepRecord  # type: ignore[assignment]
        return cast(StepRecord, self)


def _inside(steps: tuple[StepRecord, ...], sequences: tuple[tuple[StepRecord, ...], ...]) -> tuple[Status, bool]:
    """A container's status and kept, from the records inside it."""
    inner = [*steps, *(r for seq in sequences for r in seq)]
    return worst([r.status for r in inner]), bool(inner) and all(r.kept for r in inner)


_Thawed: Any = dataclasses.make_dataclass("_Thawed", [(f.name, f.type) for f in dataclasses.fields(StepRecord)],
                                          slots=True, eq=False, repr=False)
"""A plain slots class with :class:`StepRecord`'s layout (a node's, all its fields given at once)."""


def _record(*fields: Any) -> StepRecord:
    """A :class:`StepRecord` of ``fields`` (all of them, in order), built at plain-attribute speed: a frozen
    dataclass's own ``__init__`` sets each field through ``object.__setattr__``, ten times slower. Once its
    class is StepRecord (a node has its layout), it is as frozen as any other."""
    record = _Thawed(*fields)
    record.__class__ = StepRecord
    return cast(StepRecord, record)


class StepLogBuilder:
    """Folds events one at a time; :meth:`freeze` gives the step log so far.

    It folds typed events (:meth:`apply`); a replay folds a stream's records in their wire form, most of them without
    building an event (``messages.replay``).
    """

    def __init__(self) -> None:
        self._nodes: dict[str, StepNode] = {}
        self._top: list[StepNode] = []
        self._call = 0
        self._kind = ""
        self._timeout = 0.0
        self._ended: EndReason | None = None
        self._sessions: list[SessionChanged] = []
        self._site_tools: list[SiteToolEvent] = []

    def apply(self, event: Event) -> None:
        """Fold one event in."""
        if isinstance(event, StepEvent):
            _apply_step(self._nodes[event.path], event)
        elif isinstance(event, CallStarted):  # a CallResumed too: a resume starts the log over
            self._start(event.call, event.call_kind, event.timeout, [step.to_json() for step in event.outline])
        elif isinstance(event, CallEnded):
            self._ended = event.reason
        elif isinstance(event, SessionChanged):
            self._sessions.append(event)
        elif isinstance(event, SiteToolEvent):
            self._site_tools.append(event)

    def _start(self, call: int, kind: str, timeout: float, outline: Sequence[Mapping[str, Any]]) -> None:
        """Lay the call's steps out from its outline in wire form (``OutlineStep.to_json``), none started."""
        self._call, self._kind, self._timeout = call, kind, timeout
        self._ended = None
        texts = IndexTexts.first(len(outline))
        if max(map(len, outline), default=0) <= 2:  # leaves alone (an action and a tab each): laid out at once
            self._top = list(map(StepNode, texts, IndexTexts.indexes(len(outline)), map(_ACTION, outline),
                                 map(_TAB, outline)))
            self._nodes = Paths(texts, self._top)
            return
        self._nodes = nodes = {}
        self._top = top = []
        for i, step in enumerate(outline):
            path = texts[i]  # a top-level step's path is its index (``ROOT.child(i)``'s text)
            if "steps" in step or "sequences" in step:
                top.append(self._lay_out(path, i, step))
            else:  # most steps: a leaf, laid out here rather than through a call for each of thousands
                top.append(node := StepNode(path, i, step["action"], step["tab_id"]))
                nodes[path] = node

    def _lay_out(self, path: str, index: int, outline: Mapping[str, Any]) -> StepNode:
        node = self._nodes[path] = StepNode(path, index, outline["action"], outline["tab_id"])
        steps, sequences = outline.get("steps"), outline.get("sequences")  # absent for most: a leaf step
        if steps:
            node.steps = [self._lay_out(StepPath(path).child(i), i, s) for i, s in enumerate(steps)]
        if sequences:
            node.sequences = [[self._lay_out(StepPath(path).child(q, i), i, s) for i, s in enumerate(seq)]
                              for q, seq in enumerate(sequences)]
        return node

    def record(self, path: str) -> StepRecord:
        """The record of the step at ``path`` (a container's with its steps) as the events so far tell it."""
        return self._nodes[path].freeze()

    def status(self, path: str) -> Status:
        """The status of the step at ``path`` as the events so far tell it (its record's, built only for a
        container)."""
        node = self._nodes[path]
        return node.freeze().status if node.action in _CONTAINERS else node.status or _unfolded(node)

    def freeze(self) -> StepLog:
        """The step log as the events folded so far tell it."""
        return self._log(tuple(n.freeze() for n in self._top))

    def finish(self) -> StepLog:
        """The step log, its records made of the builder's own nodes rather than copies: it folds nothing after."""
        top = self._top
        for node in top:
            if node.action in _CONTAINERS:
                node.seal()
            else:  # most steps: sealed here rather than through a call for each of thousands
                if node.status is None:
                    node.status = _unfolded(node)
                node.__class__ = StepRecord  # type: ignore[assignment]
        steps = cast(tuple[StepRecord, ...], tuple(top))
        self._nodes, self._top = {}, []
        return self._log(steps)

    def _log(self, steps: tuple[StepRecord, ...]) -> StepLog:
        return StepLog(self._call, self._kind, self._timeout, steps, self._ended, tuple(self._sessions),
                       tuple(self._site_tools))


class Paths(dict[str, StepNode]):
    """The nodes of a call's steps by path when all are top-level leaves (a path is its index's text), entered when
    one is first looked up: a replay whose records were all foretold looks none up."""

    def __init__(self, texts: Sequence[str], top: Sequence[StepNode]) -> None:
        super().__init__()
        self._entering: tuple[Sequence[str], Sequence[StepNode]] | None = texts, top

    def __missing__(self, path: str) -> StepNode:
        if self._entering is None:
            raise KeyError(path)
        self.update(zip(*self._entering, strict=False))  # the texts run on
        self._entering = None
        return self[path]


class IndexTexts:
    """The texts of indexes, from 0 (a top-level step's path is its index's text), made once for every call."""

    known: ClassVar[list[str]] = []
    """Those made so far; replaced by a longer list, never changed, so a reader's list stays whole."""
    encoded: ClassVar[list[bytes]] = []
    """Those encoded so far, likewise."""
    numbers: ClassVar[list[int]] = []
    """The indexes themselves, likewise: one object each for every call (an int past 256 is otherwise made anew)."""

    @classmethod
    def first(cls, count: int) -> list[str]:
        """At least the first ``count`` texts."""
        known = cls.known
        if len(known) < count:
            known = cls.known = known + [str(i) for i in range(len(known), count)]
        return known

    @classmethod
    def indexes(cls, count: int) -> list[int]:
        """At least the first ``count`` indexes."""
        numbers = cls.numbers
        if len(numbers) < count:
            numbers = cls.numbers = numbers + list(range(len(numbers), count))
        return numbers

    @classmethod
    def keys(cls, count: int) -> list[bytes]:
        """At least the first ``count`` texts, encoded."""
        keys = cls.encoded
        if len(keys) < count:
            keys = cls.encoded = keys + [text.encode() for text in cls.first(count)[len(keys):]]
        return keys


def _apply_step(node: StepNode, event: StepEvent) -> None:
    """Fold one step's event into its record."""
    match event:
        case StepStarted():
            node_started(node, event.tab_id)
        case StepDispatched():
            node.dispatched = True  # its status is unknown once sealed, if no start or end tells it (_unfolded)
        case BlockWriteSucceeded():
            node.wrote = True
        case StepSucceeded():
            _succeeded(node, event.warning)
        case StepFailed() | StepOutcomeUnknown() | StepHeld():
            node.status, node.code, node.error = _ENDED_AS[type(event)], event.code, event.error
            node.retryable = isinstance(event, StepFailed) and event.retryable
        case StepSkipped():
            node.status = "skipped"
        case StepKept():
            node.status, node.kept, node.tab_id = "ok", True, event.tab_id
        case StepObserved(observed="applied"):
            node.status, node.observed = "ok", "applied"


def node_started(node: StepNode, tab_id: int | None) -> None:
    """A step (re)started: ``unknown`` until it ends, and what an earlier run of it told is gone, but for a
    dispatch, which may come before its start (a write recorded ahead of its turn, ``core.ahead``)."""
    if node.status is not None or node.wrote:  # else nothing told it anything: nothing to clear
        node.code = node.error = node.warning = node.observed = None
        node.wrote = node.kept = node.retryable = False
    node.status, node.tab_id = "unknown", tab_id


def _unfolded(node: StepNode) -> Status:
    """The status of a step no start or end told anything: ``unknown`` when a write of it was sent (it may have
    run: never guessed ``skipped``), else ``skipped``."""
    return "unknown" if node.dispatched else "skipped"


def _succeeded(node: StepNode, warning: str | None) -> None:
    node.status, node.warning = "ok", warning


_ENDED_AS: dict[type[StepEvent], Status] = {StepFailed: "failed", StepOutcomeUnknown: "unknown", StepHeld: "held"}


def fold(events: Iterable[Event]) -> StepLog:
    """The step log of a call from its events alone (the last run, for a resumed call)."""
    builder = StepLogBuilder()
    for event in events:
        builder.apply(event)
    return builder.finish()


def record_to_json(record: StepRecord) -> dict[str, Any]:
    """A record's full wire form (every field, unlike its ``progress`` view)."""
    out: dict[str, Any] = {name: getattr(record, name) for name in _SCALARS}
    out["steps"] = [record_to_json(s) for s in record.steps]
    out["sequences"] = [[record_to_json(s) for s in seq] for seq in record.sequences]
    return out


def record_from_json(data: dict[str, Any]) -> StepRecord:
    """Parse a record's full wire form back."""
    return StepRecord(
        **{name: data[name] for name in _SCALARS if name in data},  # a field added since has its default
        steps=tuple(record_from_json(s) for s in data["steps"]),
        sequences=tuple(tuple(record_from_json(s) for s in seq) for seq in data["sequences"]),
    )


_SCALARS = ("path", "index", "action", "tab_id", "status", "kept", "observed", "dispatched", "wrote",
            "code", "error", "warning", "retryable")
