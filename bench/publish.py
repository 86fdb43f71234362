"""Benchmark: an acknowledged JetStream publish, nats-py's ``publish_async`` against ``actors.acked.AckedPublisher``.

One embedded nats-server (as a node starts it), the audit stream (file storage); bursts of acknowledged publishes of an
audit entry's size, each burst awaited whole, the two ways in alternate rounds on one connection. Prints, a publish,
the process's CPU (its own: the client's work, the acknowledgement's reading) and nats-server's, and the wall time;
medians over the rounds and of the paired differences.

    .venv/bin/python bench/publish.py [--rounds N] [--publishes N] [--burst N]
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root

import nats

from actors.acked import AckedPublisher
from actors.audit_actor import AUDIT_SUBJECT, audit_config
from actors.jetstream import AckDeadlines, ensure_stream
from actors.nats_server import EmbeddedNats
from bench.shared import load_line

ENTRY = (b'{"kind":"step","time":1765140000.123,"agent":"bench","action":"title","tabId":3,"params":{},'
         b'"parent":{"call":12345,"path":"17"}}')
FIGURES = ("client CPU", "nats-server CPU", "wall")


def _server_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _measure(options: argparse.Namespace) -> dict[str, list[tuple[float, ...]]]:
    server = EmbeddedNats(fleet=None)
    url = server.start()
    try:
        client = await nats.connect(url, user=server.auth.user, password=server.auth.password)
        await ensure_stream(client, audit_config())
        js, deadlines, acked = client.jetstream(), AckDeadlines(5.0), AckedPublisher(client, 5.0)

        async def nats_py(data: bytes) -> Awaitable[Any]:
            return deadlines.within(await js.publish_async(AUDIT_SUBJECT, data))
        ways: dict[str, Callable[[bytes], Awaitable[Awaitable[Any]]]] = {
            "publish_async": nats_py, "AckedPublisher": lambda data: acked.publish(AUDIT_SUBJECT, data)}
        pid = server.pid
        assert pid is not None
        rounds: dict[str, list[tuple[float, ...]]] = {way: [] for way in ways}
        for r in range(options.rounds + 1):
            for way in (list(ways) if r % 2 == 0 else list(reversed(ways))):
                publish = ways[way]
                cpu, nats_cpu, wall = time.process_time(), _server_seconds(pid), time.perf_counter()
                for _ in range(options.publishes // options.burst):
                    answers = [await publish(ENTRY) for _ in range(options.burst)]
                    for answer in answers:
                        await answer
                per = 1e6 / options.publishes
                if r:  # the first round warms up
                    rounds[way].append(((time.process_time() - cpu) * per, (_server_seconds(pid) - nats_cpu) * per,
                                        (time.perf_counter() - wall) * per))
        await client.close()
        return rounds
    finally:
        server.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10)
    parser.add_argument("--publishes", type=int, default=2000, help="publishes a round")
    parser.add_argument("--burst", type=int, default=5, help="publishes on their way at once")
    options = parser.parse_args()
    load_before = os.getloadavg()
    rounds = asyncio.run(_measure(options))
    print(f"an acknowledged publish: {options.rounds} rounds of {options.publishes} a way, in bursts of "
          f"{options.burst}, {os.cpu_count()} CPUs")
    print(load_line(load_before, os.getloadavg()))
    print("  way            | " + " | ".join(f"{name:>15s}" for name in FIGURES))
    for way, figures in rounds.items():
        print(f"  {way:14s} | " + " | ".join(f"{statistics.median(f[i] for f in figures):15.1f}"
                                            for i in range(len(FIGURES))))
    old, new = rounds["publish_async"], rounds["AckedPublisher"]
    paired = [statistics.median(b[i] - a[i] for a, b in zip(old, new, strict=True)) for i in range(len(FIGURES))]
    print("  paired diff    | " + " | ".join(f"{diff:+15.1f}" for diff in paired))
    print("microseconds a publish (nats-server's CPU in clock ticks over the round); paired diff: AckedPublisher - "
          "publish_async")


if __name__ == "__main__":
    main()
