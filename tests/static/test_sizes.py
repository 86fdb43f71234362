"""The package stays readable: no module over 500 lines, no function over 60 lines."""

from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("messages", "core", "actors", "driver", "bridge", "mcp_gateway", "kitsune")
MODULE_LINES = 500
FUNCTION_LINES = 60


def _modules() -> list[Path]:
    return sorted(path for package in PACKAGES for path in (ROOT / package).rglob("*.py"))


def test_the_package_is_where_this_test_looks() -> None:
    assert len(_modules()) > 40


def test_no_module_is_over_500_lines() -> None:
    long = {str(p.relative_to(ROOT)): n for p in _modules() if (n := len(p.read_text().splitlines())) > MODULE_LINES}
    assert long == {}


def test_no_function_is_over_60_lines() -> None:
    long = {f"{path.relative_to(ROOT)}:{node.lineno} {node.name}": node.end_lineno - node.lineno + 1
            for path in _modules() for node in ast.walk(ast.parse(path.read_text()))
            if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and node.end_lineno is not None
            and node.end_lineno - node.lineno + 1 > FUNCTION_LINES}
    assert long == {}
