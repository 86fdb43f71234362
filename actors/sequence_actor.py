"""Sequence actors run the sequences of a parallel; the barrier actor lets them meet (``syncBarrier``)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pykka

__all__ = ["ActorSequences", "BarrierActor", "SequenceActor"]


@dataclass(frozen=True, slots=True)
class RunSequence:
    """Run one sequence of a parallel to its end."""

    job: Callable[[], None]


class SequenceActor(pykka.ThreadingActor):
    """One sequence of a parallel, on its own thread."""

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, RunSequence):
            message.job()
        return None


@dataclass(frozen=True, slots=True)
class Arrive:
    """A sequence reached a barrier; ``reply`` is set to True when all ``parties`` are there, False on abort."""

    key: str
    parties: int
    reply: pykka.ThreadingFuture[bool] = field(compare=False)


@dataclass(frozen=True, slots=True)
class Withdraw:
    """A sequence stopped waiting (its timeout passed)."""

    key: str
    reply: pykka.ThreadingFuture[bool] = field(compare=False)


@dataclass(frozen=True, slots=True)
class Abort:
    """A party will not come: release everyone waiting at ``key`` (now and later) with False."""

    key: str


@dataclass(frozen=True, slots=True)
class Discard:
    """Every sequence that meets at ``key`` has ended."""

    key: str


@dataclass(frozen=True, slots=True)
class AbortAll:
    """The node is stopping: release everyone waiting at any barrier, now and later, with False."""


class BarrierActor(pykka.ThreadingActor):
    """Where sequences meet: arrivals are messages, a meeting answers every waiting sequence."""

    def __init__(self) -> None:
        super().__init__()
        self._waiting: dict[str, list[pykka.ThreadingFuture[bool]]] = {}
        self._aborted: set[str] = set()
        self._stopping = False

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, Arrive):
            if message.key in self._aborted or self._stopping:
                message.reply.set(False)
                return None
            waiting = self._waiting.setdefault(message.key, [])
            waiting.append(message.reply)
            if len(waiting) >= message.parties:
                for reply in waiting:
                    reply.set(True)
                waiting.clear()
        elif isinstance(message, Withdraw):
            waiting = self._waiting.get(message.key, [])
            if message.reply in waiting:
                waiting.remove(message.reply)
        elif isinstance(message, Abort):
            self._aborted.add(message.key)
            for reply in self._waiting.pop(message.key, []):
                reply.set(False)
        elif isinstance(message, Discard):
            self._aborted.discard(message.key)
            self._waiting.pop(message.key, None)
        elif isinstance(message, AbortAll):
            self._stopping = True
            for replies in self._waiting.values():
                for reply in replies:
                    reply.set(False)
            self._waiting.clear()
        return None


class ActorSequences:
    """The engine's ``Sequences`` port: a sequence actor per sequence, the barrier actor for meetings."""

    def __init__(self, barriers: pykka.ActorRef[BarrierActor]) -> None:
        self._barriers = barriers

    def run_all(self, jobs: list[Callable[[], None]]) -> None:
        actors = [SequenceActor.start() for _ in jobs]
        try:
            answers = [actor.ask(RunSequence(job), block=False) for actor, job in zip(actors, jobs, strict=True)]
            errors = []
            for answer in answers:
                try:
                    answer.get()
                except Exception as e:  # re-raised once every sequence has ended
                    errors.append(e)
            if errors:
                raise errors[0]
        finally:
            for actor in actors:
                actor.stop()

    def barrier(self, key: str, parties: int, timeout: float) -> bool:
        reply: pykka.ThreadingFuture[bool] = pykka.ThreadingFuture()
        self._barriers.tell(Arrive(key, parties, reply))
        try:
            return bool(reply.get(timeout=timeout))
        except pykka.Timeout:
            self._barriers.ask(Withdraw(key, reply))
        try:  # the meeting may have happened just before the withdrawal
            return bool(reply.get(timeout=0))
        except pykka.Timeout:
            return False

    def abort(self, key: str) -> None:
        self._barriers.tell(Abort(key))

    def discard(self, key: str) -> None:
        self._barriers.tell(Discard(key))

    def abort_all(self) -> None:
        """Release every sequence waiting at a barrier, and those that arrive later (the node stops)."""
        self._barriers.tell(AbortAll())
