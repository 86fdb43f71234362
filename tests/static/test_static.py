"""Static checks run as tests: ruff, strict mypy on the pure core, and the core's purity."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import jsonschema

from messages.commands import ACTIONS
from messages.schema import batch_schema, command_schema, parallel_schema

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent

PURE_CORE = ["messages.commands", "messages.references", "messages.results", "messages.errors", "messages.events",
             "messages.steplog", "messages.codec", "messages.schema", "messages.tokens", "messages.contract",
             "core.engine", "core.claims", "core.checkpoints", "core.resume", "core.calls",
             "bridge.workflows", "bridge.url_policy"]
IO_LIBRARIES = ["nats", "playwright", "starlette", "uvicorn", "pykka", "mcp", "prometheus_client", "httpx",
                "asyncio", "socket"]


def _run(*command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, check=False)


def test_ruff_finds_nothing() -> None:
    result = _run(str(BIN / "ruff"), "check", ".")
    assert result.returncode == 0, result.stdout + result.stderr


def test_pure_core_type_checks_strictly() -> None:
    result = _run(str(BIN / "mypy"))
    assert result.returncode == 0, result.stdout + result.stderr


def test_pure_core_imports_no_io_library() -> None:
    probe = (f"import sys; import {', '.join(PURE_CORE)}; "
             f"print(sorted(m for m in {IO_LIBRARIES!r} if m in sys.modules))")
    result = _run(sys.executable, "-c", probe)
    assert result.returncode == 0, result.stderr
    assert json.loads(result.stdout.replace("'", '"')) == []


def test_layers_import_downwards_only() -> None:
    """messages/ imports no other layer; actors/ imports messages/ but never the bridge or the gateway."""
    below = {"messages": ("actors", "bridge", "mcp_gateway"), "actors": ("bridge", "mcp_gateway")}
    upward = [f"{path.relative_to(ROOT)}: {line.strip()}"
              for layer, above in below.items() for path in sorted((ROOT / layer).glob("*.py"))
              for line in path.read_text().splitlines()
              if line.startswith(("from ", "import ")) and line.split()[1].split(".")[0] in above]
    assert upward == []


def test_schema_is_valid_json_schema_and_accepts_what_the_parser_accepts() -> None:
    for schema in (command_schema(), batch_schema(), parallel_schema()):
        jsonschema.Draft202012Validator.check_schema(schema)
    validator = jsonschema.Draft202012Validator(batch_schema())
    body = {"commands": [
        {"action": "newTab", "url": "http://example.test/"},
        {"action": "type", "tabId": "${$0.tabId}", "selector": "#q", "text": "hello", "submit": True},
        {"action": "if", "condition": "document.title", "then": [{"action": "click", "selector": "a"}]},
        {"action": "parallel", "sequences": [[{"action": "pageText"}], [{"action": "url", "tabId": 2}]]},
    ], "stopOnWarning": True}
    assert list(validator.iter_errors(body)) == []
    assert list(validator.iter_errors({"commands": [{"action": "clickk", "selector": "a"}]}))
    assert list(validator.iter_errors({"commands": [{"action": "click"}]}))


def test_schema_names_every_action() -> None:
    assert set(ACTIONS) <= set(command_schema()["$defs"])
