"""Strict mypy over the project (``[tool.mypy]`` in pyproject.toml), its run started with the session
(tests/static/typecheck.py) and this file collected last, so that the run is over when the test reads it."""

from __future__ import annotations

import pytest

from tests.static.typecheck import Typecheck


@pytest.mark.timeout(900)  # a cold mypy on a loaded machine took over 300 s (the suite's bound) from its start
def test_the_project_type_checks_strictly(typecheck: Typecheck) -> None:
    status, output = typecheck.result(timeout=840)
    assert status == 0, output
