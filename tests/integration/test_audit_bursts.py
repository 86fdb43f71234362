"""The audit file under a burst of reads, through a node on the real nats-server and Chromium: every
entry's line, in the stream's order and as the stream keeps it, a write's entry on disk before
the write reaches the driver, and the reads' records sent in one write a linger tick."""

from __future__ import annotations

import asyncio
import json
import secrets
from pathlib import Path
from typing import Any

from actors.buckets import AUDIT_STREAM, AUDIT_SUBJECT
from actors.pipeline import LINGER
from bridge.wiring import run_node
from driver import ChromiumBrowser
from messages.commands import Command, Js, parse_body
from messages.results import Outcome
from tests.integration.fleet_nodes import until
from tests.nats_access import NatsAccess
from tests.nodes import open_user_tab, run_call
from tests.site import TestSite

READS = 40
"""Reads before each write: their entries linger and go to the stream together."""


class WatchingBrowser(ChromiumBrowser):
    """The driver, reading the audit file as each ``js`` step (a write) reaches it."""

    def __init__(self, audit_file: Path, downloads: Path) -> None:
        super().__init__(downloads_dir=downloads)
        self.audit_file = audit_file
        self.at_writes: list[list[dict[str, Any]]] = []

    async def execute(self, command: Command, tab_id: int | None, timeout: float, **options: Any) -> Outcome:
        if isinstance(command, Js):
            self.at_writes.append(_lines(self.audit_file))
        return await super().execute(command, tab_id, timeout, **options)


def _lines(path: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_burst_of_reads_is_written_in_order_and_a_write_s_entry_before_it_is_sent(
        nats_access: NatsAccess, test_site: TestSite, tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    browser = WatchingBrowser(audit_file, tmp_path / "downloads")
    node = run_node(browser, nats_access.node_config(step_timeout=10.0, fleet=f"bursts-{secrets.token_hex(4)}",
                                                     audit_file=audit_file))
    try:
        tab = open_user_tab(node, test_site.url("/clicks"))
        commands = ([{"action": "title"}] * READS + [{"action": "js", "code": "return 1"}]) * 2
        body = run_call(node, parse_body("batch", {"commands": commands, "tabId": tab})).body
        assert body["status"] == "ok", body["summary"]
    finally:
        node.stop()  # the last reads' entries may linger past the call's end: written as the node stops
    written = _lines(audit_file)
    kept = asyncio.run(_kept(nats_access, [entry["call"] for entry in written]))
    steps = [entry for entry in written if entry["kind"] == "step"]
    writes = [n for n, command in enumerate(commands) if command["action"] == "js"]
    first, second = writes  # the second recorded ahead as the first is sent, before the reads between (core.ahead)
    order = [*range(first + 1), second, *range(first + 1, second)]
    assert [entry["parent"]["path"] for entry in steps] == [str(n) for n in order]
    assert [entry["action"] for entry in steps] == [commands[n]["action"] for n in order]
    ids = [entry["call"] for entry in written]
    assert ids == sorted(ids) and len(set(ids)) == len(ids)  # the stream's order, each entry once
    assert kept == [{k: v for k, v in entry.items() if k != "call"} for entry in written]  # the stream's entries
    for at_write, path in zip(browser.at_writes, writes, strict=True):  # its entry and all before it on disk
        before = [str(n) for n in order[:order.index(path) + 1]]
        assert [entry["parent"]["path"] for entry in at_write if entry["kind"] == "step"][:len(before)] == before
    assert "return 1" not in audit_file.read_text()  # a JavaScript body is never audited


async def _kept(access: NatsAccess, seqs: list[int]) -> list[Any]:
    """The audit stream's entries of sequences ``seqs``."""
    client = await access.client()
    try:
        js = client.jetstream()
        return [json.loads((await js.get_msg(AUDIT_STREAM, seq)).data or b"null") for seq in seqs]
    finally:
        await client.close()


def test_a_reads_records_go_to_nats_in_one_write_a_linger_tick(nats_access: NatsAccess, test_site: TestSite,
                                                                tmp_path: Path) -> None:
    """A batch of reads: each read's events and audit entry linger to the loop's next linger tick, which the event
    and audit writers share, so their records leave in one write to the NATS socket a tick (not one a writer)."""
    node = run_node(ChromiumBrowser(downloads_dir=tmp_path / "downloads"), nats_access.node_config(
        fleet=f"ticks-{secrets.token_hex(4)}", audit_file=tmp_path / "audit.jsonl"))
    try:
        tab = open_user_tab(node, test_site.url("/clicks"))
        spec = parse_body("batch", {"commands": [{"action": "title"}] * 200, "tabId": tab})
        transport = node.bus.client._transport  # the real client's socket, watched
        assert transport is not None
        published: list[bytes] = []
        writelines = transport.writelines

        def watched(commands: list[bytes]) -> None:
            sent = b"".join(commands)
            if b"PUB " in sent:
                published.append(sent)
            writelines(commands)
        transport.writelines = watched  # type: ignore[method-assign, assignment]
        started = node.io.loop.time()
        try:
            assert run_call(node, spec).body["status"] == "ok"
            until(lambda: sum(sent.count(AUDIT_SUBJECT.encode()) for sent in published) > 200, 10,
                  "the last reads' entries going out (they linger past the call's end)")
            ticks = int(node.io.loop.time() // LINGER - started // LINGER) + 1
        finally:
            transport.writelines = writelines  # type: ignore[method-assign]
    finally:
        node.stop()
    assert len(published) <= ticks + 3, (len(published), ticks)  # one write a tick; the call's start and end urgent
