"""A call sent whole to the node of its tabs, whose answer is lost on the way back (``bridge.fleet.calls``).

Two ``CallForwarding`` ends on the real 3-server NATS cluster, the calls they run faked: the sender's
connection loses the run's answer (as when its NATS server dies: the request went, the reply never
comes). The sender asks the tab's node how the call went, and gets its ended response with a new
resume token; when the tab's node is gone, the answer is ``fleet_unavailable``, never a guess (the
real node killed mid-call, its events on record, is in ``test_fleet_calls.py``).
"""

from __future__ import annotations

import asyncio
from typing import Any

import orjson

from actors.bus import BusError, NatsBus
from actors.call_actor import RunCall
from actors.loop import IoLoop
from bridge.fleet.calls import CallForwarding
from core.calls import CallResponse
from core.policy import Policy
from kitsune.fleet import FLEET
from messages.commands import CallSpec, parse_command
from messages.errors import KitsuneError
from messages.events import Event
from messages.fleet import ForwardedCall
from messages.requests import Subjects
from tests.nats_cluster import ClusterAccess

CALL = 4242
SPEC = CallSpec("batch", (parse_command({"action": "click", "selector": "#hit"}),), default_tab=7)


class LosingAnswers:
    """A bus whose requests to run a call reach their node, but whose answers are lost on the way back."""

    def __init__(self, bus: NatsBus) -> None:
        self._bus = bus
        self._sent: set[asyncio.Task[bytes]] = set()

    @property
    def connected(self) -> bool:
        return self._bus.connected

    async def request(self, subject: str, data: bytes, timeout: float) -> bytes:
        if orjson.loads(data).get("kind") != ForwardedCall.KIND:
            return await self._bus.request(subject, data, timeout)
        sending = asyncio.ensure_future(self._bus.request(subject, data, timeout))
        self._sent.add(sending)
        await asyncio.sleep(0.2)  # on its way
        raise BusError("bus_disconnected", f"connection lost while requesting {subject}", subject=subject, sent=True)

    async def publish(self, subject: str, data: bytes) -> None:
        await self._bus.publish(subject, data)

    async def subscribe(self, *args: Any, **kwargs: Any) -> Any:
        return await self._bus.subscribe(*args, **kwargs)

    async def close(self) -> None:
        for sending in self._sent:
            sending.cancel()


def _end(name: str, bus: Any, *, alive: set[str], run_here: Any = None) -> CallForwarding:
    async def no_events(call: int) -> list[Event]:
        return []

    async def never(message: RunCall) -> CallResponse:
        raise AssertionError("the call ran where it came in")

    forwarding = CallForwarding(
        name, IoLoop(asyncio.get_running_loop()), bus, Subjects(FLEET), node_of=lambda tab: "node-t2",
        alive=lambda: frozenset(alive), record=lambda spec, agent: CALL, run_here=run_here or never,
        policy_of=lambda agent: Policy(), step_timeout=30.0, workflow_sha256=lambda name: None,
        reissue_here=lambda call, agent: f"reissued-{call}-{agent}", events_of=no_events)
    return forwarding


def test_a_lost_answer_is_asked_for_again_and_comes_with_a_new_resume_token(nats_cluster: ClusterAccess) -> None:
    ran: list[tuple[int | None, str | None]] = []

    async def run_there(message: RunCall) -> CallResponse:
        ran.append((message.call, message.agent))
        await asyncio.sleep(1.5)  # still running when the sender first asks
        return CallResponse({"status": "failed", "call": message.call, "resume_token": "the-lost-token"})

    async def scenario() -> CallResponse | None:
        there, here = await nats_cluster.bus("node-t2"), await nats_cluster.bus("node-t1")
        receiver = _end("node-t2", there, alive={"node-t1", "node-t2"}, run_here=run_there)
        (subject, serve), = receiver.serving().items()
        serving = await there.subscribe(subject, serve, concurrent=True)
        losing = LosingAnswers(here)
        try:
            return await _end("node-t1", losing, alive={"node-t1", "node-t2"}).run(RunCall(SPEC, agent="alice"))
        finally:
            await serving.unsubscribe()
            await losing.close()
            await there.close()
            await here.close()

    response = asyncio.run(scenario())
    assert response is not None  # the call was for the other node
    assert ran == [(CALL, "alice")]  # run once, on the tab's node
    assert (response.body, response.http_status) == (
        {"status": "failed", "call": CALL, "resume_token": f"reissued-{CALL}-alice"}, 200)


def test_a_lost_answer_whose_node_is_gone_is_fleet_unavailable_not_a_guess(nats_cluster: ClusterAccess) -> None:
    alive = {"node-t1", "node-t2"}

    async def scenario() -> CallResponse | None:
        there, here = await nats_cluster.bus("node-t2"), await nats_cluster.bus("node-t1")
        started = asyncio.Event()

        async def dies_there(message: RunCall) -> CallResponse:
            started.set()
            await asyncio.sleep(3600)
            raise AssertionError("not reached")

        receiver = _end("node-t2", there, alive=alive, run_here=dies_there)
        (subject, serve), = receiver.serving().items()
        serving = await there.subscribe(subject, serve, concurrent=True)

        async def death() -> None:
            await started.wait()
            await there.close()  # its connection ends (nobody on its subject), then the fleet judges it lost
            await asyncio.sleep(1.5)
            alive.discard("node-t2")
        dying = asyncio.ensure_future(death())
        losing = LosingAnswers(here)
        try:
            return await asyncio.wait_for(_end("node-t1", losing, alive=alive).run(RunCall(SPEC, agent="alice")), 30)
        finally:
            dying.cancel()
            await serving.unsubscribe()
            await losing.close()
            await here.close()

    try:
        response = asyncio.run(scenario())
    except KitsuneError as e:
        raise AssertionError(f"raised {e.code} instead of answering") from e
    assert response is not None and response.http_status == 503
    assert {k: response.body[k] for k in ("code", "retryable", "call")} == {
        "code": "fleet_unavailable", "retryable": True, "call": CALL}  # no event on record: no write was sent
    assert "status" not in response.body and "never started it" in response.body["error"]
