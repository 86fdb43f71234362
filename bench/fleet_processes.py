"""Benchmark: a step on another node's tab against the same step on the tab's own node, both nodes
``kitsune serve`` processes, as a fleet runs (``bench/fleet.py`` runs both nodes in its own process).

A nats-server (the embedded kind, with its node user) and two ``kitsune serve`` nodes joining it in
one fleet, ``pa`` and ``pb``; pb holds one tab of the test site's /clicks page. The same batch of
40 ``title`` reads on that tab goes through pa's HTTP API (remote: every step a NATS request to pb
and its reply) and through pb's (local), in turn, reversed every other round. The added cost of a
remote step is the median over rounds of (remote call - local call) / 40: both calls pay the same
HTTP request, parse and audit, so what is left is the steps'. Target: <= 0.5 ms (issue 14).

The floor under it, in the same rounds: 40 bare NATS requests and replies from this process to a
responder process on the same nats-server (nats-py at both ends, no Kitsune code), the responder
holding each for as long as a local step took in that round (as pb holds a request while its tab
works), minus the time it held it. A remote step cannot cost less than that round trip at that pace.

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

from bench.shared import load_line
from bridge.nats_server import EmbeddedNats
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

    def added(self, hold: float, requests: int) -> float:
        """Seconds each of ``requests`` round trips took beyond the ``hold`` seconds the responder held it."""
        async def round_trips() -> list[float]:
            extra = []
            for _ in range(requests):
                started = time.perf_counter()
                reply = await self._client.request(FLOOR_SUBJECT, repr(hold).encode(), timeout=5)
                extra.append(time.perf_counter() - started - float(reply.data))
            return extra
        return statistics.median(self._loop.run_until_complete(round_trips()))

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
    try:
        with TestSite() as site, tempfile.TemporaryDirectory(prefix="kitsune-bench-") as root:
            for name in ("pa", "pb"):
                (Path(root) / name).mkdir()
                nodes.append(serve(Path(root) / name, access, {"fleet": "bench", "node_name": name,
                                                               "caps": ["core", "automation"]}))
            with nodes[0].client() as remote, nodes[1].client() as local:
                opened = local.post("/api/tabs", json={"op": "open", "url": site.url("/clicks")}).json()
                body = {"tabId": opened["tabId"], "commands": [{"action": "title"}] * READS}
                for _ in range(WARMUP):
                    timed(remote, body)
                    timed(local, body)
                pairs, floors = [], []
                for r in range(args.rounds):
                    order = (remote, local) if r % 2 == 0 else (local, remote)
                    took = {id(client): timed(client, body) for client in order}
                    pairs.append((took[id(remote)], took[id(local)]))
                    floors.append(floor.added(took[id(local)] / READS, READS))
    finally:
        floor.close()
        for node in nodes:
            node.stop()
        nats.stop()
    added = statistics.median((r - lo) / READS * 1e3 for r, lo in pairs)
    print(f"fleet as processes: pa and pb (kitsune serve) on one nats-server, {args.rounds} rounds of a "
          f"{READS}-read batch on pb's tab, {os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    print(f"  through pa (remote) median {statistics.median(r for r, _ in pairs) * 1e3:.1f} ms, through pb "
          f"(local) {statistics.median(lo for _, lo in pairs) * 1e3:.1f} ms a batch")
    print(f"  added cost of a remote step: {added:+.2f} ms (target <= {REMOTE_TARGET_MS} ms: "
          f"{'met' if added <= REMOTE_TARGET_MS else 'NOT met'})")
    bare = statistics.median(floors) * 1e3
    print(f"  the floor: a bare NATS request and reply between two processes at the same pace {bare:.2f} ms; "
          f"the remote step over it {added - bare:+.2f} ms")


if __name__ == "__main__":
    main()
