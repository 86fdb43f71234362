"""The resume planner (spec: What each step does, Errors): what a resume sends again.

Pure: from a checkpoint's commands and step records and the caller's ``observed``, it answers
a plan (a decision per step path) or refuses with ``observed_invalid`` / ``observed_required``
before anything is sent.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from core.engine import Decision
from messages.commands import Command, Parallel, Sequence, children, is_write, leaf_paths, own_references
from messages.errors import KitsuneError
from messages.paths import ROOT, StepPath
from messages.references import Ref
from messages.steplog import StepRecord

__all__ = ["accepts", "plan_resume"]

_OBSERVATIONS = ("applied", "not_applied")


def accepts(record: StepRecord) -> list[str]:
    """The observations a step accepts: only ``applied`` once a write inside its block ran ok."""
    return ["applied"] if record.wrote else list(_OBSERVATIONS)


def _needs_observation(record: StepRecord, command: Command) -> bool:
    """An unknown write, or a block in which a write already ran ok, is not resent unobserved."""
    return record.status != "ok" and (record.wrote or (record.status == "unknown" and is_write(command)))


def plan_resume(commands: tuple[Command, ...], records: Mapping[str, StepRecord], observed: Any) -> dict[str, Decision]:
    """Decide every step of a resume; raise ``observed_invalid`` or ``observed_required``."""
    leaves = [leaf for i, c in enumerate(commands) for leaf in leaf_paths(c, ROOT.child(i))]
    observations = _check_observed(observed, records)
    plan: dict[str, Decision] = {}
    required: list[dict[str, Any]] = []
    for path, command in leaves:
        record = records[path]
        given = observations.get(path)
        if record.status == "ok":
            plan[path] = "keep"
        elif given == "applied":
            plan[path] = "applied"
        elif _needs_observation(record, command) and given is None:
            required.append({"step": path, "action": record.action, "tabId": record.tab_id,
                             "status": record.status, "accepts": accepts(record)})
        else:
            plan[path] = "not_applied" if given == "not_applied" and record.status == "unknown" else "run"
    if required:
        raise KitsuneError(
            "observed_required",
            f"{len(required)} step(s) need an observation before the resume can send anything: "
            + ", ".join(s["step"] for s in required),
            state={"steps": required},
        )
    for i, command in enumerate(commands):
        _rerun_referenced_reads(command, ROOT.child(i), plan)
    return plan


def _check_observed(observed: Any, records: Mapping[str, StepRecord]) -> dict[str, str]:
    if observed is None:
        return {}
    if not isinstance(observed, dict):
        raise KitsuneError("observed_invalid", "observed must map step paths to \"applied\" or \"not_applied\"",
                           state={"steps": []})
    invalid: list[dict[str, Any]] = []
    for path, value in observed.items():
        record = records.get(path)
        reason = None
        if record is None:
            inside = any(StepPath(p).within(path) for p in records)
            reason = "container_block" if inside else "not_found"
        elif record.is_container:
            reason = "container_block"
        elif record.status in ("ok", "skipped"):
            reason = f"status_{record.status}"
        elif value not in accepts(record):
            reason = "value_not_accepted"
        if reason is not None:
            invalid.append({"step": path, "reason": reason,
                            "accepts": accepts(record) if record and not record.is_container
                            and record.status not in ("ok", "skipped") else []})
    if invalid:
        raise KitsuneError(
            "observed_invalid",
            "observed names steps it cannot apply to: " + ", ".join(f"{s['step']} ({s['reason']})" for s in invalid),
            state={"steps": invalid},
        )
    return dict(observed)


def _rerun_referenced_reads(command: Command, path: StepPath, plan: dict[str, Decision]) -> None:
    """Inside a sequence, an ok read whose result a step that will run uses runs again."""
    if isinstance(command, Sequence):
        _rerun_in_scope(command.steps, path, plan)
    elif isinstance(command, Parallel):
        for q, seq in enumerate(command.sequences):
            _rerun_in_scope(seq, path.child(q), plan)


def _rerun_in_scope(steps: tuple[Command, ...], within: StepPath, plan: dict[str, Decision]) -> None:
    """The steps of one list (at ``within.i``), last first: a read a later step will use runs again."""
    needed: set[int] = set()
    for index in range(len(steps) - 1, -1, -1):
        command, path = steps[index], within.child(index)
        if index in needed and not isinstance(command, Sequence | Parallel) and not is_write(command) \
                and plan.get(path) == "keep":
            plan[path] = "run"
        if any(plan.get(p) in ("run", "not_applied") for p, _ in leaf_paths(command, path)):
            needed.update(ref.step for ref in _scope_references(command))
        _rerun_referenced_reads(command, path, plan)


def _scope_references(command: Command) -> list[Ref]:
    """References from ``command`` into its own list's steps (not from inside a nested sequence)."""
    found = [ref for _, ref in own_references(command)]
    if not isinstance(command, Sequence | Parallel):
        for child in children(command):
            found += _scope_references(child.command)
    return found
