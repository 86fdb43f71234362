"""Step results and statuses.

A result is ``{"ok": true, ...}`` or ``{"error", "code", "retryable", "state"?}``; a step's
status is one of ok, unknown, held, failed, skipped (spec: Checkpoints, Container progress).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from messages.errors import KitsuneError

__all__ = [
    "STATUSES", "Done", "Failed", "Failure", "HeldForApproval", "Ok", "Outcome", "Result", "Status", "Unknown",
    "outcome_from_json", "outcome_to_json", "result_from_json", "result_to_json", "status_of", "worst",
]

Status = Literal["ok", "unknown", "held", "failed", "skipped"]
STATUSES: tuple[Status, ...] = ("ok", "unknown", "held", "failed", "skipped")
"""In the order a summary counts them."""

_SEVERITY: Mapping[Status, int] = {"ok": 0, "skipped": 1, "failed": 2, "held": 3, "unknown": 4}


def worst(statuses: list[Status]) -> Status:
    """The status of a container: unknown, then held, failed, skipped; ok when all are ok."""
    return max(statuses, key=_SEVERITY.__getitem__, default="ok")


@dataclass(frozen=True, slots=True)
class Ok:
    """A step that did what it was asked."""

    value: Mapping[str, Any] = field(default_factory=dict)
    """What the step returned, beside ``ok``."""
    warning: str | None = None
    """Something the caller should look at; stops the call under ``stopOnWarning``."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"ok": True, **self.value}
        if self.warning is not None:
            out["warning"] = self.warning
        return out


@dataclass(frozen=True, slots=True)
class Failure:
    """A step that did not do what it was asked, or whose outcome is not known."""

    error: str
    """What happened, for a person; never holds a secret."""
    code: str
    """Machine-readable code (``timeout``, ``not_found``, ``tab_closed``, ...)."""
    retryable: bool = False
    """Whether sending it again may succeed."""
    state: Mapping[str, Any] | None = None
    """Details (confirm token of a hold, the tab, ...)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {"error": self.error, "code": self.code, "retryable": self.retryable}
        if self.state is not None:
            out["state"] = dict(self.state)
        return out

    @classmethod
    def of(cls, error: KitsuneError) -> Failure:
        """The failure an exception stands for."""
        return cls(error.message, error.code, error.retryable, error.state)


Result = Ok | Failure


def result_to_json(result: Result | None) -> dict[str, Any] | None:
    """A result's wire form (``None`` for a step that never ran)."""
    return None if result is None else result.to_json()


def result_from_json(data: Mapping[str, Any] | None) -> Result | None:
    """Parse a result's wire form back."""
    if data is None:
        return None
    if data.get("ok") is True:
        value = {k: v for k, v in data.items() if k not in ("ok", "warning")}
        return Ok(value, data.get("warning"))
    return Failure(data["error"], data["code"], bool(data["retryable"]), data.get("state"))


# --- outcomes: what a driver answers for one action ------------------------------------------


@dataclass(frozen=True, slots=True)
class Done:
    """The page did what the command asked."""

    value: Mapping[str, Any] = field(default_factory=dict)
    """What it returned."""
    warning: str | None = None
    """Something the caller should look at."""


@dataclass(frozen=True, slots=True)
class Failed:
    """It failed, and nothing took effect (or sending it again is safe: ``retryable``)."""

    failure: Failure


@dataclass(frozen=True, slots=True)
class Unknown:
    """It was sent, and whether it took effect is not known."""

    failure: Failure


@dataclass(frozen=True, slots=True)
class HeldForApproval:
    """Ask-before-act held it; nothing was sent."""

    failure: Failure


Outcome = Done | Failed | Unknown | HeldForApproval

def status_of(outcome: Outcome) -> Status:
    """The step status an outcome is: ok, failed, unknown or held."""
    return _STATUS_OF[type(outcome)]


_STATUS_OF: Mapping[type, Status] = {Done: "ok", Failed: "failed", Unknown: "unknown", HeldForApproval: "held"}

_OUTCOME_KINDS: Mapping[str, type[Failed | Unknown | HeldForApproval]] = {
    "failed": Failed, "unknown": Unknown, "held": HeldForApproval,
}


def outcome_to_json(outcome: Outcome) -> dict[str, Any]:
    """An outcome's wire form: ``{"outcome": "done"|"failed"|"unknown"|"held", ...}``."""
    if isinstance(outcome, Done):
        return {"outcome": "done", "value": dict(outcome.value), "warning": outcome.warning}
    kind = next(k for k, cls in _OUTCOME_KINDS.items() if isinstance(outcome, cls))
    return {"outcome": kind, "failure": outcome.failure.to_json()}


def outcome_from_json(data: Mapping[str, Any]) -> Outcome:
    """Parse an outcome's wire form back."""
    if data["outcome"] == "done":
        return Done(data["value"], data["warning"])
    failure = result_from_json(data["failure"])
    assert isinstance(failure, Failure)
    return _OUTCOME_KINDS[data["outcome"]](failure)
