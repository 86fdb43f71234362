"""A call on another node's tabs runs on that node (issue 14): its steps cost what local steps cost.

A container call (batch, parallel, workflow) whose every tab is held by one other node, known before
it runs, is sent there whole on ``<fleet>.node.<name>.call`` and runs there as a call of that node:
each step reaches its tab through the tab actor's mailbox instead of a NATS request and reply of its
own. The call pays one round trip, whatever its number of steps. A call is run here, its steps sent
to their tabs one by one, when its tabs are not all known before it runs (a ``newTab``, a tab named
by a reference), are on several nodes or on this one, when its agent's writes wait for approval (the
confirm tokens of its holds are this node's, where the agent confirms them with a direct call), or
when the tab's node declines it: it has other rules for the agent (policy, step timeout), another
version of the workflow, or nobody takes the node's calls (``no_responders``: nothing was sent).

The call is recorded here first (its audit entry: its call id), so that this node can always say
what became of it. The tab's node runs it under its own rules, which are this node's (it declines
otherwise), keeps its checkpoint (a resume through any node reaches it there: ``bridge.fleet.resume``)
and answers its response, which goes back to the caller unchanged. A streamed call (NDJSON, MCP
progress, a task following its session) hears the call's events relayed as they happen.

When the answer is lost (this node's NATS connection dropped, a server died), the tab's node still
runs the call to its end, and keeps its ended response (without its resume token) for
:data:`ENDED_KEPT` seconds (:data:`ENDED_BYTES` of them at most): this node asks for it (``AskCallStatus``,
then ``AskCallResult``, which gives a new token for the call's checkpoint; the lost one no longer works).
When the tab's node is gone (the fleet judged it lost), or the call's deadline passed, the answer is
``fleet_unavailable`` (503) with the call's id and its steps as its events recorded them: a write
sent without an answer on record is ``unknown``, never ``ok``; not retryable, as what ran may have
taken effect, unless the call has no event on record and its node is gone or never had it (it never
started, and never will: a write is sent only once its dispatch, and every event of the call before
it, is stored).
"""

from __future__ import annotations

import asyncio
import collections
import hashlib
import logging
import secrets
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, replace
from typing import Any, cast

import orjson

from actors.bus import Bus, BusError, Handler, Subscription
from actors.call_actor import RunCall
from actors.loop import IoLoop
from actors.serving import ask, typed
from actors.tab_actor import not_sent
from core.calls import CallResponse
from core.checkpoints import WorkflowSource
from core.policy import Policy
from messages.codec import encode, read_answer
from messages.commands import CallSpec, Command, NewTab, children, tabs_named
from messages.contract import SETTLE
from messages.errors import KitsuneError
from messages.events import CallEnded, Event
from messages.fleet import (
    AskCallResult,
    AskCallStatus,
    CallAnswered,
    CallDeclined,
    CallGone,
    CallStatus,
    ForwardedCall,
)
from messages.requests import Subjects, TabRequest
from messages.results import Outcome
from messages.steplog import fold
from messages.wire import LARGE, ErrorAnswer

__all__ = ["ENDED_KEPT", "CallForwarding", "rules_digest", "tabs_known"]

log = logging.getLogger(__name__)

ENDED_KEPT = 60.0
"""Seconds the tab's node keeps a forwarded call's ended response for a caller whose answer was lost."""

LOOK_TIMEOUT = 1.0
"""Seconds a look at a forwarded call (is it running, did it end) waits for the node's answer."""

STATUS_INTERVAL = 1.0
"""Seconds between the looks at a forwarded call still running (is its node there, did it end)."""

FORWARD_MARGIN = 2 * SETTLE + 10.0
"""Seconds a forwarded call is waited for beyond its own deadline (the tab's node ends it by then)."""

RELAY_DRAIN = 1.0
"""Seconds a streamed call's last relayed events are waited for once its answer came."""

ENDED_BYTES = 64 * 1024 * 1024
"""Bytes of ended responses kept at most (the oldest go first: a caller that lost one of those has the
call's steps from its events instead)."""


def rules_digest(policy: Policy, step_timeout: float) -> str:
    """What a call of an agent runs under on a node, as a digest: equal on two nodes, the call runs the same."""
    rules = {"read_only": policy.read_only, "ask_before_act": policy.ask_before_act,
             "allow": list(policy.urls.allow), "deny": list(policy.urls.deny),
             "user_tabs_writable": policy.user_tabs_writable, "caps": sorted(policy.caps),
             "max_checkpoints": policy.max_checkpoints, "live_view": policy.live_view, "step_timeout": step_timeout}
    return hashlib.sha256(orjson.dumps(rules)).hexdigest()


def tabs_known(spec: CallSpec) -> frozenset[int] | None:
    """The tabs ``spec`` acts on, when all are known before it runs; None when one is not (a ``newTab``,
    a tab named by a reference)."""
    named = [tab for command in spec.commands for _, tab in tabs_named(command)]
    if not all(isinstance(tab, int) for tab in named) or any(_opens_tab(c) for c in spec.commands):
        return None
    return frozenset(named) | ({spec.default_tab} if spec.default_tab is not None else frozenset())


def _opens_tab(command: Command) -> bool:
    return isinstance(command, NewTab) or any(_opens_tab(child.command) for child in children(command))


class CallForwarding:
    """Calls of this node on another node's tabs sent there, and the calls other nodes send here.

    ``node_of`` says which node holds a tab, ``alive`` which nodes the fleet sees; ``record`` records
    a new call and answers its id (from a thread); ``run_here`` runs a call on this node; ``policy_of``
    is an agent's policy here, and ``step_timeout`` the node's (:func:`rules_digest`); ``workflow_sha256``
    the digest of a workflow file here.
    """

    def __init__(self, name: str, io: IoLoop, bus: Bus, subjects: Subjects, *, node_of: Callable[[int], str | None],
                 alive: Callable[[], frozenset[str]], record: Callable[[CallSpec, str | None], int],
                 run_here: Callable[[RunCall], Awaitable[CallResponse]],
                 policy_of: Callable[[str | None], Policy], step_timeout: float,
                 workflow_sha256: Callable[[str], str | None], reissue_here: Callable[[int, str | None], str | None],
                 events_of: Callable[[int], Awaitable[list[Event]]]) -> None:
        self._bus = bus
        self.name = name
        self._io = io
        self._subjects = subjects
        self._node_of = node_of
        self._alive = alive
        self._record = record
        self._run_here = run_here
        self._policy_of = policy_of
        self._step_timeout = step_timeout
        self._workflow_sha256 = workflow_sha256
        self._reissue_here = reissue_here
        self._events_of = events_of
        self._running: dict[int, str] = {}
        """Calls other nodes sent here, running, and the node each came from."""
        self._orphans: set[int] = set()
        """Running calls whose node left the fleet: their later steps are not sent."""
        self._ended: collections.OrderedDict[int, _Ended] = collections.OrderedDict()
        """Calls other nodes sent here that ended, the oldest first."""
        self._ended_bytes = 0
        """Their replies' size, encoded."""

    def serving(self) -> dict[str, Handler]:
        """Where this node takes the calls other nodes send it, and their questions about them."""
        subject = self._subjects.node(self.name, "call")
        return {subject: typed(subject, {ForwardedCall: self._serve_call, AskCallStatus: self._status_of,
                                         AskCallResult: self._result_of}, limit=LARGE)}

    def target(self, spec: CallSpec, agent: str | None) -> str | None:
        """The other node that holds every tab ``spec`` acts on; None when it runs here. An agent whose
        writes wait for approval runs its calls here: the confirm tokens of its holds are this node's."""
        alive = self._alive()
        if len(alive) < 2 or self._policy_of(agent).ask_before_act:
            return None  # a fleet of one (the usual node), or an agent whose holds are this node's
        tabs = tabs_known(spec)
        if not tabs:
            return None
        nodes = {self._node_of(tab) for tab in tabs}
        node = nodes.pop() if len(nodes) == 1 else None
        return node if node is not None and node != self.name and node in alive else None

    async def run(self, message: RunCall) -> CallResponse | None:
        """``message``'s response when its tabs are on another node (run there, or here if it declines);
        None when the call is not for another node."""
        node = self.target(message.spec, message.agent)
        if node is None:
            return None
        call = await asyncio.to_thread(self._record, message.spec, message.agent)
        here = replace(message, call=call)
        relay = self._subjects.relay(secrets.token_hex(12)) if message.listener is not None else None
        workflow = (message.workflow.name, message.workflow.sha256) if message.workflow is not None else None
        request = ForwardedCall(call, message.spec, workflow, message.agent, message.session,
                                self._rules_of(message.agent), relay, self.name)
        heard = await self._relayed(relay, message) if relay is not None else None
        try:
            reply = await self._forward(node, request)
            if heard is not None and reply is not None:
                await asyncio.wait({heard[1]}, timeout=RELAY_DRAIN)  # its last events, sent before its answer
        finally:
            if heard is not None:
                await heard[0].unsubscribe()
        if reply is None or isinstance(reply, CallDeclined):
            return await self._run_here(here)
        if isinstance(reply, ErrorAnswer):
            raise reply.error
        return CallResponse(reply.body, reply.status)

    async def _relayed(self, relay: str, message: RunCall) -> tuple[Subscription, asyncio.Future[None]]:
        """Hear the call's events on ``relay`` (told to ``message``'s listener); a future done at its end."""
        assert message.listener is not None
        listener = message.listener
        ended: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def heard(event: Event) -> None:
            listener(event)
            if isinstance(event, CallEnded) and not ended.done():
                ended.set_result(None)
        return await self._bus.subscribe(relay, typed(relay, {Event: heard}, limit=LARGE)), ended

    async def _forward(self, node: str, request: ForwardedCall) -> CallAnswered | CallDeclined | ErrorAnswer | None:
        """The reply of ``node`` to the call (None: nothing reached it, run it here), or, when the reply
        was lost, what the call's node or its events say of it."""
        subject = self._subjects.node(node, "call")
        loop = asyncio.get_running_loop()
        deadline = loop.time() + request.spec.timeout + FORWARD_MARGIN
        forward = asyncio.ensure_future(self._bus.request(subject, encode(request),
                                                         request.spec.timeout + FORWARD_MARGIN))
        gone = False  # the call's node is gone, or never had the call: it will never run it
        try:
            while loop.time() < deadline:
                await asyncio.wait({forward}, timeout=STATUS_INTERVAL)
                lost = forward.done()
                if lost and not isinstance(reply := _reply(forward), _Lost):
                    return reply
                if not self._bus.connected:
                    continue
                seen = await self._look(subject, request.call)
                if seen == "ended" and lost:
                    ended = _answer(await self._bus.request(subject, encode(AskCallResult(request.call)),
                                                           LOOK_TIMEOUT + SETTLE))
                    if not isinstance(ended, CallGone):
                        return ended
                    break
                if (seen == "gone" and node not in self._alive()) or (seen == "unknown" and lost):
                    gone = True
                    break
        except BusError as e:  # its ended response did not come: its events tell
            log.warning("a forwarded call's ended response was not had (%s)", e.code)
        finally:
            forward.cancel()
        return await self._unavailable(node, request.call, gone=gone)

    async def _look(self, subject: str, call: int) -> str:
        """What the call's node says of it: running, ended, unknown (never arrived, or forgotten), gone
        (nobody on its subject), or ``busy`` (no answer in time)."""
        try:
            answer = await ask(self._bus, subject, AskCallStatus(call), LOOK_TIMEOUT, CallStatus)
        except BusError as e:
            return "gone" if e.code == "no_responders" else "busy"
        except KitsuneError:  # an answer it cannot read says nothing of the call
            return "busy"
        return answer.status

    async def _unavailable(self, node: str, call: int, *, gone: bool) -> CallAnswered:
        """The reply for a call whose node is gone (``gone``: or never had it), or whose deadline passed,
        without its response."""
        body: dict[str, Any] = {"call": call}
        try:
            events = await asyncio.wait_for(self._events_of(call), LOOK_TIMEOUT + SETTLE)
        except Exception as e:  # unknown: what ran is not known, nothing is said of it
            log.warning("the events of a call forwarded to another node could not be read (%s)", type(e).__name__)
            events = None
        if events:
            steps = fold(events)
            body |= {"status": steps.status, "progress": steps.progress, "summary": steps.summary}
        never_ran = gone and events == []
        error = KitsuneError("fleet_unavailable", f"Node {node}, which was to run call {call} on its tabs, gave no "
                             "answer: " + ("it never started it, nothing was sent" if never_ran else
                                          "its steps are as its events recorded them (a write sent with no answer "
                                          "on record is unknown), and its checkpoint is not reachable"),
                             retryable=never_ran, state={"node": node})
        return CallAnswered({**error.to_json(), **body}, error.http_status)

    # calls other nodes send here

    async def _serve_call(self, request: ForwardedCall) -> CallDeclined | bytes:
        """Run a call another node sent (unless it runs under other rules here, or another workflow)."""
        if request.rules != self._rules_of(request.agent):
            return CallDeclined("rules")
        if request.workflow is not None and self._workflow_sha256(request.workflow[0]) != request.workflow[1]:
            return CallDeclined("workflow")
        self._running[request.call] = request.origin
        try:
            answer = await self._run_forwarded(request)
            encoded = encode(answer)  # once: its size is what the kept copy counts
            self._keep_ended(request, answer, len(encoded))
        finally:
            del self._running[request.call]
            self._orphans.discard(request.call)
        return encoded

    async def _status_of(self, request: AskCallStatus) -> CallStatus:
        call = request.call
        return CallStatus("running" if call in self._running else "ended" if call in self._ended else "unknown")

    def _rules_of(self, agent: str | None) -> str:
        return rules_digest(self._policy_of(agent), self._step_timeout)

    def origin_of(self, call: int) -> str | None:
        """The node that sent ``call`` here, while it runs; None for a call of this node's own."""
        return self._running.get(call)

    def origin_lost(self, node: str) -> None:
        """``node`` left the fleet: the calls it sent here send no more steps (nobody awaits their answer)."""
        self._orphans.update(call for call, origin in self._running.items() if origin == node)

    def admission(self, tab: int, request: TabRequest) -> Outcome | None:
        """Why a step of a call sent here may not be sent now: its node left the fleet."""
        if request.call is None or request.call not in self._orphans:
            return None
        return not_sent(request.command, tab, f"node {self._running.get(request.call)}, which sent its call, "
                        "left the fleet")

    async def _run_forwarded(self, request: ForwardedCall) -> CallAnswered | ErrorAnswer:
        listener = self._relay(request.relay) if request.relay is not None else None
        workflow = WorkflowSource(*request.workflow) if request.workflow is not None else None
        try:
            response = await self._run_here(RunCall(request.spec, workflow, request.agent, listener,
                                                    request.session, call=request.call))
        except KitsuneError as e:
            return ErrorAnswer(e)
        except Exception as e:  # the forwarding node answers it as its HTTP API would: a 500
            log.error("a forwarded call failed: %s", type(e).__name__)
            return ErrorAnswer(KitsuneError("internal_error", "The call failed on the node of its tabs"))
        return CallAnswered(response.body, response.http_status)

    def _relay(self, subject: str) -> Callable[[Event], None]:
        """A listener that sends each event to ``subject``, in the order heard (from any thread)."""
        loop, bus = self._io.loop, self._bus

        def send(data: bytes) -> None:
            sending = asyncio.ensure_future(bus.publish(subject, data))
            sending.add_done_callback(lambda t: t.cancelled() or t.exception())

        def relay(event: Event) -> None:
            loop.call_soon_threadsafe(send, encode(event))
        return relay

    def _keep_ended(self, request: ForwardedCall, answer: CallAnswered | ErrorAnswer, size: int) -> None:
        """Keep ``answer`` (``size`` bytes encoded) a while for a caller that loses it; a resume token is not
        kept (a new one is made)."""
        now = time.monotonic()
        while self._ended and (self._ended_bytes + size > ENDED_BYTES
                               or next(iter(self._ended.values())).when < now - ENDED_KEPT):
            self._ended_bytes -= self._ended.popitem(last=False)[1].size
        had_token = isinstance(answer, CallAnswered) and "resume_token" in answer.body
        if isinstance(answer, CallAnswered):
            answer = replace(answer, body={k: v for k, v in answer.body.items() if k != "resume_token"})
        self._ended[request.call] = _Ended(now, request.agent, had_token, answer, size)
        self._ended_bytes += size

    async def _result_of(self, request: AskCallResult) -> CallAnswered | ErrorAnswer | CallGone:
        """The ended response of a call, once."""
        ended = self._ended.pop(request.call, None)
        if ended is None:
            return CallGone()
        self._ended_bytes -= ended.size
        if not isinstance(ended.answer, CallAnswered) or not ended.had_token:
            return ended.answer
        token = await asyncio.to_thread(self._reissue_here, request.call, ended.agent)
        return replace(ended.answer, body=ended.answer.body | ({"resume_token": token} if token is not None else {}))


@dataclass(frozen=True, slots=True)
class _Ended:
    """A forwarded call that ended here, kept for a caller that lost its answer."""

    when: float
    agent: str | None
    had_token: bool
    """Whether its response carried a resume token (a new one is made for it)."""
    answer: CallAnswered | ErrorAnswer
    """Its answer, without the token."""
    size: int
    """Its answer's size, encoded."""


class _Lost:
    """A forwarded call's answer was lost on its way (the request may have run)."""


_LOST = _Lost()


def _reply(forward: asyncio.Future[bytes]) -> CallAnswered | CallDeclined | ErrorAnswer | _Lost | None:
    """A finished forward's reply; None when nobody took it (nothing was sent: run it here)."""
    try:
        data = forward.result()
    except BusError as e:
        return None if e.code == "no_responders" else _LOST
    answer = _answer(data)
    return answer if not isinstance(answer, CallGone) else _LOST  # a call is never answered gone: lost on its way


def _answer(data: bytes) -> CallAnswered | CallDeclined | CallGone | ErrorAnswer:
    """The tab's node's answer to a forwarded call, or to the question how it ended; its error as an answer."""
    try:
        return cast(CallAnswered | CallDeclined | CallGone, read_answer(data, CallAnswered, CallDeclined, CallGone))
    except KitsuneError as e:
        return ErrorAnswer(e)
