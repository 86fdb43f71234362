"""Workflows (spec: Workflows, Errors) and their files (core/workflows.py).

A workflow checkpoint keeps the SHA-256 of the file it ran and the call's default tab; a resume
runs the stored commands, so the variables cannot change, and a changed or missing file is
refused with ``workflow_changed`` before anything is sent.
"""

from __future__ import annotations

import hashlib
import inspect
import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from actors.threads import ThreadedSequences
from bridge.workflows import WorkflowLibrary
from core.calls import Calls, SequentialIds
from core.checkpoints import WorkflowSource
from core.engine import Ports
from core.ports import Recorded
from core.workflows import Workflow, parse_workflow
from messages.commands import Command, parse_call
from messages.errors import KitsuneError
from messages.results import Outcome
from tests.unit.fakes import World
from tests.unit.helpers import batch, refused, snapshot

CHECKOUT = b"""\
name: checkout
description: Buy what is in the cart
variables:
  email: {required: true, description: Where the receipt goes}
  base: {default: "https://shop.example"}
  quantity: {default: 1}
commands:
  - {action: navigate, url: "{{base}}/cart", label: open cart}
  - {action: fill, selector: "#email", value: "{{email}}", label: email}
  - {action: click, selector: "#pay"}
  - {action: pageText, selector: "#receipt"}
"""


# --- helpers -----------------------------------------------------------------------------------


class LibraryWorld(World):
    """A world whose calls check workflow files in a real :class:`WorkflowLibrary`."""

    def __init__(self, directory: Path) -> None:
        super().__init__()
        self.library = WorkflowLibrary(directory)
        self.directory = directory
        self.calls = Calls(lambda agent: Ports(self.driver, self.clock, self.claims, ThreadedSequences()), self.store,
                           audit=SequentialIds(), sink=self.events.append,
                           workflow_sha256=self.library.sha256)
        self.seen: list[tuple[Command, int | None]] = []
        original = self.driver.execute

        def execute(command: Command, tab_id: int | None, timeout: float,
                    recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
            self.seen.append((command, tab_id))
            return original(command, tab_id, timeout, recorded, as_read=as_read)

        self.driver.execute = execute  # type: ignore[method-assign]

    def write(self, name: str, data: bytes, suffix: str = ".yaml") -> Path:
        path = self.directory / (name + suffix)
        path.write_bytes(data)
        return path

    def run_workflow(self, name: str, variables: Any, **options: Any) -> dict[str, Any]:
        spec, source = self.library.load(name).call_spec(variables, **options)
        return self.calls.run(spec, source).body


def checkout_world(tmp_path: Path) -> tuple[LibraryWorld, dict[str, Any]]:
    """Run the checkout workflow; its click on #pay fails, so it keeps a checkpoint."""
    world = LibraryWorld(tmp_path)
    world.write("checkout", CHECKOUT)
    world.driver.on("#pay", "fail")
    body = world.run_workflow("checkout", {"email": "kit@example.org"}, default_tab=3)
    assert body["status"] == "failed"
    return world, body


# --- workflow calls and their checkpoints ------------------------------------------------------


def test_workflow_response_has_workflow_and_steps(tmp_path: Path) -> None:
    _, body = checkout_world(tmp_path)
    assert body["workflow"] == "checkout"
    assert body["steps"] == [
        {"index": 0, "name": "open cart", "status": "ok"},
        {"index": 1, "name": "email", "status": "ok"},
        {"index": 2, "name": "step 2", "status": "failed"},
        {"index": 3, "name": "step 3", "status": "skipped"},
    ]
    assert {"results", "progress", "status", "summary", "call", "resume_token"} <= set(body)


def test_resumed_workflow_response_has_workflow_and_steps(tmp_path: Path) -> None:
    world, body = checkout_world(tmp_path)
    again = world.calls.resume(body["call"], body["resume_token"]).body
    assert again["status"] == "ok"
    assert again["workflow"] == "checkout"
    assert [s["status"] for s in again["steps"]] == ["ok", "ok", "ok", "ok"]
    assert [s["name"] for s in again["steps"]] == ["open cart", "email", "step 2", "step 3"]
    assert world.driver.writes_sent("open cart") == 1
    assert world.driver.writes_sent("email") == 1
    assert world.drops == [(body["call"], "resumed_ok")]


def test_workflow_checkpoint_keeps_the_sha256_of_the_workflow_file(tmp_path: Path) -> None:
    world, body = checkout_world(tmp_path)
    checkpoint = snapshot(world, body)
    assert checkpoint.workflow == WorkflowSource("checkout", hashlib.sha256(CHECKOUT).hexdigest())
    assert checkpoint.spec.kind == "workflow"


def test_workflow_changed_409_when_the_file_changed_sends_nothing_and_leaves_the_checkpoint(tmp_path: Path) -> None:
    world, body = checkout_world(tmp_path)
    before, sent = snapshot(world, body), len(world.driver.sent)
    world.write("checkout", CHECKOUT.replace(b"#pay", b"#pay-now"))
    error = refused(world, body)
    assert (error.code, error.http_status) == ("workflow_changed", 409)
    assert error.state == {"workflow": "checkout"}
    assert len(world.driver.sent) == sent
    assert snapshot(world, body) == before
    assert world.drops == []
    world.write("checkout", CHECKOUT)  # the same file again: the same token still works
    assert world.calls.resume(body["call"], body["resume_token"]).body["status"] == "ok"


def test_workflow_changed_when_the_workflow_file_is_gone(tmp_path: Path) -> None:
    world, body = checkout_world(tmp_path)
    before, sent = snapshot(world, body), len(world.driver.sent)
    (tmp_path / "checkout.yaml").unlink()
    error = refused(world, body)
    assert (error.code, error.http_status) == ("workflow_changed", 409)
    assert len(world.driver.sent) == sent
    assert snapshot(world, body) == before


def test_workflow_changed_is_refused_before_observed_is_looked_at(tmp_path: Path) -> None:
    world = LibraryWorld(tmp_path)
    world.write("checkout", CHECKOUT)
    world.driver.on("#pay", "unknown")
    body = world.run_workflow("checkout", {"email": "kit@example.org"}, default_tab=3)
    world.write("checkout", CHECKOUT + b"\n# edited\n")
    assert refused(world, body).code == "workflow_changed"
    assert refused(world, body, {"2": "not_applied"}).code == "workflow_changed"
    assert world.driver.writes_sent("#pay") == 1


def test_workflow_changed_with_workflow_hashes_of_the_world() -> None:
    world = World()
    world.workflow_hashes["daily"] = "h1"
    world.driver.on("#b", "fail")
    spec = parse_call("workflow", [{"action": "click", "selector": "#a"}, {"action": "click", "selector": "#b"}],
                      default_tab=3)
    body = world.calls.run(spec, WorkflowSource("daily", "h1")).body
    world.workflow_hashes["daily"] = "h2"
    error = refused(world, body)
    assert (error.code, error.http_status, error.state) == ("workflow_changed", 409, {"workflow": "daily"})
    del world.workflow_hashes["daily"]
    assert refused(world, body).code == "workflow_changed"
    assert world.driver.writes_sent("#b") == 1
    world.workflow_hashes["daily"] = "h1"
    again = world.calls.resume(body["call"], body["resume_token"]).body
    assert again["status"] == "ok"
    assert world.driver.writes_sent("#a") == 1


def test_batch_checkpoint_does_not_check_any_workflow() -> None:
    world = World()
    world.driver.on("#b", "fail")
    body = world.calls.run(batch({"action": "click", "selector": "#b"})).body
    assert "workflow" not in body
    assert snapshot(world, body).workflow is None
    assert world.calls.resume(body["call"], body["resume_token"]).body["status"] == "ok"


def test_resume_runs_the_stored_commands_variables_cannot_change(tmp_path: Path) -> None:
    world = LibraryWorld(tmp_path)
    world.write("checkout", CHECKOUT)
    world.driver.on("email", "fail")
    body = world.run_workflow("checkout", {"email": "kit@example.org", "quantity": 2}, default_tab=3)
    assert "variables" not in inspect.signature(Calls.resume).parameters
    world.seen.clear()
    again = world.calls.resume(body["call"], body["resume_token"]).body
    assert again["status"] == "ok"
    fills = [c for c, _ in world.seen if c.action == "fill"]
    assert [f.value for f in fills] == ["kit@example.org"]  # type: ignore[attr-defined]
    navigations = [c for c, _ in world.seen if c.action == "navigate"]
    assert navigations == []  # ran ok: kept


def test_default_tab_of_the_batch_is_kept_for_steps_that_name_no_tab(tmp_path: Path) -> None:
    world = LibraryWorld(tmp_path)
    world.driver.on("#b", "fail")
    body = world.calls.run(batch({"action": "click", "selector": "#a"}, {"action": "click", "selector": "#b"},
                                 {"action": "click", "selector": "#c", "tabId": 1}, default_tab=3)).body
    world.calls.run(batch({"action": "switchTab", "tabId": 2}, default_tab=2))  # the agent selected another tab
    world.seen.clear()
    assert world.calls.resume(body["call"], body["resume_token"]).body["status"] == "ok"
    assert [(c.action, getattr(c, "selector", None), tab) for c, tab in world.seen] == [
        ("click", "#b", 3), ("click", "#c", 1)]


def test_default_tab_of_a_workflow_is_kept(tmp_path: Path) -> None:
    world, body = checkout_world(tmp_path)
    assert snapshot(world, body).spec.default_tab == 3
    world.seen.clear()
    world.calls.resume(body["call"], body["resume_token"])
    assert [(c.action, tab) for c, tab in world.seen] == [("click", 3), ("pageText", 3)]


# --- parse_workflow ----------------------------------------------------------------------------


def test_parse_yaml_workflow() -> None:
    workflow = parse_workflow("checkout", CHECKOUT)
    assert isinstance(workflow, Workflow)
    assert workflow.name == "checkout"
    assert workflow.description == "Buy what is in the cart"
    assert set(workflow.variables) == {"email", "base", "quantity"}
    assert workflow.variables["email"]["required"] is True
    assert workflow.commands[0] == {"action": "navigate", "url": "{{base}}/cart", "label": "open cart"}
    assert workflow.sha256 == hashlib.sha256(CHECKOUT).hexdigest()


def test_parse_json_workflow() -> None:
    data = json.dumps({
        "description": "Search",
        "variables": {"q": {"required": True}},
        "commands": [{"action": "fill", "selector": "#q", "value": "{{q}}"}, {"action": "press", "key": "Enter"}],
    }).encode()
    workflow = parse_workflow("search", data)
    assert workflow.name == "search"
    assert workflow.description == "Search"
    assert workflow.instantiate({"q": "kitsune"}) == [
        {"action": "fill", "selector": "#q", "value": "kitsune"}, {"action": "press", "key": "Enter"}]
    assert workflow.sha256 == hashlib.sha256(data).hexdigest()


def _workflow(commands: list[Any], variables: dict[str, Any]) -> Workflow:
    return parse_workflow("w", json.dumps({"variables": variables, "commands": commands}).encode())


@pytest.mark.parametrize("value", [2, 2.5, True, False, None, ["a", "b"], {"k": 1}, "text"])
def test_whole_string_variable_keeps_its_type(value: Any) -> None:
    workflow = _workflow([{"action": "x", "v": "{{value}}", "w": "{{ value }}"}], {"value": {"required": True}})
    assert workflow.instantiate({"value": value}) == [{"action": "x", "v": value, "w": value}]


@pytest.mark.parametrize(("value", "text"), [
    (2, "2"), (2.5, "2.5"), (True, "true"), (False, "false"), (None, ""), ("abc", "abc")])
def test_embedded_variable_becomes_text(value: Any, text: str) -> None:
    workflow = _workflow([{"action": "x", "v": "n={{value}}!", "list": ["[{{value}}]"]}], {"value": {}})
    assert workflow.instantiate({"value": value}) == [{"action": "x", "v": f"n={text}!", "list": [f"[{text}]"]}]


def test_variable_defaults_are_used_when_not_given() -> None:
    workflow = parse_workflow("checkout", CHECKOUT)
    commands = workflow.instantiate({"email": "kit@example.org"})
    assert commands[0]["url"] == "https://shop.example/cart"
    scalar = _workflow([{"action": "x", "n": "{{n}}"}], {"n": 7})  # a scalar declaration is its default
    assert scalar.instantiate(None) == [{"action": "x", "n": 7}]
    assert scalar.instantiate({"n": 8}) == [{"action": "x", "n": 8}]


def test_missing_required_variable() -> None:
    workflow = parse_workflow("checkout", CHECKOUT)
    with pytest.raises(KitsuneError) as raised:
        workflow.instantiate({})
    assert raised.value.code == "missing_parameter"
    assert raised.value.http_status == 400
    assert raised.value.state == {"param": "variables", "variable": "email"}


def test_unknown_variable() -> None:
    workflow = parse_workflow("checkout", CHECKOUT)
    with pytest.raises(KitsuneError) as raised:
        workflow.instantiate({"email": "kit@example.org", "coupon": "FREE"})
    assert raised.value.code == "invalid_parameter"
    assert raised.value.state == {"param": "variables", "variable": "coupon"}


def test_variables_that_are_not_an_object_are_invalid() -> None:
    with pytest.raises(KitsuneError) as raised:
        parse_workflow("checkout", CHECKOUT).instantiate(["kit@example.org"])
    assert raised.value.code == "invalid_parameter"


def test_undeclared_variable_in_commands_is_invalid_workflow() -> None:
    data = b"commands:\n  - {action: navigate, url: '{{base}}/x'}\n"
    with pytest.raises(KitsuneError) as raised:
        parse_workflow("w", data)
    assert (raised.value.code, raised.value.http_status) == ("invalid_workflow", 400)
    assert raised.value.state == {"workflow": "w"}
    assert "base" in raised.value.message


@pytest.mark.parametrize("data", [
    b"commands: [unclosed",
    b"- just\n- a list\n",
    b"description: no commands\n",
    b"commands: []\n",
    b"commands: {action: click}\n",
    b"variables: [a, b]\ncommands:\n  - {action: click, selector: '#a'}\n",
    b"variables: {'bad-name': 1}\ncommands:\n  - {action: click, selector: '#a'}\n",
    b"",
])
def test_malformed_workflow_file_is_invalid_workflow(data: bytes) -> None:
    with pytest.raises(KitsuneError) as raised:
        parse_workflow("w", data)
    assert (raised.value.code, raised.value.http_status) == ("invalid_workflow", 400)


def test_workflow_call_spec_is_a_validated_workflow_call() -> None:
    spec, source = parse_workflow("checkout", CHECKOUT).call_spec({"email": "kit@example.org"}, default_tab=4)
    assert spec.kind == "workflow"
    assert spec.default_tab == 4
    assert spec.commands[1].value == "kit@example.org"  # type: ignore[attr-defined]
    assert source == WorkflowSource("checkout", hashlib.sha256(CHECKOUT).hexdigest())


# --- WorkflowLibrary ---------------------------------------------------------------------------


@pytest.mark.parametrize("suffix", [".yaml", ".yml", ".json"])
def test_library_loads_yaml_and_json_files(tmp_path: Path, suffix: str) -> None:
    data = CHECKOUT if suffix != ".json" else json.dumps(
        {"commands": [{"action": "click", "selector": "#a"}]}).encode()
    (tmp_path / ("flow" + suffix)).write_bytes(data)
    library = WorkflowLibrary(tmp_path)
    workflow = library.load("flow")
    assert workflow.name == "flow"
    assert workflow.sha256 == hashlib.sha256(data).hexdigest()
    assert library.names() == ["flow"]


def test_library_load_of_a_missing_workflow_is_workflow_not_found(tmp_path: Path) -> None:
    with pytest.raises(KitsuneError) as raised:
        WorkflowLibrary(tmp_path).load("nothing")
    assert (raised.value.code, raised.value.http_status) == ("workflow_not_found", 404)


def test_library_sha256_changes_when_the_file_changes_and_is_none_when_gone(tmp_path: Path) -> None:
    library = WorkflowLibrary(tmp_path)
    path = tmp_path / "checkout.yaml"
    path.write_bytes(CHECKOUT)
    first = library.sha256("checkout")
    assert first == hashlib.sha256(CHECKOUT).hexdigest() == library.load("checkout").sha256
    assert library.sha256("checkout") == first
    path.write_bytes(CHECKOUT + b"# a comment changes the hash\n")
    assert library.sha256("checkout") not in (None, first)
    path.unlink()
    assert library.sha256("checkout") is None


@pytest.mark.parametrize("name", ["../secret", "..", "a/b", "/etc/passwd", "sub/../x", "", ".hidden", "a\\b"])
def test_library_rejects_names_with_slash_or_dot_dot(tmp_path: Path, name: str) -> None:
    (tmp_path / "secret.yaml").write_bytes(CHECKOUT)
    library = WorkflowLibrary(tmp_path / "flows")
    (tmp_path / "flows").mkdir()
    for method in (library.load, library.sha256):
        with pytest.raises(KitsuneError) as raised:
            method(name)
        assert raised.value.code == "invalid_parameter"
        assert raised.value.state == {"param": "workflow"}


def test_library_names_lists_workflow_files_only(tmp_path: Path) -> None:
    for name in ("b.yaml", "a.json", "c.yml", "notes.txt"):
        (tmp_path / name).write_bytes(CHECKOUT)
    assert WorkflowLibrary(tmp_path).names() == ["a", "b", "c"]
    assert WorkflowLibrary(tmp_path / "missing").names() == []
