"""The node's event loop, as actors see it.

Actors are threads; IO (nats-py, Playwright) runs on one asyncio loop. An actor submits a
coroutine and blocks only its own thread (:meth:`IoLoop.run`). The other way round, code on the
loop never awaits a pykka future (its ``__await__`` blocks the loop): :func:`ask_from_loop`
hands the actor a callback that resolves an asyncio future through ``call_soon_threadsafe``.

An actor whose every message is IO on the loop (a tab's actor: Playwright) is a
:class:`LoopActor` instead: a pykka actor whose mailbox is emptied by a task on the loop, so it
awaits its IO where the IO runs, without a thread of its own. Its handler may answer later
(:class:`Later`): the mailbox then goes on to the next message while the answer is worked out.
"""

from __future__ import annotations

import asyncio
import collections
import concurrent.futures
import contextlib
import functools
import inspect
import logging
import sys
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass
from typing import Any, TypeVar

import pykka

__all__ = ["Answering", "IoLoop", "Later", "LoopActor", "LoopRequest", "ask_from_loop"]

T = TypeVar("T")

_log = logging.getLogger(__name__)


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
        """Stop a loop this object started as ``asyncio.run`` ends one: its remaining tasks cancelled, then its
        default executor's threads ended (a job still running there waited for up to 10 s), then the loop (one given
        to it is left alone)."""
        if self._thread is None:
            return
        self.run(_cancel_remaining_tasks(), timeout=10)
        with contextlib.suppress(concurrent.futures.TimeoutError):
            self.run(self.loop.shutdown_default_executor(), timeout=10)
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


@dataclass(frozen=True, slots=True)
class Later:
    """What a :class:`LoopActor`'s handler answers when the answer comes later: the asker gets the
    task's result (or exception) once it is done, and the actor handles its next message meanwhile."""

    task: asyncio.Future[Any]
    """The work that produces the answer, already running on the loop."""


def _reply_when_done(task: asyncio.Future[Any], reply: Callable[[Any, BaseException | None], None]) -> None:
    def done(finished: asyncio.Future[Any]) -> None:
        if finished.cancelled():
            reply(None, asyncio.CancelledError())
        elif (error := finished.exception()) is not None:
            reply(None, error)
        else:
            reply(finished.result(), None)
    task.add_done_callback(done)


class _LoopInbox:
    """A loop actor's mailbox: filled from any thread, emptied on the loop."""

    def __init__(self) -> None:
        self._envelopes: collections.deque[Any] = collections.deque()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._waiter: asyncio.Future[None] | None = None

    def bind(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop

    def put(self, envelope: Any) -> None:
        assert self._loop is not None
        self._envelopes.append(envelope)
        self._loop.call_soon_threadsafe(self._wake)

    def get(self) -> Any:
        return self._envelopes.popleft()

    def empty(self) -> bool:
        return not self._envelopes

    def qsize(self) -> int:
        return len(self._envelopes)

    async def next(self) -> Any:
        """The next envelope, once there is one (on the loop)."""
        while not self._envelopes:
            self._waiter = asyncio.get_running_loop().create_future()
            await self._waiter
        return self._envelopes.popleft()

    def _wake(self) -> None:  # on the loop, so never between next()'s check and its wait
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_result(None)


class LoopActor(pykka.Actor):
    """A pykka actor whose messages are handled one at a time by a task on the loop.

    Asked and told from threads like any actor (its futures are pykka's threading ones), and from
    the loop with :func:`ask_from_loop`. ``handle`` is a coroutine and must never block the loop;
    one message is handled at a time, unless ``handle`` answers :class:`Later`.
    """

    actor_inbox: _LoopInbox

    def __init__(self, io: IoLoop) -> None:
        super().__init__()
        self._io = io
        self._task: asyncio.Task[None] | None = None
        self.actor_inbox.bind(io.loop)

    @staticmethod
    def _create_actor_inbox() -> _LoopInbox:
        return _LoopInbox()

    @staticmethod
    def _create_future() -> pykka.Future[Any]:
        return pykka.ThreadingFuture()

    def _start_actor_loop(self) -> None:
        def start() -> None:
            self._task = self._io.loop.create_task(self._run(), name=f"actor:{type(self).__name__}")
        self._io.loop.call_soon_threadsafe(start)

    async def _run(self) -> None:
        """pykka's actor loop, with each answer that is a coroutine awaited before the next message."""
        self._actor_loop_setup()
        try:
            while not self.actor_stopped.is_set():
                envelope = await self.actor_inbox.next()
                try:
                    response = self._handle_receive(envelope.message)
                    if inspect.isawaitable(response):
                        response = await response
                    if isinstance(response, Later):
                        _reply_when_done(response.task, functools.partial(_set_pykka_future, envelope.reply_to))
                    elif envelope.reply_to is not None:
                        envelope.reply_to.set(response)
                except Exception:
                    if envelope.reply_to is not None:
                        envelope.reply_to.set_exception()
                    else:
                        self._handle_failure(*sys.exc_info())
        except asyncio.CancelledError:  # the loop is closing under it
            self._stop()
            raise
        finally:
            self._actor_loop_teardown()

    def on_receive(self, message: Any) -> Any:
        if isinstance(message, LoopRequest):
            return self._answer(message)
        return self.handle(message)

    async def _answer(self, request: LoopRequest) -> None:
        try:
            value = await self.handle(request.message)
        except Exception as e:  # goes back to the asking coroutine
            request.settle(None, e)
        else:
            if isinstance(value, Later):
                _reply_when_done(value.task, request.settle)
            else:
                request.settle(value, None)

    async def handle(self, message: Any) -> Any:
        """Answer one request (on the loop), or answer :class:`Later`."""
        raise NotImplementedError


def _set_pykka_future(future: pykka.Future[Any] | None, value: Any, error: BaseException | None) -> None:
    """Answer a pykka asker (a ``tell`` has no future: a failure is then only logged)."""
    if future is None:
        if error is not None and not isinstance(error, asyncio.CancelledError):
            _log.error("a message told to a loop actor failed (%s)", type(error).__name__)
        return
    if error is None:
        future.set(value)
    else:
        future.set_exception((type(error), error, error.__traceback__))
