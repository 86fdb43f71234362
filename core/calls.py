"""Container calls and their resumes: the engine, the checkpoint store and the planner together.

This is the application layer of the pure core (spec: Checkpoints, browser_resume, Errors).
The call actor runs it on the actor runtime; unit tests run it with fakes.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from core.checkpoints import Checkpoint, Checkpoints, WorkflowSource
from core.engine import EngineConfig, EventSinkPort, Ports, Prior, RunReport, run_call
from core.resume import plan_resume
from messages.commands import CallSpec
from messages.contract import RESUME_DEADLINE
from messages.errors import KitsuneError
from messages.events import Event
from messages.paths import StepPath
from messages.results import Failure, Result
from messages.steplog import StepRecord

V = TypeVar("V")

__all__ = ["CallAudit", "CallResponse", "Calls", "Listener", "SequentialIds", "last_opened_tab"]

Listener = Callable[[Event], None]
"""Hears one call's events as they happen, on the emitting thread."""


@dataclass(frozen=True, slots=True)
class CallResponse:
    """A container call's or resume's answer and its HTTP status."""

    body: dict[str, Any]
    http_status: int = 200


def last_opened_tab(body: Mapping[str, Any]) -> int | None:
    """The tab the last ``newTab`` or ``switchTab`` that succeeded in a call's answer opened or switched to
    (path order; None when none did): it becomes the agent's current tab, as after a direct newTab. Steps
    inside if, while, try and retry are not looked into (their progress records do not list their steps)."""
    opened = list(_opened(body.get("progress"), body.get("results")))
    return opened[-1] if opened else None


def _opened(records: Any, results: Any) -> Any:
    """The tabs ``newTab`` and ``switchTab`` steps among ``records`` (progress records) opened or switched to, by
    their ``results``."""
    if not isinstance(records, list) or not isinstance(results, list):
        return
    for record, result in zip(records, results, strict=False):  # trailing steps that never ran have no result
        if not isinstance(record, dict) or not isinstance(result, dict):
            continue
        nested = result.get("state") if "error" in result else result  # a failed block's results are its state's
        nested = nested if isinstance(nested, dict) else {}
        if (record.get("action") in ("newTab", "switchTab") and record.get("status") == "ok"
                and isinstance(result.get("tabId"), int)):
            yield result["tabId"]
        elif record.get("action") == "sequence":
            yield from _opened(record.get("steps"), nested.get("results"))
        elif record.get("action") == "parallel" and isinstance(record.get("sequences"), list):
            for steps, outs in zip(record["sequences"], nested.get("sequences") or [], strict=False):
                yield from _opened(steps, outs)


class CallAudit(Protocol):
    """Where container calls and resumes are recorded; a new call's id is its audit entry's."""

    def calling(self, spec: CallSpec, agent: str | None) -> Callable[[], int]:
        """Start recording a new container call without waiting: the wait for its call id (unique, increasing),
        which raises when it cannot be recorded."""

    def resume(self, call: int, agent: str | None) -> None:
        """Record a resume of ``call``."""


class SequentialIds:
    """Call ids 1, 2, 3, ... and no audit log (unit tests, benchmarks)."""

    def __init__(self) -> None:
        self._next = itertools.count(1)

    def calling(self, spec: CallSpec, agent: str | None) -> Callable[[], int]:
        call = next(self._next)
        return lambda: call

    def resume(self, call: int, agent: str | None) -> None:
        return None


class Calls:
    """Runs container calls, keeps checkpoints of those that did not finish ok, and resumes them.

    A checkpoint belongs to the agent whose call kept it: only that agent's resume finds it.

    ``ports`` gives the ports a call of an agent runs with (its policy sits in the driver).
    """

    def __init__(self, ports: Callable[[str | None], Ports], store: Checkpoints, *, audit: CallAudit,
                 sink: EventSinkPort, config: EngineConfig = EngineConfig(),
                 workflow_sha256: Callable[[str], str | None] = lambda name: None,
                 on_resume: Callable[[str, str | None], None] = lambda outcome, code: None,
                 on_end: Callable[[int, str, bool], None] = lambda call, status, kept: None) -> None:
        self._ports = ports
        self._on_end = on_end
        """Told of each call and resume that ran: its id, its status, and whether its checkpoint is kept
        (the node then ends its one-shot sessions, or keeps them for the resume)."""
        self._on_resume = on_resume
        """Told how each resume ended: ``ok``, failed, unknown, held, skipped, ``refused`` (nothing was
        run: an error answered) or ``internal_error``, with the error's code when there is one (metrics)."""
        self._store = store
        self._audit = audit
        self._sink = sink
        self._config = config
        self._workflow_sha256 = workflow_sha256

    def run(self, spec: CallSpec, workflow: WorkflowSource | None = None, agent: str | None = None,
            listener: Listener | None = None, call: int | Callable[[], int] | None = None) -> CallResponse:
        """Run a new call; keep a checkpoint when it did not finish ok. ``listener`` hears its events
        as they happen (a streaming request's progress); ``call``: its id, when it is recorded already, or the
        wait for it (:meth:`recording`)."""
        recorded = call if call is not None else self._audit.calling(spec, agent)
        call = recorded if isinstance(recorded, int) else recorded()
        report = run_call(call, spec, self._ports(agent), self._sink_for(listener), config=self._config)
        body = self._body(report, spec, workflow)
        if report.log.ended == "internal_error":
            self._on_end(call, "internal_error", False)
            return CallResponse({**_internal("internal_error", "The call stopped on an internal error"), **body}, 500)
        if report.log.status != "ok":
            checkpoint = Checkpoint(call, spec, _records(report), _for_checkpoint(report.results), report.claims,
                                    workflow, attempts=0, agent=agent)
            body |= {"call": call, "resume_token": self._store.keep(checkpoint)}
        self._on_end(call, report.log.status, report.log.status != "ok")
        return CallResponse(body)

    def recording(self, spec: CallSpec, agent: str | None) -> Callable[[], int]:
        """Start recording a new call before it is handed to its thread (its entry's round trip then overlaps the
        hand-over): the wait for its id, for :meth:`run`."""
        return self._audit.calling(spec, agent)

    def resume(self, call: int, token: str, observed: Any = None, agent: str | None = None,
               listener: Listener | None = None) -> CallResponse:
        """Continue a checkpointed call (spec: browser_resume); raise its errors before sending anything."""
        try:
            response = self._resume(call, token, observed, agent, listener)
        except KitsuneError as e:
            self._on_resume("refused", e.code)
            raise
        except BaseException:
            self._on_resume("internal_error", "internal_error")
            raise
        code = response.body.get("code")
        if code == "resume_failed":
            self._on_resume("internal_error", code)
        else:
            self._on_resume(str(response.body.get("status")), code if isinstance(code, str) else None)
        return response

    def _sink_for(self, listener: Listener | None) -> EventSinkPort:
        """The node's sink, or one that first tells ``listener`` each event of this call."""
        if listener is None:
            return self._sink
        sink = self._sink

        def heard(event: Event) -> Callable[[], None] | None:
            listener(event)
            return sink(event)

        return heard

    def _resume(self, call: int, token: str, observed: Any, agent: str | None,
                listener: Listener | None) -> CallResponse:
        checkpoint = self._store.take(call, token, agent)  # another agent's is not found
        try:
            if checkpoint.workflow is not None and \
                    self._workflow_sha256(checkpoint.workflow.name) != checkpoint.workflow.sha256:
                raise KitsuneError("workflow_changed", f"Workflow {checkpoint.workflow.name} changed or is gone "
                                   "since the call ran; nothing was sent", state={"workflow": checkpoint.workflow.name})
            plan = plan_resume(checkpoint.spec.commands, checkpoint.records, observed)
        except KitsuneError:
            self._store.put_back(call)
            raise
        prior = Prior(checkpoint.records, checkpoint.results, plan, checkpoint.claims, checkpoint.attempts + 1)
        try:
            self._audit.resume(call, agent)
            report = run_call(call, checkpoint.spec, self._ports(agent), self._sink_for(listener), config=self._config,
                              prior=prior, timeout=RESUME_DEADLINE)
        except BaseException:
            self._store.drop(call, "internal_error")
            raise
        body = self._body(report, checkpoint.spec, checkpoint.workflow)
        if report.log.ended == "internal_error":
            self._store.drop(call, "internal_error")
            self._on_end(call, "internal_error", False)
            return CallResponse({**_internal("resume_failed", "The resume stopped on an internal error; steps in "
                                             "progress may have taken effect"), **body})
        if report.log.status == "ok":
            self._store.drop(call, "resumed_ok")
            self._on_end(call, "ok", False)
            return CallResponse(body)
        refused = report.refused  # a refused sequence keeps its records for a later resume
        records = _graft(_records(report), checkpoint.records, refused)
        results = _graft(_for_checkpoint(report.results), checkpoint.results, refused)
        claims = {**report.claims, **{s: c for s, c in checkpoint.claims.items() if s in refused}}
        token_new = self._store.keep(Checkpoint(call, checkpoint.spec, records, results, claims, checkpoint.workflow,
                                                checkpoint.attempts + 1, agent))
        self._on_end(call, report.log.status, True)
        return CallResponse(body | {"call": call, "resume_token": token_new})

    def _body(self, report: RunReport, spec: CallSpec, workflow: WorkflowSource | None) -> dict[str, Any]:
        body = report.to_json()
        if workflow is not None:
            body["workflow"] = workflow.name
            body["steps"] = [{"index": r.index, "name": command.label or f"step {r.index}", "status": r.status}
                             for r, command in zip(report.log.steps, spec.commands, strict=True)]
        return body


def _records(report: RunReport) -> dict[str, StepRecord]:
    return {record.path: record for record in report.log.records()}


def _graft(new: Mapping[str, V], old: Mapping[str, V], sequences: frozenset[str]) -> dict[str, V]:
    """``new`` with the entries under each of ``sequences`` taken from ``old`` instead."""
    def under(path: str) -> bool:
        return any(StepPath(path).within(sequence) for sequence in sequences)
    return {p: v for p, v in new.items() if not under(p)} | {p: v for p, v in old.items() if under(p)}


def _for_checkpoint(results: Mapping[str, Result]) -> dict[str, Result]:
    """Results as a checkpoint keeps them: a hold's confirm token is never kept (nor honoured) there."""
    return {path: Failure(r.error, r.code, r.retryable, {k: v for k, v in r.state.items() if k != "confirm_token"})
            if isinstance(r, Failure) and r.state and "confirm_token" in r.state else r
            for path, r in results.items()}


def _internal(code: str, message: str) -> dict[str, Any]:
    return KitsuneError(code, message).to_json()
