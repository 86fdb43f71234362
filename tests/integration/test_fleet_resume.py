"""Resume from anywhere (issue 14, point 4): two nodes on a real 3-server NATS cluster.

A call stopped on node-r1 keeps its checkpoint there; resumed through node-r2's HTTP API, the
request goes to node-r1 over ``kitsune.ckpt.<call>`` and the answer comes back as node-r1 gives
it: the write that ran ok is not sent again (counted by the test site, server side), the token
rotates, an old token is refused 403 through every node, and a call no node holds (unknown, another
agent's, or held by a node that died) answers ``checkpoint_not_found``.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
import nats.errors
import orjson
import pytest

from actors.bus import BusError
from bridge.node import Node
from kitsune.fleet import FLEET
from messages.codec import encode
from messages.fleet import PingHolder, ResumeRequest
from tests.integration.browser_fixtures import LoopThread
from tests.integration.fleet_nodes import apps_over, sees, two_nodes, until
from tests.integration.serving import TOKENS, serve
from tests.nats_cluster import ClusterAccess
from tests.site import TestSite

HIT = "POST /clicks/hit"
LATE = "#late"
ADD_LATE = "document.body.append(Object.assign(document.createElement('p'), {id: 'late', textContent: 'late'}))"


@pytest.fixture(scope="module")
def nodes(nats_cluster: ClusterAccess) -> Iterator[tuple[Node, Node]]:
    yield from two_nodes(nats_cluster, ("node-r1", "node-r2"))


@pytest.fixture(scope="module")
def apis(nodes: tuple[Node, Node]) -> Iterator[tuple[str, str]]:
    """The real app over each node: the same agents (those of ``kitsune serve`` in these tests)."""
    with apps_over(nodes, TOKENS) as bases:
        yield bases


def _client(base: str, agent: str = "alice") -> httpx.Client:
    return httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKENS[agent]}"}, timeout=60)


def _stopped_call(api: httpx.Client, site: TestSite, node: str, **tab: Any) -> dict[str, Any]:
    """A batch on a new tab of ``node``: a click that runs ok, then a wait for ``#late`` that times out."""
    opened = api.post("/api/tabs", json={"op": "open", "url": site.url("/clicks"), "node": node, **tab}).json()
    assert opened["status"] == "ok", opened
    stopped = api.post("/api/batch", json={"tabId": opened["tabId"], "commands": [
        {"action": "click", "selector": "#hit"}, {"action": "waitFor", "selector": LATE, "timeout": 1}]}).json()
    assert [p["status"] for p in stopped["progress"]] == ["ok", "failed"], stopped
    assert site.wait_for_count(HIT, 1) == 1
    return {**stopped, "tabId": opened["tabId"]}


def _probed(cluster: ClusterAccess, call: int) -> dict[str, Any] | None:
    """The answer of whichever node takes resumes of ``call`` to a resume with a wrong token (None: no node)."""
    async def probe() -> dict[str, Any] | None:
        client = await cluster.client()
        try:
            request = ResumeRequest(call, "probe", None, "alice")
            answer: dict[str, Any] = orjson.loads((await client.request(
                f"{FLEET}.ckpt.{call}", encode(request), timeout=10)).data)
            return answer
        except nats.errors.NoRespondersError:
            return None
        finally:
            await client.close()
    return asyncio.run(probe())


@contextmanager
def _silent_holder(cluster: ClusterAccess, call: int, *, answers_pings: bool) -> Iterator[list[dict[str, Any]]]:
    """A subscriber on ``call``'s subject that answers no resume (a node whose connection the cluster has
    not yet seen end, or one stuck); ``answers_pings``: it answers pings, and leaves the subject when a
    resume arrives (a node dying mid-resume). Yields the requests it received."""
    loop = LoopThread()
    received: list[dict[str, Any]] = []

    async def subscribe() -> Any:
        client = await cluster.client()

        async def handle(message: Any) -> None:
            received.append(orjson.loads(message.data))
            if received[-1].get("kind") != PingHolder.KIND:
                await subscription.unsubscribe()
            elif answers_pings:
                await message.respond(b"{}")
        subscription = await client.subscribe(f"{FLEET}.ckpt.{call}", cb=handle)
        await client.flush()
        return client
    client = loop.run(subscribe())
    try:
        yield received
    finally:
        loop.run(client.close())
        loop.close()


def _reaches(node: Node, call: int) -> bool:
    """Whether ``node``'s requests on ``call``'s subject reach someone (the cluster routed the interest)."""
    try:
        node.io.run(node.bus.request(f"{FLEET}.ckpt.{call}", encode(PingHolder()), 0.5), timeout=5)
    except BusError as e:
        return e.code != "no_responders"
    return True


def _resume(api: httpx.Client, call: Any, token: str, **extra: Any) -> httpx.Response:
    return api.post("/api/resume", json={"call": call, "resume_token": token}, **extra)


def test_a_call_stopped_on_one_node_resumes_through_another_its_write_never_sent_again(
        nats_cluster: ClusterAccess, nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite) -> None:
    first, second = nodes
    with _client(apis[0]) as on_r1, _client(apis[1]) as on_r2:
        stopped = _stopped_call(on_r1, site, "node-r1")
        call, token = stopped["call"], stopped["resume_token"]
        assert first.resumes.holds(call) and not second.resumes.holds(call)
        until(lambda: _reaches(second, call), 10, "node-r1's interest in the call's subject reaching node-r2")
        probed = until(lambda: _probed(nats_cluster, call), 10, "node-r1 answering on the call's subject")
        assert probed["error"]["code"] == "resume_token_invalid", probed  # its node answers, under its own rules

        again = _resume(on_r2, call, token)  # the wait fails again on node-r1: a new checkpoint, a new token
        assert again.status_code == 200, again.text
        body = again.json()
        assert body["call"] == call and body["resume_token"] != token
        assert [(p["status"], p.get("resumed")) for p in body["progress"]] == [("ok", "kept"), ("failed", None)]
        for api in (on_r2, on_r1):  # the old token is refused through every node
            refused = _resume(api, call, token)
            assert (refused.status_code, refused.json()["code"]) == (403, "resume_token_invalid"), refused.text

        added = on_r2.post("/api/act", json={"command": {"action": "js", "tabId": stopped["tabId"],
                                                         "code": ADD_LATE}}).json()
        assert added["status"] == "ok", added
        done = _resume(on_r2, call, body["resume_token"])
        assert done.status_code == 200 and done.json()["status"] == "ok", done.text
        assert "resume_token" not in done.json()
        assert site.count(HIT) == 1  # the click ran once, in the first run

        for api in (on_r2, on_r1):  # finished ok: no node holds it any more
            gone = _resume(api, call, body["resume_token"])
            assert (gone.status_code, gone.json()["code"]) == (404, "checkpoint_not_found"), gone.text
    until(lambda: _probed(nats_cluster, call) is None, 5, "node-r1 leaving the call's subject")


def test_a_streamed_resume_through_another_node_answers_the_holders_final_line(
        apis: tuple[str, str], site: TestSite) -> None:
    with _client(apis[0]) as on_r1, _client(apis[1]) as on_r2:
        stopped = _stopped_call(on_r1, site, "node-r1")
        streamed = _resume(on_r2, stopped["call"], stopped["resume_token"],
                           headers={"Accept": "application/x-ndjson"})
        lines = [orjson.loads(line) for line in streamed.text.splitlines()]
        assert [set(line) for line in lines] == [{"result", "httpStatus"}], lines  # the final line only
        assert lines[0]["httpStatus"] == 200 and lines[0]["result"]["status"] == "failed"
        refused = _resume(on_r2, stopped["call"], stopped["resume_token"], headers={"Accept": "application/x-ndjson"})
        assert orjson.loads(refused.text) == {"httpStatus": 403, "result": {
            "error": f"The resume token does not match call {stopped['call']}'s latest",
            "code": "resume_token_invalid", "retryable": False}}
    assert site.count(HIT) == 1


def test_an_unknown_call_or_another_agents_through_another_node_is_checkpoint_not_found(
        apis: tuple[str, str], site: TestSite) -> None:
    with _client(apis[0]) as alice_r1, _client(apis[1], "bob") as bob_r2, _client(apis[1]) as alice_r2:
        unknown = _resume(alice_r2, 987_654_321, "no-such-token")
        assert (unknown.status_code, unknown.json()["code"]) == (404, "checkpoint_not_found"), unknown.text
        stopped = _stopped_call(alice_r1, site, "node-r1")
        bobs = _resume(bob_r2, stopped["call"], stopped["resume_token"])  # the right token, the wrong agent
        assert (bobs.status_code, bobs.json()["code"]) == (404, "checkpoint_not_found"), bobs.text
        alices = _resume(alice_r2, stopped["call"], stopped["resume_token"])  # left as it was
        assert alices.status_code == 200 and alices.json()["call"] == stopped["call"], alices.text
    assert site.count(HIT) == 1


@pytest.mark.parametrize("answers_pings", [False, True], ids=["never-answers", "gone-mid-resume"])
def test_a_holder_that_does_not_answer_is_fleet_unavailable_within_seconds_not_the_forwards_timeout(
        nats_cluster: ClusterAccess, nodes: tuple[Node, Node], apis: tuple[str, str], answers_pings: bool) -> None:
    call = 876_543_210 + answers_pings
    with _silent_holder(nats_cluster, call, answers_pings=answers_pings) as received, _client(apis[1]) as on_r2:
        until(lambda: _reaches(nodes[1], call), 10, "the silent holder's interest reaching node-r2")
        refused = _resume(on_r2, call, "a-token")  # the client waits 60 s; the forward alone would wait 155 s
        assert refused.status_code == 503, refused.text
        assert (refused.json()["code"], refused.json()["retryable"]) == ("fleet_unavailable", True)
    resumes = [r for r in received if r.get("kind") != PingHolder.KIND]
    if answers_pings:  # pinged, sent the resume once, then found gone
        assert [(r["call"], r["resume_token"], r["agent"]) for r in resumes] == [(call, "a-token", "alice")]
    else:  # pinged again and again, and never sent the resume
        assert resumes == [] and len(received) >= 3, received


def test_the_checkpoints_of_a_node_that_died_are_gone_with_it(
        nats_cluster: ClusterAccess, nodes: tuple[Node, Node], apis: tuple[str, str], site: TestSite,
        tmp_path: Path) -> None:
    second = nodes[1]
    doomed = serve(tmp_path, nats_cluster, {"fleet": FLEET, "node_name": "node-r3", "caps": ["core", "automation"]})
    try:
        until(lambda: sees(second, "node-r3"), 10, "node-r3 joining")
        with doomed.client() as on_r3:
            stopped = _stopped_call(on_r3, site, "node-r3", session="on-r3")
        with _client(apis[1]) as on_r2:
            reached = _resume(on_r2, stopped["call"], stopped["resume_token"])  # on node-r3, through node-r2
            assert reached.status_code == 200 and reached.json()["call"] == stopped["call"], reached.text
            doomed.process.kill()  # SIGKILL: its memory, and the checkpoints in it, are gone
            doomed.process.wait(timeout=30)
            gone = _resume(on_r2, stopped["call"], reached.json()["resume_token"])
            assert (gone.status_code, gone.json()["code"]) == (404, "checkpoint_not_found"), gone.text
    finally:
        if doomed.process.poll() is None:
            doomed.process.kill()
    assert site.count(HIT) == 1
