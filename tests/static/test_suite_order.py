"""The suite's order (tests/conftest.py): every file it names to hand out first is a test file of the suite."""

from __future__ import annotations

from tests.conftest import LONGEST_FIRST, TESTS


def test_every_file_named_longest_first_is_a_test_file() -> None:
    assert [name for name in LONGEST_FIRST if not (TESTS / name).is_file()] == []
    assert len(set(LONGEST_FIRST)) == len(LONGEST_FIRST)
