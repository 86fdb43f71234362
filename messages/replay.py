"""The replay: a call's step log rebuilt from its events' wire forms (the records of its stream), in order.

Most of a call's records are its steps' starts, dispatches and successes, and they come in the order its layout
foretells: its steps start in path order, each ends before the next starts, and a write's dispatch comes just after its
start or, recorded ahead, just before it. So at each record the replay expects the next step's start (on the tab its
outline names), the success without a warning of the step started last, or a dispatch of either of those two steps,
each in the wire form the codec writes (``event_to_json`` serialized by orjson). A record equal to one of them, byte
for byte, is folded as that event without being parsed: orjson would parse it to exactly that event's fields. Any
other record is parsed and folded as its fields say (a step's start, dispatch or success read from them; any other
event decoded first), so the log is the same either way; a start so read moves the expectation on to the step after
its own.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import orjson

from messages.events import (
    CallResumed,
    CallStarted,
    StepDispatched,
    StepEvent,
    StepStarted,
    StepSucceeded,
    event_from_json,
    event_to_json,
)
from messages.steplog import StepLog, StepLogBuilder, StepNode, node_started

__all__ = ["replay"]

_SUCCEEDED, _STARTED, _DISPATCHED = StepSucceeded.kind, StepStarted.kind, StepDispatched.kind
_STARTS = frozenset((CallStarted.kind, CallResumed.kind))
_MARK = "0"
"""The path of the events a wire form is taken from, then cut out of it (``_form``)."""
_MARKED = b'"path":"0"'


def replay(wire: Iterable[bytes]) -> StepLog:
    """The step log of a call from its events' wire forms, in order: each record folded as it is read, the
    foretold ones without being parsed, the fold's own nodes made the log's records. The garbage collector is
    off meanwhile: its passes over the records built so far, again and again, took a sixth of the time, and a
    replay builds nothing cyclic."""
    builder = _Replay()
    collecting = gc.isenabled()
    gc.disable()
    try:
        builder.apply_wire(wire)
        return builder.finish()
    finally:
        if collecting:
            gc.enable()


class _Replay(StepLogBuilder):
    """A builder that folds a call's records, from its start: the foretold ones from what each foretells."""

    def __init__(self) -> None:
        super().__init__()
        self._order: list[StepNode] = []
        """The call's steps in path order, the order they start in."""
        self._forms: _Forms | None = None
        """The wire forms of the call's step events; None when they cannot be cut around a path."""
        self._positions: dict[str, int] = {}
        """Each step's position in ``_order``, by path, made when a start is first read rather than foretold."""

    def apply_wire(self, wire: Iterable[bytes]) -> None:
        """Fold a call's events in, given in their wire form (``codec.encode``), in order, from its start."""
        order, nodes, dispatched = self._order, self._nodes, self._dispatched()
        start, success_next, tab, key = self._expect(pos := 0)  # what the next step's start foretells
        last: StepNode | None = None  # the step started last, its foretold success and its path's text
        success, last_key = None, b""
        for data in wire:
            if data == start:  # all but a few of a call's records are this, a success or a dispatch
                last, success, last_key = order[pos], success_next, key
                if last.status is None and not last.wrote:  # its first start: nothing to clear
                    last.status = "unknown"
                    last.tab_id = tab
                else:
                    node_started(last, tab)
                start, success_next, tab, key = self._expect(pos := pos + 1)
                continue
            if data == success and last is not None:
                last.status = "ok"
                last.warning = None
                continue
            if start is not None and dispatched is not None and data == dispatched % key:
                node = order[pos]  # a write recorded ahead of its turn
            elif success is not None and last is not None and dispatched is not None and data == dispatched % last_key:
                node = last
            else:
                record = orjson.loads(data)
                kind = record["type"]
                if kind == _SUCCEEDED:
                    node = nodes[record["path"]]
                    node.status, node.warning = "ok", record["warning"]
                    continue
                if kind == _STARTED:
                    last = nodes[record["path"]]
                    node_started(last, record["tab_id"])
                    _, success, _, last_key = self._expect(self._position(last.path))
                    start, success_next, tab, key = self._expect(pos := self._position(last.path) + 1)
                    continue
                if kind != _DISPATCHED:
                    if kind in _STARTS:  # the call laid out anew
                        self._start(record["call"], record["call_kind"], record["timeout"], record["outline"])
                        order, nodes, dispatched = self._order, self._nodes, self._dispatched()
                        start, success_next, tab, key = self._expect(pos := 0)
                        last, success = None, None
                    else:
                        self.apply(event_from_json(record))
                    continue
                node = nodes[record["path"]]
            node.dispatched = True
            if node.status is None:
                node.status = "unknown"

    def _start(self, call: int, kind: str, timeout: float, outline: Sequence[Mapping[str, Any]]) -> None:
        super()._start(call, kind, timeout, outline)
        self._order = list(self._nodes.values())
        self._forms = _Forms.of(call)
        self._positions = {}

    def _dispatched(self) -> bytes | None:
        return None if self._forms is None else self._forms.dispatched

    def _expect(self, pos: int) -> tuple[bytes | None, bytes | None, int | None, bytes]:
        """The foretold start and success of the step at ``pos`` in path order, the tab its start names and its
        path's text: none past the last step, or when its start cannot be foretold (an action or tab no key can be
        made of, a list)."""
        forms = self._forms
        if forms is None or pos >= len(self._order):
            return None, None, None, b""
        node = self._order[pos]
        key = node.path.encode()
        try:
            started = forms.started[node.action, node.tab_id]
        except TypeError:
            return None, None, None, key
        return started % key, forms.succeeded % key, node.tab_id, key

    def _position(self, path: str) -> int:
        """The position in path order of the step at ``path``."""
        if not self._positions:
            self._positions = {path: i for i, path in enumerate(self._nodes)}
        return self._positions[path]


class _Forms:
    """The wire forms of a call's step events as templates a step's path text fills (``%b``)."""

    __slots__ = ("dispatched", "started", "succeeded")

    def __init__(self, call: int, succeeded: bytes, dispatched: bytes) -> None:
        self.succeeded = succeeded
        """A step's success without a warning."""
        self.dispatched = dispatched
        self.started = _Starts(call)
        """A step's start, by its action and tab."""

    @classmethod
    def of(cls, call: int) -> _Forms | None:
        """The forms of ``call``'s events; None when they cannot be cut around their path (a call id that holds the
        very text of the mark)."""
        succeeded, dispatched = _form(StepSucceeded(call, _MARK)), _form(StepDispatched(call, _MARK))
        return None if succeeded is None or dispatched is None else cls(call, succeeded, dispatched)


class _Starts(dict[tuple[str, "int | None"], bytes]):
    """A call's start forms by action and tab, each made when first asked for."""

    def __init__(self, call: int) -> None:
        super().__init__()
        self.call = call

    def __missing__(self, shape: tuple[str, int | None]) -> bytes:
        form = _form(StepStarted(self.call, _MARK, *shape))
        if form is None:  # the call id holds the mark: no start of it is foretold
            raise TypeError("a start form that cannot be cut around its path")
        self[shape] = form
        return form


def _form(event: StepEvent) -> bytes | None:
    """The wire form of ``event`` (whose path is the mark) as a template its path's text fills (``%b``); None when
    the mark shows in it elsewhere too."""
    wire = orjson.dumps(event_to_json(event))
    if wire.count(_MARKED) != 1:
        return None
    head, _, tail = wire.partition(_MARKED)
    return head.replace(b"%", b"%%") + b'"path":"%b"' + tail.replace(b"%", b"%%")
