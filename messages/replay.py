"""The replay: a call's step log rebuilt from its events' wire forms (the records of its stream), in order.

Most of a call's records are its steps' starts, dispatches and successes, and its layout foretells each of them
byte for byte: a step's start on the tab its outline names, its dispatch, its success without a warning, each in the
wire form the codec writes (``event_to_json`` serialized by orjson). When a call is laid out, those wire forms are
mapped to their steps' nodes, and a record equal to one is folded from the map, not parsed: orjson would parse it to
exactly that event's fields. Any other record is parsed and folded as its fields say (a step's start, dispatch or
success read from them; any other event decoded first), so the log is the same either way.
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
    """A builder that folds records: the foretold ones from the map of wire forms to what each tells."""

    def __init__(self) -> None:
        super().__init__()
        self._foretold: dict[bytes, tuple[str, StepNode, Any]] = {}
        """The wire form of each step event the layout foretells: its kind, its step's node, its tab or warning."""

    def apply_wire(self, wire: Iterable[bytes]) -> None:
        """Fold events in, given in their wire form (``codec.encode``), in order."""
        foretold, nodes = self._foretold, self._nodes
        for data in wire:
            told = foretold.get(data)
            if told is not None:  # all but a few of a call's records
                kind, node, value = told
            else:
                record = orjson.loads(data)
                kind = record["type"]
                if kind == _SUCCEEDED:
                    node, value = nodes[record["path"]], record["warning"]
                elif kind == _STARTED:
                    node, value = nodes[record["path"]], record["tab_id"]
                elif kind == _DISPATCHED:
                    node, value = nodes[record["path"]], None
                else:
                    if kind in _STARTS:
                        self._start(record["call"], record["call_kind"], record["timeout"], record["outline"])
                    else:
                        self.apply(event_from_json(record))
                    foretold, nodes = self._foretold, self._nodes
                    continue
            if kind == _SUCCEEDED:
                node.status = "ok"
                node.warning = value
            elif kind == _STARTED:
                if node.status is None and not node.wrote:  # its first start: nothing to clear
                    node.status = "unknown"
                    node.tab_id = value
                else:
                    node_started(node, value)
            else:
                node.dispatched = True
                if node.status is None:
                    node.status = "unknown"

    def _start(self, call: int, kind: str, timeout: float, outline: Sequence[Mapping[str, Any]]) -> None:
        super()._start(call, kind, timeout, outline)
        self._foretold = self._foretell(call)

    def _foretell(self, call: int) -> dict[bytes, tuple[str, StepNode, Any]]:
        """The wire forms of the step events the layout foretells, each with what it tells: none when one of them
        cannot be cut around its path (a call id that holds the very text of the mark)."""
        foretold: dict[bytes, tuple[str, StepNode, Any]] = {}
        succeeded, dispatched = _form(StepSucceeded(call, _MARK)), _form(StepDispatched(call, _MARK))
        starts: dict[tuple[str, Any], bytes | None] = {}
        try:
            for path, node in self._nodes.items():
                key = path.encode()
                shape = (node.action, node.tab_id)
                if shape not in starts:
                    starts[shape] = _form(StepStarted(call, _MARK, node.action, node.tab_id))
                started = starts[shape]
                if succeeded is None or dispatched is None or started is None:
                    return {}
                foretold[succeeded % key] = (_SUCCEEDED, node, None)
                foretold[dispatched % key] = (_DISPATCHED, node, None)
                foretold[started % key] = (_STARTED, node, node.tab_id)
        except TypeError:  # an outline's action or tab no key can be made of (a list): nothing foretold
            return {}
        return foretold


def _form(event: StepEvent) -> bytes | None:
    """The wire form of ``event`` (whose path is the mark) as a template its path's text fills (``%b``); None when
    the mark shows in it elsewhere too."""
    wire = orjson.dumps(event_to_json(event))
    if wire.count(_MARKED) != 1:
        return None
    head, _, tail = wire.partition(_MARKED)
    return head.replace(b"%", b"%%") + b'"path":"%b"' + tail.replace(b"%", b"%%")
