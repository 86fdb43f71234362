"""Strict mypy over the project (``[tool.mypy]`` in pyproject.toml), its run started with the session
(tests/static/typecheck.py) and this file collected last, so that the run is over when the test reads it."""

from __future__ import annotations

from tests.static.typecheck import Typecheck


def test_the_project_type_checks_strictly(typecheck: Typecheck) -> None:
    status, output = typecheck.result()
    assert status == 0, output
