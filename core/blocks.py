"""The one-step blocks (if, while, try, retry, broadcast, a sequence inside a block): how each runs.

A block is one step of its list (spec: What each step does): everything it sends is under the
block's path, and it is resumed as one. The engine runs each block through :func:`run_block`
with the :class:`Body` of that step, which runs the commands inside it.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, Protocol

from messages.commands import (
    Broadcast,
    Command,
    If,
    Js,
    Retry,
    Sequence,
    Try,
    While,
    resolve_command,
    secret_values,
)
from messages.errors import KitsuneError
from messages.references import Ref
from messages.results import Done, Failed, Failure, HeldForApproval, Ok, Outcome, Result, Unknown, result_to_json

__all__ = ["Body", "Lookup", "lookup_in", "outcome_json", "run_block", "scrub", "tab_of"]


Lookup = Callable[[int], Any]
"""The result of step N of a list, for ``${$N...}`` (None for a step that has none)."""


class Body(Protocol):
    """The step a block is, as the block's commands run in it."""

    @property
    def secrets(self) -> list[str]:
        """The typed values and JavaScript bodies of the step so far; a command's are added before it runs."""

    @property
    def dispatched(self) -> bool:
        """Whether a write of the step was recorded as sent."""

    def perform(self, command: Command, tab: int | None, lookup: Lookup) -> Outcome:
        """Run one resolved command inside the block (an action, or a block nested in it)."""

    def remaining(self) -> float:
        """Seconds left before the container's deadline."""

    def sleep(self, seconds: float) -> None:
        """Wait (on the run's clock)."""


def run_block(command: Command, tab: int | None, lookup: Lookup, body: Body) -> Outcome | None:
    """Run ``command`` if it is a one-step block; None if it is an action.

    ``lookup`` gives the results of the earlier steps of the block's list (``${$N}``).
    """
    if isinstance(command, If):
        return _if(command, tab, lookup, body)
    if isinstance(command, While):
        return _while(command, tab, lookup, body)
    if isinstance(command, Try):
        return _try(command, tab, lookup, body)
    if isinstance(command, Retry):
        return _retry(command, tab, lookup, body)
    if isinstance(command, Broadcast):
        return _broadcast(command, lookup, body)
    if isinstance(command, Sequence):
        return _sequence(command, tab, body)
    return None


def _run(commands: tuple[Command, ...], tab: int | None, lookup: Lookup,
         body: Body) -> tuple[Outcome, list[dict[str, Any] | None]]:
    """Run the commands inside a block in order, stopping at the first that is not done."""
    results: list[dict[str, Any] | None] = []
    for command in commands:
        try:
            resolved = resolve_command(command, lookup)
            body.secrets.extend(secret_values(resolved))
            outcome = body.perform(resolved, tab_of(resolved, lookup, tab), lookup)
        except KitsuneError as e:
            outcome = Failed(Failure.of(e))
        if not isinstance(outcome, Done):
            outcome = type(outcome)(scrub(outcome.failure, body.secrets))
        results.append(outcome_json(outcome))
        if not isinstance(outcome, Done):
            return outcome, results
    return Done({"results": results}), results


def _sequence(command: Sequence, tab: int | None, body: Body) -> Outcome:
    """A sequence inside a block: its steps reference each other, and it is part of the block's step."""
    scope: list[Result | None] = []
    for step in command.steps:
        outcome, _ = _run((step,), tab, lookup_in(scope), body)
        scope.append(Ok(outcome.value, outcome.warning) if isinstance(outcome, Done) else outcome.failure)
        if not isinstance(outcome, Done):
            return outcome
    return Done({"results": [result_to_json(r) for r in scope]})


def _condition(code: str | Any, tab: int | None, lookup: Lookup, body: Body) -> Outcome:
    assert isinstance(code, str)
    return body.perform(Js(code=code, tab_id=tab), tab, lookup)


def _if(command: If, tab: int | None, lookup: Lookup, body: Body) -> Outcome:
    condition = _condition(command.condition, tab, lookup, body)
    if not isinstance(condition, Done):
        return condition
    branch = "then" if condition.value.get("value") else "else"
    outcome, results = _run(command.then if branch == "then" else command.otherwise, tab, lookup, body)
    return Done({"branch": branch, "results": results}) if isinstance(outcome, Done) else outcome


def _while(command: While, tab: int | None, lookup: Lookup, body: Body) -> Outcome:
    for iteration in range(command.max_iterations + 1):
        condition = _condition(command.condition, tab, lookup, body)
        if not isinstance(condition, Done):
            return condition
        if not condition.value.get("value"):
            return Done({"iterations": iteration})
        if iteration == command.max_iterations:
            break
        outcome, _ = _run(command.body, tab, lookup, body)
        if not isinstance(outcome, Done):
            return outcome
    return Failed(Failure(f"while reached maxIterations ({command.max_iterations})", "max_iterations", False))


def _try(command: Try, tab: int | None, lookup: Lookup, body: Body) -> Outcome:
    outcome, results = _run(command.body, tab, lookup, body)
    if not isinstance(outcome, Failed) or not command.catch:
        return outcome
    caught, catch_results = _run(command.catch, tab, lookup, body)
    if isinstance(caught, Done):
        return Done({"caught": outcome.failure.to_json(), "results": results, "catch": catch_results})
    return caught


def _retry(command: Retry, tab: int | None, lookup: Lookup, body: Body) -> Outcome:
    """Attempts again after a failure that is retryable or sent nothing, while the deadline allows."""
    delay = command.delay if isinstance(command.delay, float) else 0.0
    outcome: Outcome = Failed(Failure("retry made no attempt", "internal", False))
    for attempt in range(1, command.attempts + 1):
        sent_before = body.dispatched
        outcome, results = _run(command.body, tab, lookup, body)
        if isinstance(outcome, Done):
            return Done({"attempts": attempt, "results": results})
        sent = body.dispatched and not sent_before
        if not isinstance(outcome, Failed) or not (outcome.failure.retryable or not sent):
            return outcome
        if attempt < command.attempts:
            if body.remaining() <= delay:
                return outcome
            body.sleep(delay)
    return outcome


def _broadcast(command: Broadcast, lookup: Lookup, body: Body) -> Outcome:
    """The command on each tab in turn; the worst outcome (unknown, held, failed) carries every tab's result."""
    outcomes: list[Outcome] = []
    per_tab: list[dict[str, Any]] = []
    for target in command.tab_ids:
        assert isinstance(target, int)
        outcome, results = _run((command.command,), target, lookup, body)
        outcomes.append(outcome)
        own = results[-1] if results else outcome_json(outcome)  # the command's own result on this tab
        per_tab.append({"tabId": target, **(own or {})})
    for kind in (Unknown, HeldForApproval, Failed):
        failing = next((o for o in outcomes if isinstance(o, kind)), None)
        if failing is not None:
            assert not isinstance(failing, Done)
            f = failing.failure
            return type(failing)(Failure(f.error, f.code, f.retryable, {"results": per_tab}))
    return Done({"results": per_tab})


def tab_of(command: Command, lookup: Lookup, tab: int | None) -> int | None:
    """The tab ``command`` acts on: its own ``tabId`` (a reference followed), else ``tab`` where it takes one."""
    if command.tab_id is None:
        return tab if command.acts_on_tab or isinstance(command, Sequence) else None
    value = resolve_command(command, lookup).tab_id if isinstance(command.tab_id, Ref) else command.tab_id
    assert value is None or isinstance(value, int)
    return value


def lookup_in(scope: list[Result | None], end: int | None = None) -> Lookup:
    """``${$N}`` in a list whose earlier steps' results are ``scope`` (its first ``end`` alone, when given: a step's
    view of its list, no copy; a result once set is never changed)."""
    limit = len(scope) if end is None else end

    def result_of(step: int) -> Any:
        return result_to_json(scope[step]) if 0 <= step < limit else None
    return result_of


def outcome_json(outcome: Outcome) -> dict[str, Any] | None:
    """An outcome as a result in the JSON of a block's results."""
    if isinstance(outcome, Done):
        return Ok(outcome.value, outcome.warning).to_json()
    return outcome.failure.to_json()


def scrub(failure: Failure, secrets: list[str]) -> Failure:
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
