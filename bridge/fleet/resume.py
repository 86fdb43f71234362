"""Resume from anywhere (issue 14, point 4): a resume reaching any node of the fleet reaches its checkpoint.

A checkpoint never leaves the node that holds it: it holds the call's commands with their typed
values, which live in that node's memory only (spec: Checkpoints). So resumes are routed to it,
and checkpoints are not replicated. While a node holds a call's checkpoint (from when its store
keeps it until it drops it, a resume in progress included), the node takes resumes of that call on
``<fleet>.ckpt.<call>``. A node asked to resume a call it does not hold forwards the request there
(its ``messages.fleet.ResumeRequest``, as parsed where it came in) and answers what the holder answers:
the same body and HTTP status, the same errors. With nobody on that subject (``no_responders``) it answers
``checkpoint_not_found`` at once, from its own store: the call finished ok, its checkpoint expired
or was pushed out, or the node that held it stopped or died, losing it (it was never replicated,
by design).

A node that just died may still show interest in its subjects for a moment (the cluster has not
yet seen its connection end), and a request sent there is lost, not refused. So the holder is
pinged first, every second while no one answers: ``no_responders`` is ``checkpoint_not_found``, an
answer sends the resume, and pings unanswered for :data:`HOLDER_PATIENCE` are ``fleet_unavailable``
(503, retryable; never ``checkpoint_not_found``, which could lead a caller to send a write again).
While the holder runs the resume it is pinged every :data:`HOLDER_PING_INTERVAL`; once nobody is
on the subject and its answer has not come within :data:`HOLDER_GONE_GRACE`, the holder died
mid-resume (its writes' outcome unknown, its checkpoint lost): ``fleet_unavailable`` too, within
seconds, not the forward's whole timeout.

The holder applies its own rules: the token's hash, the checkpoint's agent, rotation, its policy.
It trusts the agent named in the request: the nodes of one fleet trust each other, over NATS
connections their credentials authenticate (a NATS user of the fleet may resume as any agent).

A forwarded resume answers its final result only: a streamed one (NDJSON) gets no progress lines
from the holder, only its last line (``{"result", "httpStatus"}``), as a refusal does.
"""

from __future__ import annotations

import asyncio
import logging
import threading
from collections.abc import Awaitable, Callable
from typing import TypeVar

from actors.bus import Bus, BusError, Handler, Subscription
from actors.call_actor import ResumeCall
from actors.loop import IoLoop
from actors.serving import typed
from core.calls import CallResponse
from core.checkpoints import Checkpoint, Checkpoints, DropReason
from messages.codec import encode, read_answer
from messages.contract import RESUME_DEADLINE, SETTLE
from messages.errors import KitsuneError
from messages.fleet import Acknowledged, CallAnswered, PingHolder, Reissued, ReissueToken, ResumeRequest
from messages.requests import Subjects
from messages.wire import LARGE, Message

__all__ = ["FORWARD_TIMEOUT", "ResumeRoutes"]

log = logging.getLogger(__name__)

FORWARD_TIMEOUT = RESUME_DEADLINE + SETTLE + 30.0
"""Seconds a forwarded resume waits for the holder's answer: the resume's deadline, its settle time,
and room for the answer to come back."""

HOLDER_PING_TIMEOUT = 1.0
"""Seconds one ping of a checkpoint's holder waits for its answer."""

HOLDER_PATIENCE = 10.0
"""Seconds of unanswered pings before a resume is forwarded after which the holder is ``fleet_unavailable``."""

HOLDER_PING_INTERVAL = 2.0
"""Seconds between the pings that check the holder is still there while it runs a forwarded resume."""

HOLDER_GONE_GRACE = 2.0
"""Seconds a forwarded resume still waits for its answer once nobody holds its checkpoint's subject
(a holder that finished the resume drops the checkpoint, and its subject, as it answers)."""

SUBSCRIBE_TIMEOUT = 10.0
"""Seconds a call's answer waits, at most, for its checkpoint's subject to be subscribed."""

_PING = encode(PingHolder())

A = TypeVar("A")


class ResumeRoutes:
    """Resumes of this node's checkpoints from the whole fleet, and of other nodes' checkpoints from here.

    ``run_here`` resumes on this node. The store tells :meth:`kept` and :meth:`dropped` (on the checkpoint
    actor's thread); the call service keeps checkpoints through :meth:`reachable`, so that a call's
    answer, which carries its token, goes out once the fleet can reach its checkpoint.
    """

    def __init__(self, io: IoLoop, bus: Bus, subjects: Subjects,
                 run_here: Callable[[ResumeCall], Awaitable[CallResponse]],
                 reissue_here: Callable[[int, str | None], str | None]) -> None:
        self._bus = bus
        self._io = io
        self._subjects = subjects
        self._run_here = run_here
        self._reissue_here = reissue_here
        """A new resume token for an agent's checkpoint this node holds (from a thread that is not the loop's)."""
        self._held: set[int] = set()
        """Calls whose checkpoint the store holds (being resumed included), as it told."""
        self._lock = threading.Lock()
        self._subscriptions: dict[int, Subscription] = {}
        """The subject of each call held, once subscribed (on the loop)."""
        self._syncing = asyncio.Lock()
        self._stopped = False

    # the store's hooks (the checkpoint actor's thread)

    def kept(self, call: int) -> None:
        with self._lock:
            self._held.add(call)

    def dropped(self, call: int) -> None:
        with self._lock:
            self._held.discard(call)
        if not self._stopped:
            asyncio.run_coroutine_threadsafe(self._sync(call), self._io.loop)

    def holds(self, call: int) -> bool:
        """Whether this node holds ``call``'s checkpoint."""
        with self._lock:
            return call in self._held

    def reachable(self, store: Checkpoints) -> Checkpoints:
        """``store``, whose keep returns once the checkpoint kept can be resumed through every node."""
        return _Reachable(store, self)

    def reach(self, call: int) -> None:
        """Subscribe ``call``'s subject if its checkpoint is held (from a thread that is not the loop's)."""
        try:
            self._io.run(self._sync(call), timeout=SUBSCRIBE_TIMEOUT)
        except TimeoutError:
            log.warning("a checkpoint can be resumed through this node only: its subject was not subscribed in time")

    # resumes

    async def resume(self, message: ResumeCall) -> CallResponse:
        """Resume here when this node holds the checkpoint, else at the node that holds it; its errors are
        raised as that node raised them."""
        request = message.request
        if self.holds(request.call):
            return await self._run_here(message)
        reply = await self._ask_holder(request.call, request)
        if reply is None:  # no node holds it: this one answers checkpoint_not_found, and counts it
            return await self._run_here(message)
        answer = read_answer(reply, CallAnswered)
        return CallResponse(answer.body, answer.status)

    async def reissue(self, call: int, agent: str | None) -> str | None:
        """A new resume token for ``agent``'s checkpoint of ``call`` wherever the fleet holds it (the old
        token stops working); None when no node holds one."""
        if self.holds(call):
            return await asyncio.to_thread(self._reissue_here, call, agent)
        reply = await self._ask_holder(call, ReissueToken(call, agent))
        try:
            return read_answer(reply, Reissued).resume_token if reply is not None else None
        except KitsuneError:  # the holder could not make one: as if it held none
            return None

    async def _ask_holder(self, call: int, request: Message) -> bytes | None:
        """The reply of the node holding ``call``'s checkpoint to ``request``; None when no node holds it,
        ``fleet_unavailable`` when the holder does not answer or is gone before it answers."""
        if not await self._held_somewhere(call, patience=HOLDER_PATIENCE):
            return None
        forward = asyncio.ensure_future(self._bus.request(self._subjects.checkpoint(call), encode(request),
                                                         FORWARD_TIMEOUT))
        try:
            while not (await asyncio.wait({forward}, timeout=HOLDER_PING_INTERVAL))[0]:
                if not await self._held_somewhere(call, patience=None):
                    await asyncio.wait({forward}, timeout=HOLDER_GONE_GRACE)
                    if not forward.done():
                        raise KitsuneError("fleet_unavailable", f"The node holding call {call}'s checkpoint "
                                           "is gone: what its resume did is unknown", retryable=True)
            return forward.result()
        except BusError as e:
            if e.code == "no_responders":  # it dropped the checkpoint between the ping and the request
                return None
            raise
        finally:
            forward.cancel()

    async def _held_somewhere(self, call: int, patience: float | None) -> bool:
        """Whether a node answers a ping on ``call``'s subject (False: nobody is there). Unanswered pings are
        asked again for ``patience`` seconds, then ``fleet_unavailable``; with None (the holder is running
        the resume), a ping that fails for any reason but ``no_responders`` is True: busy, not gone."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + (patience or 0.0)
        while True:
            try:
                await self._bus.request(self._subjects.checkpoint(call), _PING, HOLDER_PING_TIMEOUT)
                return True
            except BusError as e:
                if e.code == "no_responders":
                    return False
                if patience is None:
                    return True
                if e.code != "bus_timeout":
                    raise
                if loop.time() >= deadline:
                    raise KitsuneError("fleet_unavailable", f"The node holding call {call}'s checkpoint did not "
                                       f"answer within {patience:g} s", retryable=True) from e

    # another node's requests to this node, holding the checkpoint

    def _serving(self, subject: str) -> Handler:
        return typed(subject, {PingHolder: self._pinged, ResumeRequest: self._resume_for,
                               ReissueToken: self._reissue_for}, limit=LARGE)

    async def _pinged(self, ping: PingHolder) -> Acknowledged:
        return Acknowledged()

    async def _resume_for(self, request: ResumeRequest) -> CallAnswered:
        """A resume another node forwarded: run here, under this node's rules."""
        response = await _guarded(self._run_here(ResumeCall(request)))
        return CallAnswered(response.body, response.http_status)

    async def _reissue_for(self, request: ReissueToken) -> Reissued:
        return Reissued(await _guarded(asyncio.to_thread(self._reissue_here, request.call, request.agent)))

    async def _sync(self, call: int) -> None:
        """Subscribe ``call``'s subject while its checkpoint is held here, and only then (on the loop)."""
        async with self._syncing:
            subscription = self._subscriptions.get(call)
            held = self.holds(call) and not self._stopped
            if held and subscription is None:
                try:
                    subject = self._subjects.checkpoint(call)
                    self._subscriptions[call] = await self._bus.subscribe(subject, self._serving(subject),
                                                                         concurrent=True)
                except BusError as e:
                    log.warning("a checkpoint can be resumed through this node only (%s)", e.code)
            elif not held and subscription is not None:
                del self._subscriptions[call]
                await subscription.unsubscribe()

    async def stop(self) -> None:
        """Stop taking resumes (the node stops: its checkpoints go with it)."""
        self._stopped = True
        async with self._syncing:
            subscriptions = list(self._subscriptions.values())
            self._subscriptions.clear()
        for subscription in subscriptions:
            await subscription.unsubscribe()


async def _guarded(work: Awaitable[A]) -> A:
    """What ``work`` gives; an unexpected failure is logged and raised as ``internal_error``: the forwarding
    node answers it as this node's HTTP API would, a 500."""
    try:
        return await work
    except KitsuneError:
        raise
    except Exception as e:
        log.error("a forwarded resume failed: %s", type(e).__name__)
        raise KitsuneError("internal_error", "The resume failed on the node holding its checkpoint") from e


class _Reachable:
    """A checkpoint store whose keep returns once the fleet can reach the checkpoint kept."""

    def __init__(self, store: Checkpoints, routes: ResumeRoutes) -> None:
        self._store = store
        self._routes = routes

    def keep(self, checkpoint: Checkpoint) -> str:
        token = self._store.keep(checkpoint)
        self._routes.reach(checkpoint.call)
        return token

    def take(self, call: int, token: str, agent: str | None) -> Checkpoint:
        return self._store.take(call, token, agent)

    def put_back(self, call: int) -> None:
        self._store.put_back(call)

    def drop(self, call: int, reason: DropReason) -> None:
        self._store.drop(call, reason)
