"""The replay: a call's step log rebuilt from its events' wire forms (the records of its stream), in order.

Most of a call's records are its steps' starts, dispatches and successes, and they come in the order its layout
foretells: its steps start in path order, each ends before the next starts. So at each record the replay expects the
next step's start (on the tab its outline names) or the success without a warning of the step started last, each in
the wire form the codec writes (``event_to_json`` serialized by orjson), made when the call is laid out; a dispatch
may come for any step (a write recorded ahead of its turn, ``core.ahead``), and is known by the codec's form of a
dispatch around the text of a step's path. A record equal to one of them, byte for byte, is folded as that event
without being parsed: orjson would parse it to exactly that event's fields. Any other record is parsed and folded as
its fields say (a step's start, dispatch or success read from them; any other event decoded first), so the log is the
same either way; a start so read moves the expectation on to the step after its own.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
from itertools import repeat
from operator import attrgetter
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
from messages.steplog import IndexTexts, StepLog, StepLogBuilder, StepNode, node_started

__all__ = ["replay"]

_SUCCEEDED, _STARTED, _DISPATCHED = StepSucceeded.kind, StepStarted.kind, StepDispatched.kind
_STARTS = frozenset((CallStarted.kind, CallResumed.kind))
_MARK = "0"
"""The path of the events a wire form is taken from, then cut out of it (``_form``)."""
_MARKED = b'"path":"0"'
_ACTION, _TAB = attrgetter("action"), attrgetter("tab_id")


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
        self._keys: list[bytes] = []
        """The text of each one's path, in path order: digits and dots, which a JSON string holds as they are."""
        self._forms: _Forms | None = None
        """The wire forms of the call's step events; None when they cannot be cut around a path."""
        self._starts: list[bytes | None] = [None]
        """Each step's foretold start, in path order, then None (past the last step)."""
        self._successes: list[bytes | None] = []
        """Each step's foretold success without a warning, in path order."""
        self._positions: dict[bytes, int] = {}
        """Each step's position in ``_order`` by its path's text, made when a path that is not its position's
        digits is first looked up (a step inside another)."""

    def apply_wire(self, wire: Iterable[bytes]) -> None:
        """Fold a call's events in, given in their wire form (``codec.encode``), in order, from its start."""
        order, starts, successes, (head, tail) = self._order, self._starts, self._successes, self._dispatch()
        pos, start = 0, starts[0]  # the next step in path order, and its foretold start
        last: StepNode | None = None  # the step started last, and its foretold success
        success: bytes | None = None
        for data in wire:
            if data == start:  # all but a few of a call's records are this, a success or a dispatch
                last, success = order[pos], successes[pos]
                if last.status is None and not last.wrote:  # no start or end before: nothing to clear
                    last.status = "unknown"
                else:  # a start again: what told it before is cleared (the tab read off its start, rare)
                    node_started(last, orjson.loads(data)["tab_id"])
                pos += 1
                start = starts[pos]
                continue
            if data == success and last is not None:
                last.status = "ok"
                last.warning = None
                continue
            if data.startswith(head) and data.endswith(tail) and \
                    (at := self._position(data[len(head):len(data) - len(tail)])) is not None:
                node = order[at]  # a dispatch, of any step
            else:
                record = orjson.loads(data)
                kind = record["type"]
                if kind != _STARTED and kind != _SUCCEEDED and kind != _DISPATCHED:
                    if kind in _STARTS:  # the call laid out anew
                        self._start(record["call"], record["call_kind"], record["timeout"], record["outline"])
                        order, starts, successes, (head, tail) = self._order, self._starts, self._successes, \
                            self._dispatch()
                        pos, start, last, success = 0, starts[0], None, None
                    else:
                        self.apply(event_from_json(record))
                    continue
                node = self._nodes[record["path"]]
                if kind == _SUCCEEDED:
                    node.status, node.warning = "ok", record["warning"]
                    continue
                if kind == _STARTED:
                    node_started(node, record["tab_id"])
                    last, pos = node, self._place(node)
                    success, start = successes[pos], starts[pos + 1]
                    pos += 1
                    continue
            node.dispatched = True  # no more: a start or an end that follows tells its status (``_unfolded``)

    def _start(self, call: int, kind: str, timeout: float, outline: Sequence[Mapping[str, Any]]) -> None:
        super()._start(call, kind, timeout, outline)
        nodes, top = self._nodes, self._top
        if len(nodes) == len(top):  # top-level steps alone: each one's path is its position's digits
            self._order, self._keys = top, IndexTexts.keys(len(top))
        else:
            self._order, self._keys = list(nodes.values()), list(map(str.encode, nodes))
        order, keys = self._order, self._keys
        self._forms = forms = _Forms.of(call)
        self._positions = {}
        self._starts, self._successes = [None] * (len(order) + 1), [None] * len(order)
        if forms is None:
            return
        try:
            shapes = list(map(forms.started.__getitem__, zip(map(_ACTION, order), map(_TAB, order))))
        except TypeError:  # an action or tab no key can be made of (a list): no start is foretold
            pass
        else:
            self._starts = [*map(bytes.join, keys, shapes), None]
        self._successes = list(map(bytes.join, keys, repeat(forms.succeeded)))

    def _dispatch(self) -> tuple[bytes | tuple[()], bytes | tuple[()]]:
        """The head and tail of the call's dispatch form (around a step's path); when there is none, a pair no
        record starts or ends with (no prefix at all)."""
        return ((), ()) if self._forms is None else self._forms.dispatched

    def _place(self, node: StepNode) -> int:
        """The position in path order of one of the call's steps."""
        at = self._position(node.path.encode())
        assert at is not None  # every step of the call has one
        return at

    def _position(self, key: bytes) -> int | None:
        """The position in path order of the step whose path's text is ``key``, or None: a top-level step's is the
        number it reads as, another's is looked up."""
        keys = self._keys
        if key.isdigit() and len(key) < 10 and (at := int(key)) < len(self._order) and keys[at] == key:
            return at
        if not self._positions:
            self._positions = dict(zip(keys, range(len(self._order))))
        return self._positions.get(key)


class _Forms:
    """The wire forms of a call's step events, each as the head and tail around a step's path text."""

    __slots__ = ("dispatched", "started", "succeeded")

    def __init__(self, call: int, succeeded: tuple[bytes, bytes], dispatched: tuple[bytes, bytes]) -> None:
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


class _Starts(dict[tuple[str, "int | None"], tuple[bytes, bytes]]):
    """A call's start forms by action and tab, each made when first asked for."""

    def __init__(self, call: int) -> None:
        super().__init__()
        self.call = call

    def __missing__(self, shape: tuple[str, int | None]) -> tuple[bytes, bytes]:
        form = _form(StepStarted(self.call, _MARK, *shape))
        if form is None:  # the call id holds the mark: no start of it is foretold
            raise TypeError("a start form that cannot be cut around its path")
        self[shape] = form
        return form


def _form(event: StepEvent) -> tuple[bytes, bytes] | None:
    """The wire form of ``event`` (whose path is the mark) as the head and tail around its path's text (which
    ``bytes.join`` joins); None when the mark shows in it elsewhere too."""
    wire = orjson.dumps(event_to_json(event))
    if wire.count(_MARKED) != 1:
        return None
    head, _, tail = wire.partition(_MARKED)
    return head + b'"path":"', b'"' + tail
