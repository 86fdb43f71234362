"""The checkpoint actor: the one owner of a node's checkpoint store, swept on a timer.

The store takes no lock; the actor alone touches it, on its own thread, and everything else
reaches it by a message through :class:`CheckpointsPort`.
"""

from __future__ import annotations

import threading
from typing import Any

import pykka

from core.checkpoints import Checkpoint, CheckpointStore, DropReason

__all__ = ["CheckpointActor", "CheckpointsPort"]


class _Sweep:
    """Drop the checkpoints that expired (the sweeper's tick)."""


class CheckpointActor(pykka.ThreadingActor):
    """Owns the checkpoint store (nobody else keeps it); what expired is dropped every ``sweep_every`` seconds."""

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

    def take(self, call: int, token: str, agent: str | None) -> Checkpoint:
        return self._store.take(call, token, agent)

    def put_back(self, call: int) -> None:
        self._store.put_back(call)

    def drop(self, call: int, reason: DropReason) -> None:
        self._store.drop(call, reason)

    def reissue(self, call: int, agent: str | None) -> str | None:
        return self._store.reissue(call, agent)

    def calls(self) -> list[int]:
        return self._store.calls()

    def count(self) -> int:
        return len(self._store)

    def describe(self) -> list[dict[str, object]]:
        return self._store.describe()


class CheckpointsPort:
    """The checkpoint actor's messages: the call service's ``core.checkpoints.Checkpoints``, and what the
    node and its metrics read (each an ask, answered on the actor's thread)."""

    def __init__(self, actor: pykka.ActorRef[CheckpointActor]) -> None:
        self._proxy: Any = actor.proxy()

    def keep(self, checkpoint: Checkpoint) -> str:
        return self._proxy.keep(checkpoint).get()  # type: ignore[no-any-return]

    def take(self, call: int, token: str, agent: str | None) -> Checkpoint:
        return self._proxy.take(call, token, agent).get()  # type: ignore[no-any-return]

    def put_back(self, call: int) -> None:
        self._proxy.put_back(call).get()

    def drop(self, call: int, reason: DropReason) -> None:
        self._proxy.drop(call, reason).get()

    def reissue(self, call: int, agent: str | None) -> str | None:
        """A new resume token for ``agent``'s held checkpoint of ``call`` (``CheckpointStore.reissue``)."""
        return self._proxy.reissue(call, agent).get()  # type: ignore[no-any-return]

    def calls(self) -> list[int]:
        """Calls with a checkpoint held (not being resumed), oldest first."""
        return self._proxy.calls().get()  # type: ignore[no-any-return]

    def count(self, timeout: float | None = None) -> int:
        """Checkpoints held, those being resumed included."""
        return self._proxy.count().get(timeout=timeout)  # type: ignore[no-any-return]

    def describe(self, timeout: float | None = None) -> list[dict[str, object]]:
        """Every checkpoint as metadata only (``CheckpointStore.describe``): never a token or a value."""
        return self._proxy.describe().get(timeout=timeout)  # type: ignore[no-any-return]
