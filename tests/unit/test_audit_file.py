"""The audit actor's file: lines in the log's order, a burst of entries in one write, an entry on disk
before its waiter hears of it, a rotated or deleted file followed, a vanished directory failing closed;
every kind of entry in the exact form the file and the stream keep."""

from __future__ import annotations

import concurrent.futures
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

import pytest

from actors import audit_actor
from actors.audit_actor import AuditActor, Auditor, AuditTrail, LocalAuditLog
from actors.loop import IoLoop
from messages.audit import AuditEntry, LiveViewEntry, TakeoverEntry
from messages.codec import encode
from messages.commands import parse_call, parse_command
from messages.errors import KitsuneError


@pytest.fixture
def io() -> Iterator[IoLoop]:
    loop = IoLoop()
    yield loop
    loop.close()


@pytest.fixture
def trail(io: IoLoop, tmp_path: Path) -> Iterator[AuditTrail]:
    actor = AuditActor.start(tmp_path / "logs" / "audit.jsonl")
    (tmp_path / "logs").mkdir()
    recorded = AuditTrail(LocalAuditLog(), io, actor)
    io.run(recorded.start(), timeout=5)
    yield recorded
    io.run(recorded.stop(), timeout=5)
    actor.stop()


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _entry(n: int) -> AuditEntry:
    return TakeoverEntry(time=1.5, agent="alice", tab_id=n)


def _line(call: int, n: int) -> dict[str, object]:
    return {"call": call, "time": 1.5, "agent": "alice", "kind": "takeover", "tabId": n}


def test_entries_are_written_in_order_with_their_ids(trail: AuditTrail, tmp_path: Path) -> None:
    ids = [trail.record(_entry(n), urgent=n % 2 == 0).result(timeout=5) for n in range(6)]
    assert ids == [1, 2, 3, 4, 5, 6]
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [_line(n + 1, n) for n in range(6)]


def test_a_burst_goes_to_the_file_in_one_write_in_order(trail: AuditTrail, io: IoLoop, tmp_path: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    writes: list[bytes] = []
    write = audit_actor._write_all

    def counted(file: BinaryIO, data: bytes) -> None:
        writes.append(data)
        write(file, data)
    monkeypatch.setattr(audit_actor, "_write_all", counted)

    async def burst() -> list[concurrent.futures.Future[int]]:  # handed over in one pass of the loop
        return [trail.record(_entry(n), urgent=n == 49) for n in range(50)]
    assert [answer.result(timeout=5) for answer in io.run(burst(), timeout=5)] == list(range(1, 51))
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [_line(n + 1, n) for n in range(50)]
    assert len(writes) == 1


def test_an_entry_is_on_disk_before_its_waiter_hears_of_it(trail: AuditTrail, io: IoLoop, tmp_path: Path) -> None:
    on_disk: concurrent.futures.Future[list[dict[str, object]]] = concurrent.futures.Future()

    async def burst() -> concurrent.futures.Future[int]:
        for n in range(9):
            trail.record(_entry(n), urgent=False)
        answer = trail.record(_entry(9))  # a write's entry, after reads'
        answer.add_done_callback(lambda _: on_disk.set_result(_lines(tmp_path / "logs" / "audit.jsonl")))
        return answer
    assert io.run(burst(), timeout=5).result(timeout=5) == 10
    assert on_disk.result(timeout=5) == [_line(n + 1, n) for n in range(10)]  # as the answer was given


def test_a_read_entry_is_posted_with_nothing_to_answer_and_written_in_its_place(trail: AuditTrail,
                                                                                 tmp_path: Path) -> None:
    """The engine waits only for a write's entry: a read's has no answer, and is written in the stream's order."""
    auditor = Auditor(trail, "alice")
    assert auditor.step(1, "0", parse_command({"action": "title"}), 3, resumed=False) is None
    written = auditor.step(1, "1", parse_command({"action": "click", "selector": "#b"}), 3, resumed=False)
    assert written is not None
    written()
    assert [(line["kind"], line["action"], line["call"]) for line in _lines(tmp_path / "logs" / "audit.jsonl")] == [
        ("step", "title", 1), ("step", "click", 2)]


def test_a_call_s_entry_goes_out_before_anyone_waits_for_its_id(trail: AuditTrail, tmp_path: Path) -> None:
    """``calling`` starts recording at once (the node hands the call to its thread meanwhile); the wait answers
    the entry's id, which is the call's."""
    auditor = Auditor(trail, "alice")
    waiting = auditor.calling(parse_call("batch", [{"action": "title"}]), None)
    path = tmp_path / "logs" / "audit.jsonl"
    deadline = time.monotonic() + 5
    while not path.exists() or not path.read_text():  # written with nobody waiting for it yet
        assert time.monotonic() < deadline, "the call's entry was not written before its wait"
        time.sleep(0.005)
    assert waiting() == 1
    assert _lines(path) == [{"call": 1, "time": _lines(path)[0]["time"], "agent": "alice", "kind": "call",
                             "call_kind": "batch", "commands": 1, "tabId": None}]
    assert auditor.call(parse_call("batch", [{"action": "title"}]), "bob") == 2


def test_a_read_entry_that_cannot_be_written_is_counted_and_raises_nowhere(io: IoLoop, tmp_path: Path) -> None:
    written: list[bool] = []
    actor = AuditActor.start(tmp_path / "gone" / "audit.jsonl", written.append)
    trail = AuditTrail(LocalAuditLog(), io, actor)
    io.run(trail.start(), timeout=5)
    try:
        assert Auditor(trail, "alice").step(1, "0", parse_command({"action": "title"}), 3, resumed=False) is None
        with pytest.raises(KitsuneError):  # the write after it fails closed, once the read's entry was tried
            trail.record(_entry(1)).result(timeout=5)
        assert written == [False, False]
    finally:
        io.run(trail.stop(), timeout=5)
        actor.stop()


def test_an_entry_that_cannot_be_encoded_is_lost_alone(trail: AuditTrail, tmp_path: Path) -> None:
    """Encoded as it is sent (on the loop, once: the line is made of it): one that cannot be is refused as one the
    stream did not keep, and the next entry is numbered and written as ever."""
    unwritable = trail.record(LiveViewEntry(time=1.5, agent="alice", op="opened", tab_id=1, detail={"x": object()}))
    with pytest.raises(KitsuneError) as refused:
        unwritable.result(timeout=5)
    assert refused.value.code == "audit_unavailable"
    assert trail.record(_entry(2)).result(timeout=5) == 1
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [_line(1, 2)]


def test_a_rotated_or_deleted_file_is_followed_by_a_new_one(trail: AuditTrail, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    trail.record(_entry(0)).result(timeout=5)
    path.rename(tmp_path / "logs" / "audit.jsonl.1")  # rotated
    trail.record(_entry(1)).result(timeout=5)
    assert _lines(tmp_path / "logs" / "audit.jsonl.1") == [_line(1, 0)]
    assert _lines(path) == [_line(2, 1)]
    path.unlink()  # deleted
    trail.record(_entry(2)).result(timeout=5)
    assert _lines(path) == [_line(3, 2)]


def test_an_entry_that_cannot_be_written_fails_closed(trail: AuditTrail, tmp_path: Path) -> None:
    trail.record(_entry(0)).result(timeout=5)
    (tmp_path / "logs").rename(tmp_path / "gone")  # the directory disappears
    with pytest.raises(KitsuneError) as caught:
        trail.record(_entry(1)).result(timeout=5)
    assert caught.value.code == "audit_unavailable"
    (tmp_path / "logs").mkdir()  # back: the next entry is written again
    assert trail.record(_entry(2)).result(timeout=5) == 3
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [_line(3, 2)]


def test_every_entry_of_a_burst_that_cannot_be_written_fails_closed(trail: AuditTrail, io: IoLoop,
                                                                     tmp_path: Path) -> None:
    (tmp_path / "logs").rename(tmp_path / "gone")

    async def burst() -> list[concurrent.futures.Future[int]]:
        return [trail.record(_entry(n), urgent=n == 4) for n in range(5)]
    for answer in io.run(burst(), timeout=5):
        with pytest.raises(KitsuneError) as caught:
            answer.result(timeout=5)
        assert (caught.value.code, caught.value.retryable) == ("audit_unavailable", True)
    assert not (tmp_path / "logs").exists()


def test_every_kind_of_entry_keeps_its_exact_form(trail: AuditTrail, tmp_path: Path,
                                                  monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("actors.audit_actor.time.time", lambda: 1700000000.12345)
    auditor = Auditor(trail, "alice")
    typed = parse_command({"action": "type", "selector": "#pw", "text": "hunter2"})
    script = parse_command({"action": "js", "code": "return 600000"})
    auditor.call(parse_call("batch", [{"action": "title"}], default_tab=3), "bob")
    auditor.resume(1, None)
    for written in (auditor.step(1, "0.1", typed, 3, resumed=False), auditor.step(1, "2", script, None, resumed=True)):
        assert written is not None
        written()
    auditor.observed(1, "1", typed, 3)
    auditor.interrupted(None, None, typed, 4)
    auditor.takeover(4)
    auditor.direct(typed, 3).result(timeout=5)
    stamp = '"time":1700000000.123,"agent":'
    assert (tmp_path / "logs" / "audit.jsonl").read_text().splitlines() == [
        '{"call":1,' + stamp + '"bob","kind":"call","call_kind":"batch","commands":1,"tabId":3}',
        '{"call":2,' + stamp + '"alice","kind":"resume","parent":{"call":1}}',
        '{"call":3,' + stamp + '"alice","kind":"step","action":"type","tabId":3,'
        '"params":{"selector":"#pw","text":"[redacted]"},"parent":{"call":1,"path":"0.1"}}',
        '{"call":4,' + stamp + '"alice","kind":"step","action":"js","tabId":null,"params":{},'
        '"parent":{"call":1,"path":"2","resumed":true}}',
        '{"call":5,' + stamp + '"alice","kind":"step","action":"type","tabId":3,'
        '"params":{"selector":"#pw","text":"[redacted]","observed":"applied","sent":false},'
        '"parent":{"call":1,"path":"1","resumed":true}}',
        '{"call":6,' + stamp + '"alice","kind":"interrupted","action":"type","tabId":4,"outcome":"unknown",'
        '"reason":"node_stopped","parent":{"call":null,"path":null}}',
        '{"call":7,' + stamp + '"alice","kind":"takeover","tabId":4}',
        '{"call":8,' + stamp + '"alice","kind":"direct","action":"type","tabId":3,'
        '"params":{"selector":"#pw","text":"[redacted]"}}',
    ]


def test_the_stream_keeps_an_entry_without_its_id() -> None:
    assert encode(_entry(2)) == b'{"time":1.5,"agent":"alice","kind":"takeover","tabId":2}'
