"""The error-code registry: every code the package raises or answers is in it, with its status."""

from __future__ import annotations

import logging
import re
from pathlib import Path

import pytest

from messages.errors import ERROR_CODES, UNKNOWN_CODE_STATUS, KitsuneError

ROOT = Path(__file__).resolve().parents[2]
LAYERS = ("messages", "core", "actors", "driver", "bridge", "mcp_gateway", "kitsune")
_STRINGS = r'(?:[rbf]{0,2}"(?:[^"\\\n]|\\.)*"\s*)+'
_CODE = r'"([a-z][a-z0-9_]*)"'
CODE_LITERALS = [
    re.compile(r"\b(?:KitsuneError|BusError|invalid_call|_error|_?Stop)\(\s*" + _CODE),  # the code first
    re.compile(r"\b(?:Failure|_failure)\(\s*" + _STRINGS + r",\s*" + _CODE),  # the message, then the code
    re.compile(r"\bmessage, code = \(?" + _STRINGS + r",\s*" + _CODE),
    re.compile(r'"code\\?"\s*:\s*\\?"([a-z][a-z0-9_]*)\\?"'),  # a body written out
    re.compile(r"\bcode\s*=\s*" + _CODE),
]


def _code_literals() -> dict[str, set[str]]:
    found: dict[str, set[str]] = {}
    for layer in LAYERS:
        for path in sorted((ROOT / layer).rglob("*.py")):
            text = path.read_text()
            for pattern in CODE_LITERALS:
                for match in pattern.finditer(text):
                    found.setdefault(match.group(1), set()).add(str(path.relative_to(ROOT)))
    return found


def test_every_code_literal_of_the_package_is_in_the_registry() -> None:
    found = _code_literals()
    assert {"tab_ids_unavailable", "confirm_token_invalid", "node_stopped", "duplicate_key", "duplicate_header",
            "too_deep", "not_found", "bridge_unavailable"} <= set(found)  # the patterns do find codes
    missing = {code: sorted(paths) for code, paths in found.items() if code not in ERROR_CODES}
    assert missing == {}


def test_registry_entries_are_named_by_their_key_with_a_real_status() -> None:
    for name, code in ERROR_CODES.items():
        assert code.name == name and 200 <= code.http_status < 600


@pytest.mark.parametrize(("code", "status"), [
    ("tab_ids_unavailable", 503), ("invalid_call", 400), ("body_too_large", 413), ("unauthorized", 401),
    ("checkpoint_not_found", 404), ("resume_token_invalid", 403), ("workflow_changed", 409),
    ("resume_failed", 200), ("bus_timeout", 504), ("tab_closed", 400),
])
def test_an_error_answers_its_codes_status(code: str, status: int) -> None:
    assert KitsuneError(code, "x").http_status == status


def test_retryable_defaults_to_the_codes_and_a_given_value_wins() -> None:
    assert KitsuneError("tab_ids_unavailable", "x").retryable
    assert not KitsuneError("browser_unavailable", "x").retryable
    assert KitsuneError("browser_unavailable", "x", retryable=True).retryable
    assert not KitsuneError("no_such_code", "x").retryable


def test_an_unknown_code_answers_500_with_a_warning(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.WARNING, logger="messages.errors"):
        assert KitsuneError("no_such_code", "x").http_status == UNKNOWN_CODE_STATUS == 500
    assert "no_such_code" in caplog.text
