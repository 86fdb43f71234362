"""The replay (``messages.replay``): a call's records folded, the foretold ones without being parsed, into the log the
fold of its events gives, whatever form each record has."""

from __future__ import annotations

import json
from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from messages.codec import encode, replay
from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
    Event,
    OutlineStep,
    SessionChanged,
    StepDispatched,
    StepFailed,
    StepHeld,
    StepKept,
    StepObserved,
    StepOutcomeUnknown,
    StepSkipped,
    StepStarted,
    StepSucceeded,
    event_to_json,
)
from messages.replay import _Replay
from messages.steplog import fold

ACTIONS = st.sampled_from(["click", "pageText", 'say "0"', "100%", "ü", '"path":"0"'])
TABS = st.one_of(st.none(), st.integers(-2, 3))
LEAF = st.builds(OutlineStep, ACTIONS, TABS)
OUTLINE = st.lists(st.one_of(
    LEAF,
    st.builds(lambda tab, steps: OutlineStep("sequence", tab, steps=tuple(steps)), TABS, st.lists(LEAF, max_size=3)),
    st.builds(lambda seqs: OutlineStep("parallel", None, sequences=tuple(tuple(s) for s in seqs)),
              st.lists(st.lists(LEAF, min_size=1, max_size=2), max_size=2))), min_size=1, max_size=6).map(tuple)
WARNINGS = st.one_of(st.none(), st.sampled_from(["covered", "é \\ \"x\""]))


def paths(outline: tuple[OutlineStep, ...], prefix: str = "") -> list[tuple[str, OutlineStep]]:
    found: list[tuple[str, OutlineStep]] = []
    for i, step in enumerate(outline):
        path = f"{prefix}{i}"
        found.append((path, step))
        found += paths(step.steps, path + ".")
        for q, seq in enumerate(step.sequences):
            found += paths(seq, f"{path}.{q}.")
    return found


@st.composite
def calls(draw: st.DrawFn) -> list[Event]:
    """A call's events: a start, step events of every kind on its steps (mostly the foretold ones), a resume."""
    call = draw(st.sampled_from([1, 7, 10**12]))
    outline = draw(OUTLINE)
    steps = paths(outline)
    events: list[Event] = [CallStarted(call, "batch", outline, 60.0)]
    for _ in range(draw(st.integers(0, 25))):
        path, step = draw(st.sampled_from(steps))
        events.append(draw(st.sampled_from([
            StepStarted(call, path, step.action, step.tab_id), StepStarted(call, path, step.action, 9),
            StepSucceeded(call, path), StepSucceeded(call, path, draw(WARNINGS)), StepDispatched(call, path),
            BlockWriteSucceeded(call, path), StepFailed(call, path, "x", "e", draw(st.booleans())),
            StepOutcomeUnknown(call, path, "x", "e"), StepHeld(call, path, "x", "e"),
            StepSkipped(call, path, "stopped"),
            StepKept(call, path, 4), StepObserved(call, path, "applied"), StepObserved(call, path, "not_applied"),
            StepSucceeded(call + 1, path), StepDispatched(call + 1, path),
            SessionChanged(call, "opened", "a", "s", "call"),
            CallResumed(call, "batch", outline, 300.0, 1), CallEnded(call, "stopped")])))
    return events


@st.composite
def runs(draw: st.DrawFn) -> list[Event]:
    """A call of top-level steps as a node writes it: each started in path order, on its outline's tab or another,
    a write's dispatch written just before or after its start or ahead of its turn at any stride, each ended (most
    with a success) or left cut off; sometimes resumed."""
    call = draw(st.sampled_from([1, 10**12]))
    outline = tuple(draw(st.lists(st.builds(OutlineStep, st.sampled_from(["click", "pageText"]), TABS),
                                  min_size=1, max_size=12)))
    events: list[Event] = [CallStarted(call, "batch", outline, 60.0)]
    for i, step in enumerate(outline):
        sent = [StepDispatched(call, str(at)) for at in draw(st.lists(st.integers(i, len(outline) - 1), max_size=2))]
        before = draw(st.integers(0, len(sent)))  # those written before its start, then the others
        events += sent[:before]
        events.append(StepStarted(call, str(i), step.action, draw(st.sampled_from([step.tab_id, step.tab_id, 2]))))
        events += sent[before:]
        events.append(draw(st.sampled_from([
            StepSucceeded(call, str(i)), StepSucceeded(call, str(i)), StepSucceeded(call, str(i), "covered"),
            StepFailed(call, str(i), "x", "e", True), StepDispatched(call, str(i)),
            CallResumed(call, "batch", outline, 1.0, 1)])))
    return events


@given(runs(), st.lists(st.booleans(), max_size=40))
def test_a_replay_of_a_run_as_a_node_writes_it_is_the_fold_of_its_events(events: list[Event],
                                                                        loosely: list[bool]) -> None:
    """Dispatches written ahead at any stride, a step started on another tab, ends of every kind, a resume: the
    replay of the records, in the codec's form or another, is the fold of the events, whole."""
    wire = [loose(e) if i < len(loosely) and loosely[i] else encode(e) for i, e in enumerate(events)]
    assert replay(wire) == fold(events)
    assert replay(encode(e) for e in events) == fold(events)


def loose(event: Event) -> bytes:
    """The event's wire form as another writer might have written it: spaced, its fields in another order."""
    return json.dumps(dict(reversed(event_to_json(event).items())), indent=1).encode()


@given(calls(), st.lists(st.booleans(), max_size=30))
def test_a_replay_of_any_call_in_any_wire_form_is_the_fold_of_its_events(events: list[Event],
                                                                         loosely: list[bool]) -> None:
    """Records in the codec's form (most foretold, folded unparsed) and in others (parsed): the same log, whole."""
    wire = [loose(e) if i < len(loosely) and loosely[i] else encode(e) for i, e in enumerate(events)]
    assert replay(wire) == fold(events)
    assert replay(encode(e) for e in events) == fold(events)


def test_a_foretold_form_is_the_codecs_own() -> None:
    """What the layout foretells of each step (in path order) is byte for byte what ``codec.encode`` writes for its
    start on its outline's tab and its success without a warning, and a dispatch in the codec's form is known as
    its step's, by its path, from anywhere in the call."""
    outline = (OutlineStep("click", 3), OutlineStep("sequence", None, steps=(OutlineStep('a "b" 100%', 2),)))
    builder = _Replay()
    builder.apply_wire([encode(CallStarted(5, "batch", outline, 60.0))])
    for pos, (path, step) in enumerate(paths(outline)):
        assert (builder._foretell(pos), builder._succeed(pos)) == (encode(StepStarted(5, path, step.action,
                                                                                      step.tab_id)),
                                                                   encode(StepSucceeded(5, path)))
        assert builder._sent(encode(StepDispatched(5, path))) == pos
    assert builder._foretell(len(paths(outline))) is None


@pytest.mark.parametrize("record", [
    b'{"type":"StepDispatched","call":5,"path":"01"}', b'{"type":"StepDispatched","call":5,"path":"1 "}',
    b'{"type":"StepDispatched","call":5,"path":"' + b"9" * 5000 + b'"}',
    b'{"type":"StepDispatched","call":5,"path":"3"}',
    b'{"type":"StepDispatched","call":5,"path":"1.0.0"}', b'{"type":"StepDispatched","call":5,"path":"0","x":"1"}',
    b'{"type":"StepDispatched","call":5,"path":""}', b'{"type":"StepDispatched","call":5,"path":"}',
    b'{"type":"StepDispatched","call":5,"path":"0"} ', b'{"type":"StepDispatched","call":6,"path":"0"}',
    b'{"type":"StepDispatched","call":5,"path":"\\u0030"}'])
def test_a_record_not_in_the_codecs_form_of_a_dispatch_of_one_of_the_calls_steps_is_not_known_as_one(
        record: bytes) -> None:
    """Another path's text (a number written otherwise, one past the call's steps, one inside none), another field,
    another call: none is taken for a dispatch unparsed (a node reads it, and folds what it says)."""
    outline = (OutlineStep("click", 3), OutlineStep("sequence", None, steps=(OutlineStep("click", 2),)),
               OutlineStep("click", 3))
    builder = _Replay()
    builder.apply_wire([encode(CallStarted(5, "batch", outline, 60.0))])
    assert builder._sent(record) is None


def test_a_call_id_holding_the_mark_is_folded_record_by_record() -> None:
    """A call whose id's wire form holds the text the wire forms are cut at foretells nothing: its records are
    parsed, and the log is still the fold of its events."""
    call: Any = {"path": "0"}
    events: list[Event] = [CallStarted(call, "batch", (OutlineStep("click", 3), OutlineStep("click", 3)), 60.0),
                           StepStarted(call, "1", "click", 3), StepSucceeded(call, "1")]
    wire = [orjson.dumps(event_to_json(e)) for e in events]
    assert replay(wire) == fold(events)
    assert [r.status for r in replay(wire).steps] == ["skipped", "ok"]
