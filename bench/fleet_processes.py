"""Benchmark: a step on another node's tab against the same step on the tab's own node, both nodes
``kitsune serve`` processes, as a fleet runs (``bench/fleet.py`` runs both nodes in its own process).

A nats-server (the embedded kind, with its node user) and two ``kitsune serve`` nodes joining it in
one fleet, ``pa`` and ``pb``; pb holds one tab of the test site's /clicks page. The same batch of
40 ``title`` reads on that tab goes through pa's HTTP API (remote: pa sends the call whole to pb,
``bridge/fleet/calls.py``, where its steps reach the tab through its actor's mailbox) and through
pb's (local), in turn, reversed every other round; so does a batch of one read. The added cost of a
remote step is the median over rounds of (remote call - local call) / 40: both calls pay the same
HTTP request, parse and audit, so what is left is the steps' and the forward's. Target: <= 0.5 ms
(issue 14). The 1-read call shows the forward's cost per call: the call's request and reply between
the nodes.

The floor under that, in the same rounds: a bare NATS request and reply from this process to a
responder process on the same nats-server (nats-py at both ends, no Kitsune code), held for as long
as the local 1-read call took in that round, less the time it was held. A forwarded call cannot cost
less than that round trip.

    .venv/bin/python bench/fleet_processes.py [--rounds N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests and bench

from actors.nats_server import EmbeddedNats
from bench.shared import load_line
from tests.integration.serving import Served, serve
from tests.nats_access import NatsAccess
from tests.site import TestSite

READS = 40
ROUNDS = 30
WARMUP = 2
REMOTE_TARGET_MS = 0.5
FLOOR_SUBJECT = "bench.floor.echo"

RESPONDER = """
import asyncio, os, sys, time
import nats

async def main():
    nc = await nats.connect(sys.argv[1], user=sys.argv[2] or None, password=os.environ.get("FLOOR_PASSWORD"))
    async def hold(msg):
        held = time.perf_counter()
        await asyncio.sleep(float(msg.data))
        await msg.respond(str(time.perf_counter() - held).encode())
    await nc.subscribe(sys.argv[3], cb=hold)
    await nc.flush()
    print("ready", flush=True)
    await asyncio.sleep(3600)

asyncio.run(main())
"""
"""The floor's responder: holds each request for the seconds it names, answers how long it held it."""


def timed(client: httpx.Client, body: dict[str, object]) -> float:
    """Seconds one batch takes through ``client``'s node (it must answer ok)."""
    started = time.perf_counter()
    answer = client.post("/api/batch", json=body).json()
    took = time.perf_counter() - started
    assert answer["status"] == "ok", answer
    return took


class Floor:
    """Bare NATS requests and replies to a responder process, each held there for a given time."""

    def __init__(self, access: NatsAccess) -> None:
        env = {**os.environ, "FLOOR_PASSWORD": access.auth.password or ""}
        self._responder = subprocess.Popen([sys.executable, "-c", RESPONDER, access.url, access.auth.user or "",
                                            FLOOR_SUBJECT], stdout=subprocess.PIPE, env=env)
        assert self._responder.stdout is not None and self._responder.stdout.readline() == b"ready\n"
        self._loop = asyncio.new_event_loop()
        self._client = self._loop.run_until_complete(access.client())

    def added(self, hold: float) -> float:
        """Seconds a request held ``hold`` seconds by the responder took, beyond the hold."""
        async def round_trip() -> float:
            started = time.perf_counter()
            reply = await self._client.request(FLOOR_SUBJECT, repr(hold).encode(), timeout=5)
            return time.perf_counter() - started - float(reply.data)
        return self._loop.run_until_complete(round_trip())

    def close(self) -> None:
        self._loop.run_until_complete(self._client.close())
        self._loop.close()
        self._responder.kill()
        self._responder.wait()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS)
    args = parser.parse_args()
    load_before = os.getloadavg()
    nats = EmbeddedNats(fleet=None)
    access = NatsAccess(nats.start(), nats.auth)
    nodes: list[Served] = []
    floor = Floor(access)
    took: dict[tuple[str, int], list[float]] = {(way, n): [] for way in ("remote", "local") for n in (READS, 1)}
    floors: list[float] = []
    try:
        with TestSite() as site, tempfile.TemporaryDirectory(prefix="kitsune-bench-") as root:
            for name in ("pa", "pb"):
                (Path(root) / name).mkdir()
                nodes.append(serve(Path(root) / name, access, {"fleet": "bench", "node_name": name,
                                                               "caps": ["core", "automation"]}))
            with nodes[0].client() as remote, nodes[1].client() as local:
                opened = local.post("/api/tabs", json={"op": "open", "url": site.url("/clicks")}).json()
                ways = [(way, client, n) for n in (READS, 1) for way, client in (("remote", remote), ("local", local))]
                bodies = {n: {"tabId": opened["tabId"], "commands": [{"action": "title"}] * n} for n in (READS, 1)}
                for _ in range(WARMUP):
                    for _way, client, n in ways:
                        timed(client, bodies[n])
                for r in range(args.rounds):
                    for way, client, n in ways if r % 2 == 0 else ways[::-1]:
                        took[way, n].append(timed(client, bodies[n]))
                    floors.append(floor.added(took["local", 1][-1]))
    finally:
        floor.close()
        for node in nodes:
            node.stop()
        nats.stop()
    per_step = statistics.median((r - lo) / READS * 1e3 for r, lo in zip(took["remote", READS], took["local", READS],
                                                                          strict=True))
    per_call = statistics.median((r - lo) * 1e3 for r, lo in zip(took["remote", 1], took["local", 1], strict=True))
    print(f"fleet as processes: pa and pb (kitsune serve) on one nats-server, {args.rounds} rounds of a "
          f"{READS}-read and a 1-read batch on pb's tab, {os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    for n in (READS, 1):
        print(f"  {n}-read batch: through pa (remote) median {statistics.median(took['remote', n]) * 1e3:.1f} ms, "
              f"through pb (local) {statistics.median(took['local', n]) * 1e3:.1f} ms")
    print(f"  added cost of a remote step ({READS}-step call): {per_step:+.2f} ms (target <= {REMOTE_TARGET_MS} ms: "
          f"{'met' if per_step <= REMOTE_TARGET_MS else 'NOT met'})")
    bare = statistics.median(floors) * 1e3
    print(f"  added cost of a remote 1-step call: {per_call:+.2f} ms; the floor, a request held as long as the "
          f"local call, bare NATS between two processes: {bare:.2f} ms (the forward over it {per_call - bare:+.2f} ms)")


if __name__ == "__main__":
    main()
