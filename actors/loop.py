"""The node's event loop, as actors see it.

Actors are threads; IO (nats-py, Playwright) runs on one asyncio loop. An actor submits a
coroutine and blocks only its own thread (:meth:`IoLoop.run`). The other way round, code on the
loop never awaits a pykka future (its ``__await__`` blocks the loop): :func:`ask_from_loop`
hands the actor a callback that resolves an asyncio future through ``call_soon_threadsafe``.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pykka

__all__ = ["Answering", "IoLoop", "LoopRequest", "ask_from_loop"]

T = TypeVar("T")


class IoLoop:
    """An asyncio loop on its own thread (or one already running, e.g. under uvicorn)."""

    def __init__(self, loop: asyncio.AbstractEventLoop | None = None) -> None:
        self._thread: threading.Thread | None = None
        if loop is None:
            loop = asyncio.new_event_loop()
            self._thread = threading.Thread(target=self._serve, args=(loop,), name="kitsune-io", daemon=True)
            self._thread.start()
        self.loop = loop

    @staticmethod
    def _serve(loop: asyncio.AbstractEventLoop) -> None:
        asyncio.set_event_loop(loop)
        loop.run_forever()

    def run(self, coroutine: Coroutine[Any, Any, T], timeout: float | None = None) -> T:
        """Run ``coroutine`` on the loop and wait for it on this (non-loop) thread.

        Lighter than ``asyncio.run_coroutine_threadsafe`` (one thread hop each way, no chained
        futures): a step makes several of these. On timeout the task is cancelled.
        """
        done: concurrent.futures.Future[T] = concurrent.futures.Future()
        tasks: list[asyncio.Task[T]] = []

        def settle(task: asyncio.Task[T]) -> None:
            if task.cancelled():
                done.cancel()
            elif (error := task.exception()) is not None:
                done.set_exception(error)
            else:
                done.set_result(task.result())

        def start() -> None:
            task = self.loop.create_task(coroutine)
            tasks.append(task)
            task.add_done_callback(settle)

        self.loop.call_soon_threadsafe(start)
        try:
            return done.result(timeout)
        except concurrent.futures.TimeoutError:
            self.loop.call_soon_threadsafe(lambda: [task.cancel() for task in tasks])
            raise

    def close(self) -> None:
        """Stop a loop this object started, its remaining tasks cancelled first, as ``asyncio.run`` does
        (one given to it is left alone)."""
        if self._thread is None:
            return
        self.run(_cancel_remaining_tasks(), timeout=10)
        self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=10)
        self.loop.close()


async def _cancel_remaining_tasks() -> None:
    tasks = [task for task in asyncio.all_tasks() if task is not asyncio.current_task()]
    for task in tasks:
        task.cancel()
    await asyncio.gather(*tasks, return_exceptions=True)


@dataclass(frozen=True, slots=True)
class LoopRequest:
    """A message sent from code on the loop; the actor answers through ``settle``."""

    message: Any
    """The request itself."""
    settle: Callable[[Any, BaseException | None], None]
    """Called on the actor's thread with the answer or the exception."""


async def ask_from_loop(actor: pykka.ActorRef[Any], message: Any) -> Any:
    """Ask an actor from the loop without blocking it: the answer comes back by callback."""
    loop = asyncio.get_running_loop()
    waiter: asyncio.Future[Any] = loop.create_future()

    def resolve(value: Any, error: BaseException | None) -> None:
        if waiter.done():
            return
        if error is not None:
            waiter.set_exception(error)
        else:
            waiter.set_result(value)

    def settle(value: Any, error: BaseException | None) -> None:
        loop.call_soon_threadsafe(resolve, value, error)

    actor.tell(LoopRequest(message, settle))
    return await waiter


class Answering(pykka.ThreadingActor):
    """An actor whose requests may come from the loop (:func:`ask_from_loop`) or from threads (``ask``)."""

    def on_receive(self, message: Any) -> Any:
        if not isinstance(message, LoopRequest):
            return self.handle(message)
        try:
            value = self.handle(message.message)
        except Exception as e:  # goes back to the asking coroutine
            message.settle(None, e)
        else:
            message.settle(value, None)
        return None

    def handle(self, message: Any) -> Any:
        """Answer one request."""
        raise NotImplementedError
