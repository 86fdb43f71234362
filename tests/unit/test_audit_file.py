"""The audit actor's file: lines in the log's order, a rotated or deleted file followed, a vanished
directory failing closed."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from actors.audit_actor import AuditActor, AuditTrail, LocalAuditLog
from actors.loop import IoLoop
from messages.errors import KitsuneError


@pytest.fixture
def trail(tmp_path: Path) -> Iterator[AuditTrail]:
    io = IoLoop()
    actor = AuditActor.start(tmp_path / "logs" / "audit.jsonl")
    (tmp_path / "logs").mkdir()
    recorded = AuditTrail(LocalAuditLog(), io, actor)
    io.run(recorded.start(), timeout=5)
    yield recorded
    io.run(recorded.stop(), timeout=5)
    actor.stop()
    io.close()


def _lines(path: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_entries_are_written_in_order_with_their_ids(trail: AuditTrail, tmp_path: Path) -> None:
    ids = [trail.record({"kind": "step", "n": n}, urgent=n % 2 == 0).result(timeout=5) for n in range(6)]
    assert ids == [1, 2, 3, 4, 5, 6]
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [{"call": n + 1, "kind": "step", "n": n} for n in range(6)]


def test_a_rotated_or_deleted_file_is_followed_by_a_new_one(trail: AuditTrail, tmp_path: Path) -> None:
    path = tmp_path / "logs" / "audit.jsonl"
    trail.record({"n": 0}).result(timeout=5)
    path.rename(tmp_path / "logs" / "audit.jsonl.1")  # rotated
    trail.record({"n": 1}).result(timeout=5)
    assert _lines(tmp_path / "logs" / "audit.jsonl.1") == [{"call": 1, "n": 0}]
    assert _lines(path) == [{"call": 2, "n": 1}]
    path.unlink()  # deleted
    trail.record({"n": 2}).result(timeout=5)
    assert _lines(path) == [{"call": 3, "n": 2}]


def test_an_entry_that_cannot_be_written_fails_closed(trail: AuditTrail, tmp_path: Path) -> None:
    trail.record({"n": 0}).result(timeout=5)
    (tmp_path / "logs").rename(tmp_path / "gone")  # the directory disappears
    with pytest.raises(KitsuneError) as caught:
        trail.record({"n": 1}).result(timeout=5)
    assert caught.value.code == "audit_unavailable"
    (tmp_path / "logs").mkdir()  # back: the next entry is written again
    assert trail.record({"n": 2}).result(timeout=5) == 3
    assert _lines(tmp_path / "logs" / "audit.jsonl") == [{"call": 3, "n": 2}]
