"""CallActors: a node's call actors kept between calls, each call in a context of its own."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Callable
from typing import Any, cast

import pykka
import pytest

from actors.call_actor import CallActor, CallActors, RunCall
from core.calls import CallResponse, Calls
from core.log_context import AGENT, CALL
from messages.commands import CallSpec, Title
from messages.errors import KitsuneError

SPEC = CallSpec("batch", (Title(),))


class FakeCalls:
    """Runs a "call" by noting its thread and the context it found, then naming itself in CALL;
    the agent ``"slow"`` waits for ``release``, ``"broken"`` raises."""

    def __init__(self) -> None:
        self.seen: list[tuple[int, int | None, str | None]] = []
        self.release = threading.Event()
        self.recordings: list[tuple[int, str | None]] = []
        """The thread each new call's recording was started on, and its agent."""
        self.ids: list[int] = []
        """The id each call's ``run`` was given or waited for."""

    def recording(self, spec: CallSpec, agent: str | None) -> Callable[[], int]:
        self.recordings.append((threading.get_ident(), agent))
        call = 100 + len(self.recordings)
        return lambda: call

    def run(self, spec: CallSpec, workflow: Any, agent: str | None, listener: Any,
            call: int | Callable[[], int] | None) -> CallResponse:
        assert call is not None
        self.ids.append(call if isinstance(call, int) else call())
        self.seen.append((threading.get_ident(), CALL.get(), AGENT.get()))
        CALL.set(len(self.seen))
        if agent == "slow":
            self.release.wait(10)
        if agent == "broken":
            raise KitsuneError("invalid_parameter", "broken")
        return CallResponse({"status": "ok", "n": len(self.seen)})


def run(actors: CallActors, agent: str) -> Any:
    return actors.run(RunCall(SPEC, agent=agent))


def test_calls_reuse_an_idle_actor_and_see_none_of_an_earlier_calls_context() -> None:
    calls = FakeCalls()
    actors = CallActors(cast(Calls, calls))

    async def two() -> None:
        assert (await run(actors, "alice")).body["n"] == 1
        with pytest.raises(KitsuneError):
            await run(actors, "broken")  # its own error: the actor is given back all the same
        assert (await run(actors, "bob")).body["n"] == 3

    asyncio.run(two())
    threads = {thread for thread, _, _ in calls.seen}
    assert len(threads) == 1
    assert [(call, agent) for _, call, agent in calls.seen] == [(None, "alice"), (None, "broken"), (None, "bob")]
    for actor in actors.forget():
        actor.stop()


def test_a_new_call_s_id_is_being_recorded_on_the_loop_before_its_actor_takes_it_and_a_known_one_is_kept() -> None:
    calls = FakeCalls()
    actors = CallActors(cast(Calls, calls))

    async def new_then_forwarded() -> int:
        await run(actors, "alice")
        await actors.run(RunCall(SPEC, agent="bob", call=7))  # recorded already (forwarded here): not again
        return threading.get_ident()

    loop_thread = asyncio.run(new_then_forwarded())
    assert calls.recordings == [(loop_thread, "alice")]
    assert calls.ids == [101, 7]
    assert calls.seen[0][0] != loop_thread  # the call itself runs on its actor's thread
    for actor in actors.forget():
        actor.stop()


def test_an_actor_whose_asker_stopped_waiting_is_not_given_to_the_next_call() -> None:
    calls = FakeCalls()
    actors = CallActors(cast(Calls, calls))

    async def abandoned_then_another() -> None:
        slow = asyncio.ensure_future(run(actors, "slow"))
        while not calls.seen:
            await asyncio.sleep(0.005)
        slow.cancel()
        await asyncio.sleep(0)
        assert (await run(actors, "alice")).body["n"] == 2  # not queued behind the slow call
        calls.release.set()  # the slow call ends, and its actor stops after it
        slow_thread = calls.seen[0][0]
        while any(thread.ident == slow_thread for thread in threading.enumerate()):
            await asyncio.sleep(0.005)

    asyncio.run(abandoned_then_another())
    assert calls.seen[0][0] != calls.seen[1][0]
    for actor in actors.forget():
        actor.stop()


def test_no_more_than_keep_actors_stay_idle_and_none_after_forget() -> None:
    calls = FakeCalls()
    actors = CallActors(cast(Calls, calls), keep=1)
    before = {ref.actor_urn for ref in pykka.ActorRegistry.get_by_class(CallActor)}

    async def together() -> list[Any]:
        return list(await asyncio.gather(run(actors, "a"), run(actors, "b"), run(actors, "c")))

    assert len(asyncio.run(together())) == 3
    idle = actors.forget()
    assert len(idle) == 1
    idle[0].stop()
    asyncio.run(run(actors, "d"))  # its actor stops after its call: none is kept once forgotten
    assert actors.forget() == []
    deadline = time.monotonic() + 10  # the actors not kept stop by themselves, after their calls
    while {ref.actor_urn for ref in pykka.ActorRegistry.get_by_class(CallActor)} - before:
        assert time.monotonic() < deadline, "call actors not kept did not stop"
        time.sleep(0.01)
