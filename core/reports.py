"""What a run starts from and what it reports (``core.engine``): the engine's settings, a resume's prior state, the
run's report."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

from messages.contract import STEP_TIMEOUT
from messages.paths import ROOT
from messages.results import Result, result_to_json
from messages.steplog import StepLog, StepRecord

__all__ = ["Decision", "EngineConfig", "Prior", "RunReport", "trimmed"]

Decision = Literal["keep", "run", "applied", "not_applied"]
"""What a resume does with a step: reuse it, send it, mark it ok unsent, or send it after observation."""


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
        return trimmed([self.results.get(ROOT.child(i)) for i in range(len(self.log.steps))])

    def to_json(self) -> dict[str, Any]:
        """``results``, ``progress``, ``status`` and ``summary`` (spec: Checkpoints)."""
        return {"results": self.results_json(), "progress": self.log.progress, "status": self.log.status,
                "summary": self.log.summary}


def trimmed(results: list[Result | None]) -> list[dict[str, Any] | None]:
    """Results as JSON; trailing steps that never ran are left out, others are null."""
    out = [result_to_json(r) for r in results]
    while out and out[-1] is None:
        out.pop()
    return out
