"""Input handled one way only, against the live app over the session node (real NATS, real Chromium).

Keys given twice, repeated ``Authorization`` headers, deep nesting, long strings and unbounded
timeouts are refused with a 400, a code and a path, and the test site counts no write. A fuzz test
posts bodies generated from the published JSON Schema, and mutations of them, as a read-only agent.
"""

from __future__ import annotations

import dataclasses
import json
import subprocess
import time
from collections.abc import Iterator
from typing import Any

import httpx
import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from bridge.node import Node
from kitsune.config import load_config
from messages.commands import BLOCKS
from tests.integration.serving import KITSUNE, app_over
from tests.site import TestSite

TOKEN = "input-token-0123456789abcdef"
SCRAPE = "input-scrape-token-0123456789"


@pytest.fixture(scope="module")
def base(node: Node) -> Iterator[str]:
    """The real app over the session node, served by uvicorn on the node's own loop."""
    config = load_config(None, {"KITSUNE_AGENTS": f"prober={TOKEN}", "KITSUNE_CAPS": "core,automation",
                                "KITSUNE_METRICS_TOKEN": SCRAPE})
    with app_over(node, config) as base:
        yield base


@pytest.fixture(scope="module")
def client(base: str) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {TOKEN}"}, timeout=60) as c:
        yield c


@pytest.fixture(scope="module")
def clicks_tab(client: httpx.Client, test_site: TestSite) -> int:
    """A tab of the prober on the site's click counter (``#hit`` POSTs /clicks/hit)."""
    answer = client.post("/api/tabs", json={"op": "open", "url": test_site.url("/clicks")})
    assert answer.status_code == 200, answer.text
    tab: int = answer.json()["tabId"]
    return tab


def post_raw(client: httpx.Client, path: str, text: str) -> httpx.Response:
    return client.post(path, content=text.encode(), headers={"content-type": "application/json"})


def refusal(answer: httpx.Response) -> tuple[int, str, Any]:
    body = answer.json()
    return answer.status_code, body["code"], body.get("state")


# --- keys given twice ----------------------------------------------------------------------------


def test_a_body_with_commands_twice_is_refused_and_neither_list_runs(
        client: httpx.Client, clicks_tab: int, site: TestSite) -> None:
    text = (f'{{"tabId": {clicks_tab}, "commands": [{{"action": "url"}}], '
            '"commands": [{"action": "click", "selector": "#hit"}]}')
    assert refusal(post_raw(client, "/api/batch", text)) == (400, "duplicate_key", {"path": "commands"})
    assert site.count("ANY") == 0


def test_a_nested_key_twice_is_refused_with_its_path(client: httpx.Client, clicks_tab: int, site: TestSite) -> None:
    text = (f'{{"tabId": {clicks_tab}, "commands": [{{"action": "url"}}, '
            '{"action": "click", "selector": "#nothing", "selector": "#hit"}]}')
    assert refusal(post_raw(client, "/api/batch", text)) == (400, "duplicate_key", {"path": "commands.1.selector"})
    assert site.count("ANY") == 0


@pytest.mark.parametrize(("path", "text", "key"), [
    ("/api/act", '{"command": {"action": "click", "selector": "#nothing", "selector": "#hit"}}', "command.selector"),
    ("/api/parallel", '{"sequences": [[{"action": "url"}]], "timeout": 5, "timeout": 6}', "timeout"),
    ("/api/resume", '{"call": 1, "resume_token": "a", "resume_token": "b"}', "resume_token"),
    ("/api/tabs", '{"op": "select", "op": "close", "tabId": 1}', "op"),
    ("/api/workflow", '{"workflow": "a", "variables": {"x": 1, "x": 2}}', "variables.x"),
])
def test_every_json_route_refuses_a_key_given_twice(client: httpx.Client, site: TestSite, path: str, text: str,
                                                    key: str) -> None:
    assert refusal(post_raw(client, path, text)) == (400, "duplicate_key", {"path": key})
    assert site.count("ANY") == 0


def test_kitsune_validate_refuses_a_key_given_twice() -> None:
    done = subprocess.run([str(KITSUNE), "validate", "-"], capture_output=True, text=True, timeout=60, check=False,
                          input='{"commands": [{"action": "url"}], "commands": [{"action": "title"}]}')
    assert done.returncode == 1
    assert orjson.loads(done.stdout)["code"] == "duplicate_key"
    assert orjson.loads(done.stdout)["state"] == {"path": "commands"}


# --- Authorization given twice ---------------------------------------------------------------------


@pytest.mark.parametrize("second", [TOKEN, "not-a-token"], ids=["the same token", "another value"])
def test_two_authorization_headers_are_refused_on_the_api_and_nothing_runs(
        base: str, clicks_tab: int, site: TestSite, second: str) -> None:
    headers = [("Authorization", f"Bearer {TOKEN}"), ("Authorization", f"Bearer {second}")]
    answer = httpx.post(base + "/api/batch", headers=headers, timeout=60,
                        json={"tabId": clicks_tab, "commands": [{"action": "click", "selector": "#hit"}]})
    assert refusal(answer) == (400, "duplicate_header", {"header": "authorization"})
    assert site.count("ANY") == 0


@pytest.mark.parametrize("tokens", [(SCRAPE, SCRAPE), ("wrong", SCRAPE), (SCRAPE, "wrong")],
                         ids=["the same token", "the good one last", "the good one first"])
def test_two_authorization_headers_are_refused_on_metrics(base: str, tokens: tuple[str, str]) -> None:
    headers = [("Authorization", f"Bearer {token}") for token in tokens]
    assert refusal(httpx.get(base + "/metrics", headers=headers)) == (
        400, "duplicate_header", {"header": "authorization"})
    assert httpx.get(base + "/metrics", headers={"Authorization": f"Bearer {SCRAPE}"}).status_code == 200


# --- no input gives a 5xx ------------------------------------------------------------------------


def test_a_thousand_level_partition_key_is_a_400_not_a_500(client: httpx.Client, clicks_tab: int,
                                                             site: TestSite) -> None:
    nested = '{"k": ' * 1000 + '"v"' + "}" * 1000
    text = (f'{{"tabId": {clicks_tab}, "commands": [{{"action": "cookies", "op": "set", "cookies": '
            f'[{{"name": "n", "value": "v", "partitionKey": {nested}}}]}}]}}')
    status, code, state = refusal(post_raw(client, "/api/batch", text))
    assert (status, code, state["limit"]) == (400, "too_deep", 32)
    assert state["path"].startswith("commands.0.cookies.0.partitionKey.k.k")


def test_a_partition_key_that_is_an_object_is_refused_before_anything_runs(
        client: httpx.Client, clicks_tab: int, site: TestSite) -> None:
    cookie = {"name": "n", "value": "v", "partitionKey": {"k": {"k": "v"}}}
    answer = client.post("/api/batch", json={"tabId": clicks_tab, "commands": [
        {"action": "click", "selector": "#hit"}, {"action": "cookies", "op": "set", "cookies": [cookie]}]})
    assert refusal(answer) == (400, "invalid_parameter", {"path": "1", "param": "cookies"})
    assert site.count("ANY") == 0


def test_a_900_kb_selector_is_refused_at_once_and_nothing_is_tried(
        client: httpx.Client, clicks_tab: int, site: TestSite) -> None:
    answer = client.post("/api/batch", json={"tabId": clicks_tab, "commands": [
        {"action": "click", "selector": "#hit"}, {"action": "click", "selector": "a" * 900_000}]})
    # Refused by the parser (its code and path): nothing reached the browser, so nothing was tried.
    assert refusal(answer) == (400, "invalid_parameter", {"path": "1", "param": "selector"})
    assert site.count("ANY") == 0


@pytest.mark.parametrize("seconds", [86400, 1e300, 301])
def test_a_command_timeout_past_300_s_is_refused_with_its_path(
        client: httpx.Client, clicks_tab: int, site: TestSite, seconds: float) -> None:
    hit = {"action": "click", "selector": "#hit"}
    answer = client.post("/api/batch", json={"tabId": clicks_tab, "commands": [
        hit, {"action": "sequence", "steps": [{**hit, "timeout": seconds}]}]})
    assert refusal(answer) == (400, "invalid_parameter", {"path": "1.0", "param": "timeout"})
    answer = client.post("/api/act", json={"command": {**hit, "tabId": clicks_tab, "timeout": seconds}})
    assert refusal(answer) == (400, "invalid_parameter", {"path": "command", "param": "timeout"})
    assert site.count("ANY") == 0


@pytest.mark.parametrize("seconds", [86400, 1e300])
def test_a_container_timeout_past_3600_s_is_refused(client: httpx.Client, clicks_tab: int, site: TestSite,
                                                     seconds: float) -> None:
    for path, body in (("/api/batch", {"commands": [{"action": "click", "selector": "#hit"}]}),
                       ("/api/parallel", {"sequences": [[{"action": "click", "selector": "#hit"}]]})):
        answer = client.post(path, json={**body, "tabId": clicks_tab, "timeout": seconds})
        assert refusal(answer) == (400, "invalid_parameter", {"path": "", "param": "timeout"}), path
    assert site.count("ANY") == 0


# --- fuzz ----------------------------------------------------------------------------------------

FUZZ_EXAMPLES = 300
"""Bodies posted, derandomized (about 8 s): valid ones drawn from /api/schema, and mutations of them.

hypothesis-jsonschema was tried first: it cannot follow the command language's recursive ``$ref``,
took 110 s to canonicalise the schema, and 0.23 fails with Hypothesis 6.170; :func:`_strategy`
reads the subset of JSON Schema that /api/schema uses instead."""
ANSWER_BOUND = 15.0
"""Seconds any fuzzed request may take: each command is given at most 0.5 s, a container 2 s."""


SITE_SELECTORS = ("#hit", "body", "h1", "a", "#count", "text=Clicks")
"""Strings generated for selectors and texts half the time, so reads find things on the site's page."""


def _strategy(schema: dict[str, Any], defs: dict[str, Any], depth: int = 0) -> st.SearchStrategy[Any]:
    """Values valid for ``schema``, for the subset of JSON Schema that /api/schema uses; blocks nest twice."""
    if "$ref" in schema:
        name = schema["$ref"].rsplit("/", 1)[1]
        if name == "command":
            blocks = {cls.action for cls in BLOCKS}
            names = [a for a in defs if a not in {"command", "reference", "jsonValue"}
                     and (depth < 2 or a not in blocks)]
            return st.sampled_from(names).flatmap(lambda a: _strategy(defs[a], defs, depth + 1))
        if name == "jsonValue":  # a site tool's input: any JSON value (leaves are enough here)
            return st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(SITE_SELECTORS)
        return _strategy(defs[name], defs, depth)
    if "const" in schema:
        return st.just(schema["const"])
    if "enum" in schema:
        return st.sampled_from(schema["enum"])
    if "oneOf" in schema or "anyOf" in schema:
        return st.one_of([_strategy(s, defs, depth) for s in schema.get("oneOf") or schema["anyOf"]])
    kind = schema["type"]
    if kind == "object":
        properties = {k: _strategy(v, defs, depth) for k, v in schema.get("properties", {}).items()}
        required = schema.get("required", [])
        return st.fixed_dictionaries({k: properties[k] for k in required},
                                     optional={k: v for k, v in properties.items() if k not in required})
    if kind == "array":
        return st.lists(_strategy(schema["items"], defs, depth), min_size=schema.get("minItems", 0), max_size=3)
    if kind == "string":
        if "pattern" in schema:
            return st.from_regex(r"\$\{\$[0-9]\.[a-z]{1,5}\}", fullmatch=True)
        return st.sampled_from(SITE_SELECTORS) | st.text(max_size=min(schema.get("maxLength", 20), 20))
    if kind == "integer":
        return st.integers(schema.get("minimum", -5), schema.get("maximum", 5))
    if kind == "number":
        return st.floats(schema.get("minimum", schema.get("exclusiveMinimum", 0)), schema.get("maximum", 5),
                         allow_nan=False, exclude_min="exclusiveMinimum" in schema)
    return st.booleans()


def _bounded(value: Any) -> Any:
    """A generated body with every command's timeout at most 0.5 s and none naming a tab of its own."""
    if isinstance(value, list):
        return [_bounded(v) for v in value]
    if not isinstance(value, dict):
        return value
    out = {k: _bounded(v) for k, v in value.items() if not ("action" in value and k == "tabId")}
    if "action" in value:
        seconds = out.get("timeout")
        out["timeout"] = min(seconds, 0.5) if isinstance(seconds, int | float) and not isinstance(seconds, bool) \
            else 0.5
    return out


_JSON = st.recursive(st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.text(max_size=12)
                     | st.sampled_from([1e300, -1, 0, 86400, 0.5, "${$0.x}", "${$99}", "a" * 70_000]),
                     lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=6), inner,
                                                                                 max_size=3), max_leaves=8)


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    found = [prefix]
    if isinstance(value, dict):
        for k, v in value.items():
            found += _paths(v, (*prefix, k))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            found += _paths(v, (*prefix, i))
    return found


@st.composite
def _mutated(draw: st.DrawFn, bodies: st.SearchStrategy[Any]) -> Any:
    """A generated body with one value (or the whole body) replaced by arbitrary JSON."""
    body = draw(bodies)
    path = draw(st.sampled_from(_paths(body)))
    replacement = draw(_JSON)
    if not path:
        return replacement
    parent = body
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = replacement
    return body


@pytest.fixture(scope="module")
def fuzz_routes(client: httpx.Client) -> list[tuple[str, st.SearchStrategy[Any]]]:
    published = client.get("/api/schema").json()
    batch, parallel, command = (_strategy(published[k], published[k]["$defs"])
                                for k in ("batch", "parallel", "command"))
    act = st.fixed_dictionaries({"command": command})
    resume = st.fixed_dictionaries({"call": st.integers(), "resume_token": st.text(max_size=40)},
                                   optional={"observed": _JSON})
    tabs = st.fixed_dictionaries({"op": st.sampled_from(["open", "close", "select", "takeover", "x"])},
                                 optional={"tabId": st.integers(-1, 10**12), "url": st.text(max_size=30)})
    return [(path, st.one_of(valid, _mutated(valid)))
            for path, valid in (("/api/batch", batch), ("/api/parallel", parallel), ("/api/act", act),
                                ("/api/resume", resume), ("/api/tabs", tabs))]


def test_fuzzed_bodies_never_answer_5xx_never_hang_and_write_nothing(
        client: httpx.Client, node: Node, clicks_tab: int, site: TestSite,
        fuzz_routes: list[tuple[str, st.SearchStrategy[Any]]]) -> None:
    """Generated bodies run as a read-only agent on the site's page: reads do real work, writes are refused. The one
    5xx allowed is a direct read's own timeout running out (``timeout: 0.0``, or a short one on a loaded machine):
    504 ``timeout``, failed, as a direct route answers every error with its code's status."""
    seen: dict[int, int] = {}
    policy = node.policy
    node.policy = dataclasses.replace(policy, read_only=True)
    client.post("/api/tabs", json={"op": "select", "tabId": clicks_tab})

    @settings(max_examples=FUZZ_EXAMPLES, derandomize=True, database=None, deadline=None,
              suppress_health_check=list(HealthCheck))
    @given(st.sampled_from(range(len(fuzz_routes))).flatmap(
        lambda i: st.tuples(st.just(fuzz_routes[i][0]), fuzz_routes[i][1])))
    def post(request: tuple[str, Any]) -> None:
        path, body = request
        if path in ("/api/batch", "/api/parallel") and isinstance(body, dict):
            body = {**_bounded(body), "tabId": clicks_tab, "timeout": 2}
        elif path == "/api/act" and isinstance(body, dict):
            body = {**body, "command": {**_bounded(body["command"]), "tabId": clicks_tab}} \
                if isinstance(body.get("command"), dict) else body
        started = time.monotonic()
        answer = client.post(path, content=json.dumps(body), headers={"content-type": "application/json"})
        took = time.monotonic() - started
        assert answer.status_code < 500 or _own_timeout(answer), (path, answer.text[:500])
        assert took < ANSWER_BOUND, (path, took)
        seen[answer.status_code] = seen.get(answer.status_code, 0) + 1

    try:
        post()
    finally:
        node.policy = policy
    assert site.count("ANY") == 0
    assert seen.get(200, 0) > 0 and seen.get(400, 0) > 0, seen  # reads ran, and bad bodies were refused


def _own_timeout(answer: httpx.Response) -> bool:
    """Whether ``answer`` is a direct call's step that ran out of its own time: before it started (nothing sent), or
    a read while it ran (failed: a read is never unknown)."""
    body = answer.json()
    unsent = isinstance(body.get("state"), dict) and body["state"].get("sent") is False
    return answer.status_code == 504 and body.get("code") == "timeout" and (unsent or body.get("status") == "failed")
