"""Stateful property tests of the resume invariants (spec: Checkpoints, browser_resume, Errors).

A Hypothesis state machine runs random container calls against the scripted driver, resumes
random checkpoints with random ``observed`` (valid and invalid), tries stale, replaced and wrong
tokens, moves the fake clock (past the 30 minutes of a checkpoint, too) and makes enough calls
to push checkpoints out. Every command has its own selector, so the driver's ``sent`` list tells
exactly which step reached the page. It checks, after every step:

1. a write that ran ok (the driver answered ok, or the caller reported it ``applied``) is
   never sent again;
2. a write whose outcome is unknown is sent again only by a resume whose ``observed``
   reports it ``not_applied``;
3. the store holds exactly the checkpoints a model of it expects, in the same order, and drops
   them for the expected reasons: the calls are several agents', each agent holds at most its
   own capacity (20 for one of them, as the spec's single agent), all together at most the
   total capacity; a keep pushes out its own agent's oldest, and another agent's only when the
   total forces it, then the oldest of the agent holding the most;
4. an expired, pushed-out or replaced token (or a wrong one) never works and sends nothing, and
   another agent's resume finds nothing, even with the owner's valid token, and changes nothing;
5. the fold of a run's events, also through the wire codec, is the response's progress,
   status and summary;

and that every resume error sends nothing. The fake clock is the only time: nothing sleeps.
"""

from __future__ import annotations

from collections import Counter, OrderedDict, deque
from dataclasses import dataclass
from typing import Any, Literal

import hypothesis.strategies as st
import pytest
from hypothesis import event, given, settings
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from core.calls import CallResponse
from messages.codec import decode, encode, replay
from messages.commands import parse_call
from messages.errors import KitsuneError
from messages.events import (
    BlockWriteSucceeded,
    CallEnded,
    CallResumed,
    CallStarted,
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
from messages.steplog import fold
from tests.unit.fakes import Sent, World

CAPACITY = 20
AGENTS = ("alice", "bob", "carol")
TTL = 1800.0
DEFAULT_TAB = 3
MAX_LEAVES = 8
"""At most 8 steps of 30 s each: a resume (300 s) never reaches its deadline, even in a parallel."""

ANSWERS = ("ok", "ok", "ok", "warn", "fail", "fail_retryable", "unknown", "hang", "hold")
STOPPING = ("fail", "fail_retryable", "unknown", "hang", "hold")
STATUS_OF = {"ok": "ok", "warn": "ok", "fail": "failed", "fail_retryable": "failed", "unknown": "unknown",
             "hang": "unknown", "hold": "held"}
"""The status a step must end with when the driver gave it this answer."""

WRITE_ACTIONS = ("click", "fill", "check", "submitForm")
READ_ACTIONS = ("pageText", "find")

leaf_shapes = st.tuples(st.booleans(), st.sampled_from(ANSWERS))
"""(writes, the driver's answer on the first run)."""


@st.composite
def call_shapes(draw: st.DrawFn) -> list[tuple[str, Any]]:
    """1 to 6 top-level items: leaves, sequences of 1-3 leaves, at most one parallel of 2 sequences."""
    items: list[tuple[str, Any]] = []
    budget = MAX_LEAVES
    has_parallel = False
    for _ in range(draw(st.integers(1, 6))):
        if budget == 0:
            break
        kind = draw(st.sampled_from(("leaf", "leaf", "leaf", "sequence", "parallel")))
        if kind == "parallel" and (has_parallel or budget < 2):
            kind = "leaf"
        if kind == "leaf":
            items.append(("leaf", draw(leaf_shapes)))
            budget -= 1
        elif kind == "sequence":
            steps = draw(st.lists(leaf_shapes, min_size=1, max_size=min(3, budget)))
            items.append(("sequence", steps))
            budget -= len(steps)
        else:
            first = draw(st.lists(leaf_shapes, min_size=1, max_size=min(3, budget - 1)))
            second = draw(st.lists(leaf_shapes, min_size=1, max_size=min(3, budget - len(first))))
            items.append(("parallel", [first, second]))
            budget -= len(first) + len(second)
            has_parallel = True
    return items


@dataclass(frozen=True)
class Leaf:
    """One generated command: its progress path and the unique key the driver sees."""

    call: int
    path: str
    key: str
    write: bool


@dataclass
class Held:
    """What the model expects of one checkpoint in the store."""

    call: int
    token: str
    expires_at: float
    progress: dict[str, dict[str, Any]]
    """The last response's progress records, by path."""
    results: list[Any]


def flatten(progress: list[dict[str, Any]], prefix: str = "") -> dict[str, dict[str, Any]]:
    """Progress records by path (containers included)."""
    out: dict[str, dict[str, Any]] = {}
    for record in progress:
        path = f"{prefix}{record['index']}"
        out[path] = record
        out |= flatten(record.get("steps", []), f"{path}.")
        for q, seq in enumerate(record.get("sequences", [])):
            out |= flatten(seq, f"{path}.{q}.")
    return out


class ResumeMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.world = World()
        self.capacity: dict[str | None, int] = {}
        """Each agent's capacity."""
        self.total_capacity = 0
        self.agent_of: dict[int, str] = {}
        """Every call's agent."""
        self.counter = 0
        self.leaves: dict[int, dict[str, Leaf]] = {}
        """Every call's leaves by path."""
        self.by_key: dict[str, Leaf] = {}
        self.held: OrderedDict[int, Held] = OrderedDict()
        """The model of the store: oldest first."""
        self.dead: list[tuple[int, str]] = []
        """Tokens that must never work again: replaced, or of a checkpoint that is gone."""
        self.drops: list[tuple[int, str]] = []
        """The drops the store must have reported, in order."""
        self.tokens: set[str] = set()
        """Every token issued."""
        self.ran_ok: set[str] = set()
        """Write keys that took effect: answered ok/warn by the driver, or reported applied."""
        self.unknown: set[str] = set()
        """Write keys whose last send ended unknown (the caller's not_applied must come with the resend)."""

    @initialize(capacities=st.tuples(*(st.sampled_from((CAPACITY, 1, 2, 5)) for _ in AGENTS)),
                total=st.sampled_from((500, 3, 8, 25)))
    def capacities(self, capacities: tuple[int, ...], total: int) -> None:
        """The agents' capacities and the store's total (first: the spec's 20 each, a total never reached)."""
        self.capacity = dict(zip(AGENTS, capacities, strict=True))
        self.total_capacity = total
        self.world = World(capacity_of=self.capacity.__getitem__, total_capacity=total)
        assert self.world.store.ttl == TTL

    # --- the model of the store ------------------------------------------------------------

    def _sweep(self) -> None:
        now = self.world.clock.now()
        for call in [c for c, h in self.held.items() if h.expires_at <= now]:
            event("checkpoint expired")
            self._forget(call, "expired")

    def _forget(self, call: int, reason: str) -> None:
        held = self.held.pop(call)
        self.dead.append((call, held.token))
        self.drops.append((call, reason))

    def _held_by(self, agent: str) -> list[int]:
        """``agent``'s calls in the model, oldest first."""
        return [c for c in self.held if self.agent_of[c] == agent]

    def _keep(self, call: int, body: dict[str, Any]) -> None:
        token = body["resume_token"]
        assert isinstance(token, str) and len(token) >= 32
        assert token not in self.tokens
        self.tokens.add(token)
        self._sweep()  # expired checkpoints never count against the 20
        self.held[call] = Held(call, token, self.world.clock.now() + TTL, flatten(body["progress"]),
                               body["results"])
        agent = self.agent_of[call]
        while len(self._held_by(agent)) > self.capacity[agent]:
            event("checkpoint pushed out by its own agent's capacity")
            self._forget(self._held_by(agent)[0], "pushed_out")
        while len(self.held) > self.total_capacity:
            # the agent holding the most; of equals, the one whose oldest is oldest
            most = min(self.held, key=lambda c: (-len(self._held_by(self.agent_of[c])), list(self.held).index(c)))
            event("checkpoint pushed out by the total capacity" if self.agent_of[most] == agent
                  else "another agent's checkpoint pushed out by the total capacity")
            self._forget(most, "pushed_out")

    # --- building calls ----------------------------------------------------------------------

    def _leaf_json(self, call: int, path: str, shape: tuple[bool, str], tab: int | None,
                   answers: dict[str, str]) -> dict[str, Any]:
        write, answer = shape
        self.counter += 1
        n = self.counter
        if write:
            action = WRITE_ACTIONS[n % len(WRITE_ACTIONS)]
            key = f"#w{n}"
        else:
            action = READ_ACTIONS[n % len(READ_ACTIONS)]
            key = f"#r{n}"
        raw: dict[str, Any] = {"action": action, "selector": key}
        if action == "fill":
            raw["value"] = "typed value"
        if tab is not None:
            raw["tabId"] = tab
        leaf = Leaf(call, path, key, write)
        self.leaves[call][path] = leaf
        self.by_key[key] = leaf
        answers[key] = answer
        return raw

    def _build(self, call: int, shape: list[tuple[str, Any]]) -> tuple[list[dict[str, Any]], dict[str, str]]:
        self.leaves[call] = {}
        answers: dict[str, str] = {}
        raw: list[dict[str, Any]] = []
        for i, (kind, item) in enumerate(shape):
            if kind == "leaf":
                raw.append(self._leaf_json(call, str(i), item, None, answers))
            elif kind == "sequence":
                raw.append({"action": "sequence", "steps": [
                    self._leaf_json(call, f"{i}.{j}", s, None, answers) for j, s in enumerate(item)]})
            else:
                raw.append({"action": "parallel", "sequences": [
                    [self._leaf_json(call, f"{i}.{q}.{j}", s, q + 1, answers) for j, s in enumerate(seq)]
                    for q, seq in enumerate(item)]})
        return raw, answers

    def _script(self, answers: dict[str, str]) -> None:
        for key, answer in answers.items():
            self.world.driver.script[key] = deque([answer])

    def _next_call_id(self) -> int:
        return len(self.leaves) + 1  # World numbers calls 1, 2, ... and only runs make new ones

    # --- checks ------------------------------------------------------------------------------

    def _check_fold(self, call: int, body: dict[str, Any], resumed: bool) -> list[Event]:
        """Invariant 5: the fold of the run's events (and of their wire form) is the response."""
        events = self.world.events_of(call)
        start = max(i for i, e in enumerate(events) if isinstance(e, CallStarted))
        run = events[start:]
        assert isinstance(run[0], CallResumed) == resumed
        assert isinstance(run[-1], CallEnded)
        wire = [decode(Event, encode(e)) for e in run]
        assert wire == run
        for log in (fold(run), fold(wire)):  # wire: decoded at the boundary
            assert log.progress == body["progress"]
            assert log.status == body["status"]
            assert log.summary == body["summary"]
        assert replay(encode(e) for e in run) == fold(run)  # as a node replays the stream: records folded as read
        return run

    def _check_sends(self, call: int, sends: list[Sent], answers: dict[str, str], observed: dict[str, Any],
                     before: dict[str, dict[str, Any]] | None, body: dict[str, Any], run: list[Event]) -> None:
        """Invariants 1 and 2, and that each step ended as the driver answered it."""
        now = flatten(body["progress"])
        leaves = self.leaves[call]
        for path, value in observed.items():  # the resume accepted them: nothing was refused
            key = leaves[path].key
            if value == "applied":
                self.ran_ok.add(key)
                self.unknown.discard(key)
                assert now[path]["status"] == "ok" and now[path].get("observed") == "applied", path
        counts = Counter(s.key for s in sends)
        for sent in sends:
            leaf = self.by_key[sent.key]
            assert leaf.call == call, f"call {call} sent {sent.key} of call {leaf.call}"
            assert counts[sent.key] == 1, f"{sent.key} sent {counts[sent.key]} times in one run"
            assert sent.write == leaf.write
            if leaf.write:
                assert sent.key not in self.ran_ok, \
                    f"invariant 1: write {sent.key} (step {leaf.path} of call {call}) ran ok and was sent again"
                if sent.key in self.unknown:
                    assert observed.get(leaf.path) == "not_applied", \
                        f"invariant 2: unknown write {sent.key} (step {leaf.path} of call {call}) sent again " \
                        f"without not_applied in this resume (observed={observed!r})"
                    event("unknown write sent again after not_applied")
            answer = answers[sent.key]
            assert now[leaf.path]["status"] == STATUS_OF[answer], (leaf.path, answer, now[leaf.path])
            assert "resumed" not in now[leaf.path]
            if leaf.write:
                if STATUS_OF[answer] == "ok":
                    self.ran_ok.add(sent.key)
                if STATUS_OF[answer] == "unknown":
                    self.unknown.add(sent.key)
                else:
                    self.unknown.discard(sent.key)
        succeeded = {e.path for e in run if isinstance(e, StepSucceeded)} | \
            {e.path for e in run if isinstance(e, StepObserved) and e.observed == "applied"}
        for path, leaf in leaves.items():
            if leaf.key in counts:
                continue
            record = now[path]
            if before is not None and before[path]["status"] == "ok":
                # no references in these calls: a step that was ok is kept, never sent again
                assert record["status"] == "ok" and record.get("resumed") == "kept", (path, record)
            elif observed.get(path) == "applied":
                assert path in succeeded
            else:
                assert record["status"] == "skipped", (path, record)
        wire = b"".join(encode(e) for e in run)
        assert not any(token.encode() in wire for token in self.tokens), "an event carries a resume token"

    def _answer(self, call: int, response: CallResponse, sends: list[Sent], answers: dict[str, str],
                observed: dict[str, Any], before: Held | None) -> None:
        assert response.http_status == 200, response.body
        body = response.body
        assert "code" not in body, body  # no internal error
        run = self._check_fold(call, body, before is not None)
        self._check_sends(call, sends, answers, observed, before.progress if before else None, body, run)
        if before is not None:
            self.dead.append((call, before.token))
            now = flatten(body["progress"])
            for i, result in enumerate(before.results):
                if now[str(i)].get("resumed") == "kept" and str(i) in self.leaves[call]:
                    assert body["results"][i] == result, (i, body["results"][i], result)
        if body["status"] == "ok":
            assert "call" not in body and "resume_token" not in body
            if before is not None:
                self.drops.append((call, "resumed_ok"))
        else:
            assert body["call"] == call
            self._keep(call, body)

    # --- rules -------------------------------------------------------------------------------

    def _run(self, agent: str, shape: list[tuple[str, Any]], *, stop_on_warning: bool, short: bool) -> None:
        call = self._next_call_id()
        self.agent_of[call] = agent
        raw, answers = self._build(call, shape)
        parallel = any(kind == "parallel" for kind, _ in shape)
        kind: Literal["batch", "parallel"] = "parallel" if parallel and len(shape) == 1 else "batch"
        timeout = 45.0 if short and not parallel else 3600.0 if parallel else 120.0
        spec = parse_call(kind, raw, default_tab=DEFAULT_TAB, stop_on_warning=stop_on_warning, timeout=timeout)
        self._script(answers)
        mark = len(self.world.driver.sent)
        response = self.world.calls.run(spec, agent=agent)
        assert self.world.events[-1].call == call
        self._answer(call, response, self.world.driver.sent[mark:], answers, {}, None)

    @rule(agent=st.sampled_from(AGENTS), shape=call_shapes(), stop_on_warning=st.booleans(), short=st.booleans())
    def new_call(self, agent: str, shape: list[tuple[str, Any]], stop_on_warning: bool, short: bool) -> None:
        self._run(agent, shape, stop_on_warning=stop_on_warning, short=short)

    @rule(agent=st.sampled_from(AGENTS),
          shapes=st.lists(st.tuples(st.booleans(), st.sampled_from(STOPPING)), min_size=3, max_size=25))
    def many_calls(self, agent: str, shapes: list[tuple[bool, str]]) -> None:
        """One agent's calls that keep checkpoints, enough to push older ones out."""
        for shape in shapes:
            self._run(agent, [("leaf", shape)], stop_on_warning=False, short=False)

    @rule(seconds=st.sampled_from((1.0, 30.0, 600.0, 1200.0, 1799.0, 1800.0, 1801.0, 3600.0)))
    def advance_clock(self, seconds: float) -> None:
        self.world.clock.advance(seconds)

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def resume(self, data: st.DataObject) -> None:
        self._sweep()  # take() sweeps first
        if not self.held:
            return
        call = data.draw(st.sampled_from(sorted(self.held)), label="call")
        held = self.held[call]
        leaves = self.leaves[call]
        observed = data.draw(self._observed(held, leaves), label="observed")
        answers = {leaf.key: data.draw(st.sampled_from(ANSWERS), label=f"answer {leaf.path}")
                   for leaf in leaves.values()}
        expected = predict(observed, held.progress, leaves)
        self._script(answers)
        mark = len(self.world.driver.sent)
        try:
            response = self.world.calls.resume(call, held.token, observed, agent=self.agent_of[call])
        except KitsuneError as e:
            assert self.world.driver.sent[mark:] == [], f"resume error {e.code} sent something"
            assert e.code == expected, (e.code, expected, e.state)
            event(f"resume refused: {e.code}")
            assert held.token not in str(e.to_json())
            return
        assert expected is None, f"expected {expected}, the resume ran: {response.body}"
        self.held.pop(call)
        event(f"resume ran: {response.body.get('status')}")
        self._answer(call, response, self.world.driver.sent[mark:], answers,
                     observed if isinstance(observed, dict) else {}, held)

    def _observed(self, held: Held, leaves: dict[str, Leaf]) -> st.SearchStrategy[Any]:
        @st.composite
        def build(draw: st.DrawFn) -> Any:
            mode = draw(st.sampled_from(("none", "valid", "valid", "valid", "invalid", "not_a_map")))
            if mode == "none":
                return None
            if mode == "not_a_map":
                return draw(st.sampled_from((["0"], "applied", 3)))
            observed: dict[str, Any] = {}
            for path, leaf in leaves.items():
                status = held.progress[path]["status"]
                if status not in ("unknown", "held", "failed"):
                    continue
                options = ("not_applied", "not_applied", "applied", None) if leaf.write and status == "unknown" \
                    else (None, None, "not_applied", "applied")
                value = draw(st.sampled_from(options))
                if value is not None:
                    observed[path] = value
            if mode == "invalid":
                bad: list[tuple[str, Any]] = [("9.9", "applied"), ("7", "not_applied")]
                bad += [(p, v) for p in leaves if held.progress[p]["status"] in ("ok", "skipped")
                        for v in ("applied", "not_applied")]
                bad += [(p, "applied") for p, r in held.progress.items() if r["action"] in ("sequence", "parallel")]
                bad += [(f"{p}.{q}", "not_applied") for p, r in held.progress.items() if r["action"] == "parallel"
                        for q in range(len(r["sequences"]))]
                bad += [(p, v) for p in leaves if held.progress[p]["status"] in ("unknown", "held", "failed")
                        for v in ("maybe", True, None)]
                path, value = draw(st.sampled_from(bad))
                observed[path] = value
            return observed
        return build()

    @precondition(lambda self: bool(self.held) or bool(self.dead))
    @rule(data=st.data())
    def resume_with_bad_token(self, data: st.DataObject) -> None:
        """Invariant 4: replaced, expired, pushed-out, finished or made-up tokens never work."""
        self._sweep()
        choices = [("dead", c, t) for c, t in self.dead] + [("wrong", c, "x" * 32) for c in self.held]
        if not choices:
            return
        _, call, token = data.draw(st.sampled_from(choices), label="token")
        expected = "resume_token_invalid" if call in self.held else "checkpoint_not_found"
        mark = len(self.world.driver.sent)
        events = len(self.world.events)
        stored = self.world.store.calls()
        try:
            response = self.world.calls.resume(call, token, None, agent=self.agent_of[call])
        except KitsuneError as e:
            assert e.code == expected, (e.code, expected)
            event(f"bad token: {e.code}")
            assert token not in str(e.to_json())
        else:
            raise AssertionError(f"token {token[:4]}... of call {call} worked: {response.body}")
        assert self.world.driver.sent[mark:] == [], "a refused resume sent something"
        assert len(self.world.events) == events
        assert self.world.store.calls() == stored

    @precondition(lambda self: bool(self.held))
    @rule(data=st.data())
    def resume_as_another_agent(self, data: st.DataObject) -> None:
        """Invariant 4: another agent's resume, even with the owner's valid token, is a call with no checkpoint."""
        self._sweep()
        if not self.held:
            return
        call = data.draw(st.sampled_from(sorted(self.held)), label="call")
        agent = data.draw(st.sampled_from([None, *(a for a in AGENTS if a != self.agent_of[call])]), label="agent")
        token = data.draw(st.sampled_from((self.held[call].token, "x" * 32)), label="token")
        mark, events, stored = len(self.world.driver.sent), len(self.world.events), self.world.store.calls()
        with pytest.raises(KitsuneError) as refused:
            self.world.calls.resume(call, token, None, agent=agent)
        with pytest.raises(KitsuneError) as unknown:
            self.world.calls.resume(10**9 + call, token, None, agent=self.agent_of[call])  # no such call
        assert (refused.value.code, refused.value.http_status) == ("checkpoint_not_found", 404)
        assert refused.value.to_json() == {**unknown.value.to_json(),
                                           "error": unknown.value.message.replace(str(10**9 + call), str(call))}
        assert self.world.driver.sent[mark:] == [] and len(self.world.events) == events
        assert self.world.store.calls() == stored  # not taken, not moved; the next resume proves its token
        event("resume by another agent: checkpoint_not_found")

    # --- invariants --------------------------------------------------------------------------

    @invariant()
    def store_matches_model(self) -> None:
        self._sweep()
        calls = self.world.store.calls()
        assert len(self.world.store) <= self.total_capacity
        for agent in AGENTS:
            assert self.world.store.count(agent) <= self.capacity[agent]
        # Same calls in the same order: a refused resume leaves its checkpoint "as it was" (spec: Errors),
        # so it keeps its place in the push-out order (the oldest is dropped first).
        assert calls == list(self.held), (calls, list(self.held))
        # An expired checkpoint may be swept (expired) or pushed out first: either way it is gone.
        actual = [(c, "expired" if r == "pushed_out" and (c, "expired") in self.drops else r)
                  for c, r in self.world.drops]
        assert actual == self.drops, (self.world.drops[-5:], self.drops[-5:])


def predict(observed: Any, progress: dict[str, dict[str, Any]], leaves: dict[str, Leaf]) -> str | None:
    """The error a resume with ``observed`` must answer (spec: What each step does, Errors), or None."""
    if observed is None:
        observed = {}
    if not isinstance(observed, dict):
        return "observed_invalid"
    for path, value in observed.items():
        record = progress.get(path)
        if record is None or record["action"] in ("sequence", "parallel") \
                or record["status"] in ("ok", "skipped") or value not in ("applied", "not_applied"):
            return "observed_invalid"
    for path, leaf in leaves.items():
        if leaf.write and progress[path]["status"] == "unknown" and path not in observed:
            return "observed_required"
    return None


ResumeMachine.TestCase.settings = settings(max_examples=60, stateful_step_count=30, deadline=None)
TestInvariants = ResumeMachine.TestCase


# --- the fold of any order of step events ------------------------------------------------------

OUTLINE = (OutlineStep("click", 3),
           OutlineStep("sequence", 3, steps=(OutlineStep("click", 3), OutlineStep("pageText", 3))),
           OutlineStep("parallel", None, sequences=((OutlineStep("fill", 4),), (OutlineStep("check", 5),))))
PATHS = ("0", "1", "1.0", "1.1", "2", "2.0.0", "2.1.0")
LEAVES = ("0", "1.0", "1.1", "2.0.0", "2.1.0")
step_events = st.tuples(st.sampled_from(PATHS), st.sampled_from((
    lambda p: StepStarted(1, p, "click", 3), lambda p: StepDispatched(1, p), lambda p: BlockWriteSucceeded(1, p),
    lambda p: StepSucceeded(1, p, "covered"), lambda p: StepFailed(1, p, "x", "e", True),
    lambda p: StepOutcomeUnknown(1, p, "x", "e"), lambda p: StepHeld(1, p, "x", "e"),
    lambda p: StepSkipped(1, p, "stopped"), lambda p: StepKept(1, p, 4), lambda p: StepObserved(1, p, "applied"),
    lambda p: StepObserved(1, p, "not_applied"), lambda p: CallResumed(1, "batch", OUTLINE, 300.0, 2)))).map(
    lambda pair: pair[1](pair[0]))


@given(st.lists(step_events, max_size=30))
def test_a_replay_folds_any_order_of_step_events_as_the_fold_does(events: list[Event]) -> None:
    """The replay's fast path (records folded into the nodes that become the records) is the fold of the
    events, whatever their order, and each step's status is what its events tell: the last terminal event's
    since its last start, else ``unknown`` once started or dispatched, else ``skipped``."""
    run: list[Event] = [CallStarted(1, "batch", OUTLINE, 60.0), *events]
    log = fold(run)
    assert replay(encode(e) for e in run) == log
    start = max(i for i, e in enumerate(run) if isinstance(e, CallStarted))
    for path in LEAVES:
        told = [e for e in run[start:] if getattr(e, "path", None) == path]
        since = told[max((i for i, e in enumerate(told) if isinstance(e, StepStarted)), default=0):]
        ended = [e for e in since if not isinstance(e, StepStarted | StepDispatched | BlockWriteSucceeded)
                 and not (isinstance(e, StepObserved) and e.observed == "not_applied")]
        begun = any(isinstance(e, StepStarted | StepDispatched) for e in since)
        expected = _ENDED[type(ended[-1])] if ended else "unknown" if begun else "skipped"
        assert log.find(path) is not None and log.find(path).status == expected  # type: ignore[union-attr]


_ENDED = {StepSucceeded: "ok", StepFailed: "failed", StepOutcomeUnknown: "unknown", StepHeld: "held",
          StepSkipped: "skipped", StepKept: "ok", StepObserved: "ok"}
