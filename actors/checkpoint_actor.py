"""The checkpoint actor: the store of the core behind one actor, swept on a timer."""

from __future__ import annotations

import threading
from typing import Any

import pykka

from actors.checkpoints import Checkpoint, CheckpointStore, DropReason

__all__ = ["CheckpointActor", "CheckpointsPort"]


class CheckpointActor(pykka.ThreadingActor):
    """Owns the checkpoint store; expired checkpoints are dropped every ``sweep_every`` seconds."""

    def __init__(self, store: CheckpointStore, sweep_every: float = 5.0) -> None:
        super().__init__()
        self._store = store
        self._sweep_every = sweep_every
        self._timer: threading.Timer | None = None

    def on_start(self) -> None:
        self._schedule()

    def on_stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
        self._store.close()

    def _schedule(self) -> None:
        self._timer = threading.Timer(self._sweep_every, self._tick)
        self._timer.daemon = True
        self._timer.start()

    def _tick(self) -> None:
        try:
            self.actor_ref.proxy().sweep()
        except pykka.ActorDeadError:
            return
        self._schedule()

    def keep(self, checkpoint: Checkpoint) -> str:
        return self._store.keep(checkpoint)

    def take(self, call: int, token: str) -> Checkpoint:
        return self._store.take(call, token)

    def put_back(self, call: int) -> None:
        self._store.put_back(call)

    def drop(self, call: int, reason: DropReason) -> None:
        self._store.drop(call, reason)

    def sweep(self) -> None:
        self._store.sweep()

    def calls(self) -> list[int]:
        return self._store.calls()


class CheckpointsPort:
    """The call service's view of the checkpoint actor (``actors.checkpoints.Checkpoints``)."""

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
