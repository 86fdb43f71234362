"""The replay: a call's step log rebuilt from its events' wire forms (the records of its stream), in order.

Most of a call's records are its steps' starts, dispatches and successes, and they come in the order its layout
foretells: its steps start in path order, each ends before the next starts. So at each record the replay expects the
next step's start (on the tab its outline names) or the success without a warning of the step started last, each in
the wire form the codec writes (``event_to_json`` serialized by orjson), the step's path joined into that form's head
and tail as the records come. A dispatch may come for any step (a write recorded ahead of its turn, ``core.ahead``):
one is known by the codec's form around the text of one of the call's paths, and the next is foretold at the stride
of the last two. A record equal to one of them, byte for byte, is folded as that event without being parsed: orjson
would parse it to exactly that event's fields. Any other record is parsed and folded as
its fields say (a step's start, dispatch or success read from them; any other event decoded first), so the log is the
same either way; a start so read moves the expectation on to the step after its own.
"""

from __future__ import annotations

import gc
from collections.abc import Iterable, Mapping, Sequence
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
from messages.steplog import IndexTexts, Paths, StepLog, StepLogBuilder, StepNode, node_started

__all__ = ["replay"]

_SUCCEEDED, _STARTED, _DISPATCHED = StepSucceeded.kind, StepStarted.kind, StepDispatched.kind
_STEP_KINDS = frozenset((_SUCCEEDED, _STARTED, _DISPATCHED))
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
        self._shapes: list[tuple[bytes, bytes]] = []
        """The head and tail of each one's start on the tab its outline names, in path order (none when no start
        can be foretold)."""
        self._forms: _Forms | None = None
        """The wire forms of the call's step events; None when they cannot be cut around a path."""
        self._positions: dict[bytes, int] = {}
        """Each step's position in ``_order`` by its path's text, made when a path that is not its position's
        digits is first looked up (a step inside another)."""

    def apply_wire(self, wire: Iterable[bytes]) -> None:
        """Fold a call's events in, given in their wire form (``codec.encode``), in order, from its start."""
        order, keys, shapes, (succeeded, sent) = self._order, self._keys, self._shapes, self._parts()
        foretold = len(shapes)  # the steps whose start is foretold: all of them, or none
        pos, start = 0, self._foretell(0)  # the next step in path order, and its foretold start
        last: StepNode | None = None  # the step started last, and its foretold success
        success: bytes | None = None
        ahead, ahead_at, sent_at = None, 0, -1  # the foretold dispatch, its step, the step of the one before
        for data in wire:
            if data == start:  # all but a few of a call's records are this, a success or a dispatch
                last, success = order[pos], keys[pos].join(succeeded)
                if last.status is None and not last.wrote:  # no start or end before: nothing to clear
                    last.status = "unknown"
                else:  # a start again: what told it before is cleared (the tab read off its start, rare)
                    node_started(last, orjson.loads(data)["tab_id"])
                pos += 1
                start = keys[pos].join(shapes[pos]) if pos < foretold else None
                continue
            if data == success and last is not None:
                last.status = "ok"
                last.warning = None
                continue
            if data == ahead:
                at = ahead_at
            elif (found := self._sent(data)) is not None:
                at = found
            else:
                record = orjson.loads(data)
                kind = record["type"]
                if kind in _STEP_KINDS:
                    pos = self._fold_step(self._nodes[record["path"]], record, pos)
                    if kind == _STARTED:
                        last, success, start = order[pos - 1], self._succeed(pos - 1), self._foretell(pos)
                elif kind in _STARTS:  # the call laid out anew
                    self._start(record["call"], record["call_kind"], record["timeout"], record["outline"])
                    order, keys, shapes, (succeeded, sent) = self._order, self._keys, self._shapes, self._parts()
                    foretold, pos, start, last, success = len(shapes), 0, self._foretell(0), None, None
                    ahead, sent_at = None, -1
                else:
                    self.apply(event_from_json(record))
                continue
            order[at].dispatched = True  # no more: a start or an end that follows tells its status (``_unfolded``)
            ahead_at, sent_at = at + at - sent_at, at  # writes recorded ahead come at a stride (every other step...)
            ahead = keys[ahead_at].join(sent) if at < ahead_at < len(order) else None

    def _fold_step(self, node: StepNode, record: dict[str, Any], pos: int) -> int:
        """Fold a step's start, success or dispatch, parsed; the position of the next step to start (after this
        one, for a start)."""
        kind = record["type"]
        if kind == _SUCCEEDED:
            node.status, node.warning = "ok", record["warning"]
        elif kind == _DISPATCHED:
            node.dispatched = True
        else:
            node_started(node, record["tab_id"])
            return self._place(node) + 1
        return pos

    def _start(self, call: int, kind: str, timeout: float, outline: Sequence[Mapping[str, Any]]) -> None:
        super()._start(call, kind, timeout, outline)
        nodes, top = self._nodes, self._top
        if isinstance(nodes, Paths):  # top-level leaves alone: each one's path is its position's digits
            self._order, self._keys = top, IndexTexts.keys(len(top))
        else:
            self._order, self._keys = list(nodes.values()), list(map(str.encode, nodes))
        self._forms = forms = _Forms.of(call)
        self._positions, self._shapes = {}, [] if forms is None else forms.shapes(self._order)

    def _parts(self) -> tuple[tuple[bytes, ...], tuple[bytes, ...]]:
        """The head and tail of the call's success and dispatch forms; nothing when they cannot be cut around a
        path (then no start is foretold and no dispatch known, so neither is ever joined)."""
        return ((), ()) if self._forms is None else (self._forms.succeeded, self._forms.dispatched)

    def _foretell(self, pos: int) -> bytes | None:
        """The foretold start of the step at ``pos`` in path order; None past the last step or when none is."""
        return self._keys[pos].join(self._shapes[pos]) if pos < len(self._shapes) else None

    def _succeed(self, pos: int) -> bytes | None:
        """The foretold success of the step at ``pos`` in path order, if there is one."""
        return None if self._forms is None else self._keys[pos].join(self._forms.succeeded)

    def _sent(self, data: bytes) -> int | None:
        """The position of the step ``data`` is the dispatch of, in the codec's form; None if it is not one."""
        forms = self._forms
        if forms is None:
            return None
        head, tail = forms.dispatched
        if not (data.startswith(head) and data.endswith(tail)):
            return None
        return self._position(data[len(head):len(data) - len(tail)])

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
            self._positions = dict(zip(keys, range(len(self._order)), strict=False))  # keys may run on
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

    def shapes(self, steps: Sequence[StepNode]) -> list[tuple[bytes, bytes]]:
        """The head and tail of each step's start on the tab it names, in order; none when an action or tab no key
        can be made of (a list) forbids foretelling any."""
        try:
            return list(map(self.started.__getitem__, zip(map(_ACTION, steps), map(_TAB, steps), strict=True)))
        except TypeError:
            return []

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
