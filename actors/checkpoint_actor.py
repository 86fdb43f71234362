"""The checkpoint actor: the store of the core behind one actor, swept on a timer."""

from __future__ import annotations

import threading
from typing import Any

import pykka

from core.checkpoints import Checkpoint, CheckpointStore, DropReason

__all__ = ["CheckpointActor", "CheckpointsPort"]


class _Sweep:
    """Drop the checkpoints that expired (the sweeper's tick)."""


class CheckpointActor(pykka.ThreadingActor):
    """Owns the checkpoint store; expired checkpoints are dropped every ``sweep_every`` seconds."""

    def __init__(self, store: CheckpointStore, sweep_every: float = 5.0) -> None:
        super().__init__()
        self._store = store
        self._sweep_every = sweep_every
        self._stopping = threading.Event()
        self._sweeper = threading.Thread(target=self._tick, name="kitsune-checkpoint-sweeper", daemon=True)

    def on_start(self) -> None:
        self._sweeper.start()

    def on_stop(self) -> None:
        self._stopping.set()
        self._sweeper.join(timeout=10)
        self._store.close()

    def _tick(self) -> None:
        """Every ``sweep_every`` seconds, until the actor stops, ask it to drop what expired."""
        while not self._stopping.wait(self._sweep_every):
            try:
                self.actor_ref.tell(_Sweep())
            except pykka.ActorDeadError:
                return

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, _Sweep):
            self._store.sweep()
        return None

    def keep(self, checkpoint: Checkpoint) -> str:
        return self._store.keep(checkpoint)

    def take(self, call: int, token: str) -> Checkpoint:
        return self._store.take(call, token)

    def put_back(self, call: int) -> None:
        self._store.put_back(call)

    def drop(self, call: int, reason: DropReason) -> None:
        self._store.drop(call, reason)

    def calls(self) -> list[int]:
        return self._store.calls()


class CheckpointsPort:
    """The call service's view of the checkpoint actor (``core.checkpoints.Checkpoints``)."""

    def __init__(self, actor: pykka.ActorRef[CheckpointActor]) -> None:
        self._proxy: Any = actor.proxy()

    def keep(self, checkpoint: Checkpoint) -> str:
        return self._proxy.keep(checkpoint).get()  # type: ignore[no-any-return]

    def take(self, call: int, token: str) -> Checkpoint:
        return self._proxy.take(call, token).get()  # type: ignore[no-any-return]

    def put_back(self, call: int) -> None:
        self._proxy.put_back(call).get()

    def drop(self, call: int, reason: DropReason) -> None:
        self._proxy.drop(call, reason).get()
