"""Site tools' pure parts: the continuation tokens' rules and the check of a tool's input."""

from __future__ import annotations

import asyncio
import base64
import hashlib
import json
import re
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from cryptography.exceptions import InvalidTag
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from driver.errors import Stop
from driver.site_tools import declarations
from driver.site_tools.armed import MAX_SEALED_BYTES, token_key
from driver.site_tools.chains import Chain, Document
from driver.site_tools.continuations import Continuations, Refusal
from driver.site_tools.declarations import DeclarationRate, Refused, Room, declared, listed, reads_only
from driver.site_tools.input_schema import InputChecker
from driver.site_tools.schema_check import check
from driver.site_tools.tokens import ARMED_AHEAD, ChainTokens, Install
from messages.errors import KitsuneError

SHOP = "http://127.0.0.1:8001"


def test_a_token_is_random_kept_only_as_its_hash_and_redeemed_once() -> None:
    tokens: Continuations[str] = Continuations()
    token, continuation = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    other, _ = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    assert len(token) >= 43 and token != other  # 32 random bytes, URL-safe
    assert continuation.digest == hashlib.sha256(token.encode()).digest()
    assert token not in repr(continuation) and token not in str(vars(tokens))
    assert tokens.redeem(token, 3, SHOP, now=1.0) is continuation
    assert tokens.redeem(token, 3, SHOP, now=1.0) is Refusal.REPLAYED


@pytest.mark.parametrize(("tab", "origin", "now", "refusal"), [
    (4, SHOP, 1.0, Refusal.OTHER_TAB),  # the same origin in another tab: never
    (3, "http://127.0.0.1:8002", 1.0, Refusal.OTHER_ORIGIN),  # another port is another origin
    (3, SHOP, 60.0, Refusal.EXPIRED),
])
def test_a_token_is_refused_in_another_tab_another_origin_or_after_its_lifetime(
        tab: int, origin: str, now: float, refusal: Refusal) -> None:
    tokens: Continuations[str] = Continuations()
    token, continuation = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    assert tokens.redeem(token, tab, origin, now) is refusal
    assert not continuation.redeemed


def test_a_dropped_or_made_up_token_is_unknown() -> None:
    tokens: Continuations[str] = Continuations()
    token, continuation = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    tokens.drop(continuation)
    assert len(tokens) == 0
    assert tokens.redeem(token, 3, SHOP, 1.0) is Refusal.UNKNOWN
    assert tokens.redeem("made-up", 3, SHOP, 1.0) is Refusal.UNKNOWN


CHECKOUT = {"type": "object", "properties": {"billing_address": {"type": "string", "minLength": 3},
                                             "items": {"type": "array", "items": {"type": "integer"}}},
            "required": ["billing_address"], "additionalProperties": False}


def check_input(tool: str, schema: dict[str, Any], value: Any, seconds: float = 5.0) -> None:
    """The node's check of ``value``, through a checker process of the test's own."""
    async def checked() -> None:
        checker = InputChecker(seconds)
        try:
            await checker.check(tool, schema, value)
        finally:
            await checker.close()
    asyncio.run(checked())


@pytest.mark.parametrize(("value", "path", "rule"), [
    ({}, "/billing_address", "required"),
    ({"billing_address": 12}, "/billing_address", "type"),
    ({"billing_address": "ab"}, "/billing_address", "minLength"),
    ({"billing_address": "1 Main St", "items": [1, "canary-secret"]}, "/items/1", "type"),
    ({"billing_address": "1 Main St", "canary-key": "x"}, "/", "additionalProperties"),
])
def test_an_input_the_schema_refuses_names_its_path_and_rule_never_its_value(
        value: dict[str, Any], path: str, rule: str) -> None:
    answer = check(CHECKOUT, value)
    assert answer["invalid_input"]["path"] == path and answer["invalid_input"]["rule"] == rule
    assert "canary" not in json.dumps(answer) and "12" not in json.dumps(answer)


def test_the_checker_process_answers_the_node_s_errors() -> None:
    check_input("checkout", CHECKOUT, {"billing_address": "1 Main St", "items": [1, 2]})
    check_input("anything", {}, {"whatever": [None]})
    with pytest.raises(KitsuneError) as refused:
        check_input("checkout", CHECKOUT, {"billing_address": "ab"})
    error = refused.value
    assert (error.code, error.http_status) == ("invalid_input", 400)
    assert error.state == {"tool": "checkout", "path": "/billing_address", "rule": "minLength"}
    assert "/billing_address" in error.message and "nothing was sent" in error.message
    with pytest.raises(KitsuneError) as broken:
        check_input("checkout", {"type": "no-such-type"}, {})
    assert (broken.value.code, broken.value.http_status) == ("invalid_schema", 422)


@pytest.mark.parametrize("ref", ["http://127.0.0.2:9/s.json", "file:///etc/passwd", "other.json#/x",
                                 "urn:kitsune:nothing"])
def test_a_schema_is_checked_with_no_retrieval_a_local_reference_only(ref: str) -> None:
    local = {"$defs": {"word": {"type": "string"}}, "properties": {"q": {"$ref": "#/$defs/word"}}}
    assert check(local, {"q": "coat"}) == {"ok": True}
    assert check(local, {"q": 3})["invalid_input"]["path"] == "/q"
    for schema in ({"$ref": ref}, {"properties": {"q": {"$ref": ref}}}, {"$dynamicRef": ref},
                   {"$id": "http://127.0.0.2:9/", "properties": {"q": {"$ref": ref}}}):
        assert "invalid_schema" in check(schema, {"q": "coat"}), schema


def test_a_backtracking_pattern_is_stopped_within_the_bound_and_the_next_check_works() -> None:
    schema = {"type": "object", "properties": {"q": {"type": "string", "pattern": r"^(\w+\s?)*$"}}}
    sentence = "an ordinary sentence that goes on long enough to backtrack for ever!"

    async def checks() -> tuple[float, KitsuneError | None]:
        checker = InputChecker(0.5)
        try:
            await checker.check("t", schema, {"q": "warm"})  # started, and warm
            started = time.monotonic()
            try:
                await checker.check("t", schema, {"q": sentence})
            except KitsuneError as e:
                return time.monotonic() - started, e
            finally:
                await checker.check("t", schema, {"q": "a second process"})
            return time.monotonic() - started, None
        finally:
            await checker.close()
    took, error = asyncio.run(checks())
    assert error is not None and error.state is not None, error
    assert (error.code, error.state["rule"]) == ("invalid_input", "timeout"), error
    assert "took longer than 0.5s" in error.message and took < 3


def _tool(**fields: Any) -> dict[str, Any]:
    return {"name": "search", "description": "Search.", "inputSchema": json.dumps({"type": "object"}), **fields}


def test_a_declaration_is_kept_with_its_bounded_annotations_and_a_foreign_reference_marks_it_invalid() -> None:
    kept, size = declared(_tool(annotations={"readOnlyHint": True, "title": "S" * 500, "other": "x" * 10_000}), {})
    assert size == len(json.dumps({"type": "object"}))
    assert kept == {"name": "search", "description": "Search.", "inputSchema": {"type": "object"},
                    "annotations": {"readOnlyHint": True, "title": "S" * 128}}
    foreign, _ = declared(_tool(inputSchema=json.dumps({"items": [{"$ref": "http://127.0.0.2/s.json"}]})), {})
    assert "http://127.0.0.2/s.json" in foreign["invalid"]
    assert "invalid" not in declared(_tool(inputSchema=json.dumps({"$ref": "#/$defs/x", "$defs": {"x": {}}})), {})[0]


def test_read_only_is_the_pages_readonlyhint_true_and_a_forms_tool_keeps_only_whether_it_autosubmits() -> None:
    hinted = {"readOnlyHint": True, "untrustedContentHint": True}
    read, _ = declared(_tool(annotations=hinted), {})
    assert read["annotations"] == hinted and reads_only(read)
    assert not any(reads_only(declared(_tool(annotations=given), {})[0])
                   for given in ({"readOnlyHint": "true"}, {"readOnlyHint": 1}, {"destructiveHint": False}, None))
    form, _ = declared(_tool(form={"autosubmit": "yes", "action": "http://elsewhere.test/"}), {})
    assert form["form"] == {"autosubmit": False} and "form" not in declared(_tool(form=True), {})[0]


@pytest.mark.parametrize(("fields", "limit"), [
    ({"description": "d" * (declarations.MAX_DESCRIPTION + 1)}, "description_length"),
    ({"inputSchema": json.dumps({"description": "x" * declarations.MAX_SCHEMA_BYTES})}, "schema_size"),
    ({"inputSchema": json.dumps({"description": "é" * (declarations.MAX_SCHEMA_BYTES // 2)})}, "schema_size"),
    ({"inputSchema": "{\"a\":" * 40 + "{}" + "}" * 40}, "schema_depth"),
    ({"inputSchema": "[]"}, "must be a JSON object"),
    ({"name": "n" * 129}, "name must match"),
])
def test_each_per_document_limit_is_refused_by_name(fields: dict[str, Any], limit: str) -> None:
    with pytest.raises(Refused, match=limit):
        declared(_tool(**fields), {})


def test_a_document_declares_at_most_max_tools_but_may_declare_one_again() -> None:
    tools: dict[str, dict[str, Any]] = {f"t{i}": {} for i in range(declarations.MAX_TOOLS)}
    with pytest.raises(Refused, match="tool_count"):
        declared(_tool(), tools)
    assert declared(_tool(name="t0"), tools)[0]["name"] == "t0"


def test_a_frame_s_declaration_is_refused_by_name_past_what_the_tab_s_frames_hold_together() -> None:
    schema = json.dumps({"description": "x" * 1000})
    with pytest.raises(Refused, match="tab_tool_count"):
        declared(_tool(), {}, Room(tools=0))
    assert declared(_tool(), {"search": {}}, Room(tools=0))[0]["name"] == "search"  # declared again: no more room
    with pytest.raises(Refused, match="tab_schema_size"):
        declared(_tool(inputSchema=schema), {}, Room(schema_bytes=len(schema) - 1))
    assert declared(_tool(inputSchema=schema), {}, Room(schema_bytes=len(schema)))[1] == len(schema)


def test_declarations_are_bounded_in_rate_by_their_schemas_bytes() -> None:
    rate, big = DeclarationRate(), declarations.MAX_SCHEMA_BYTES
    assert all(rate.take(10.0, big) for _ in range(declarations.DECLARATION_BURST // big))
    assert not rate.take(10.0, big) and not rate.take(10.0, 0)  # a small message counts too
    assert rate.take(10.0 + big / declarations.DECLARATION_RATE, big)
    assert not rate.take(10.0 + big / declarations.DECLARATION_RATE, 0)
    taken = sum(rate.take(30.0, 0) for _ in range(10_000))  # refilled, never past the burst
    assert taken == declarations.DECLARATION_BURST // declarations.DECLARATION_COST


@pytest.mark.parametrize(("schema", "limit"), [
    ("{\"a\":[" + ",".join(["[]"] * (declarations.MAX_SCHEMA_NODES + 1)) + "]}", "schema_nodes"),
    ("{\"a\":" + "[" * 32 + "]" * 32 + "}", "schema_depth"),
    ("{\"a\":\"" + "[" * 40 + "\"}", None),  # brackets in a string are text
    ("{\"a\":[" + ",".join(["{}"] * (declarations.MAX_SCHEMA_NODES - 2)) + "]}", None),
])
def test_a_schema_s_shape_is_read_before_it_is_parsed(schema: str, limit: str | None) -> None:
    if limit is None:
        assert declared(_tool(inputSchema=schema), {})[0]["inputSchema"] == json.loads(schema)
    else:
        with pytest.raises(Refused, match=limit):
            declared(_tool(inputSchema=schema), {})


def test_a_foreign_reference_is_found_in_the_schema_s_text_never_in_its_strings() -> None:
    text = json.dumps({"description": "\"$ref\": \"http://127.0.0.2/in-a-string\"", "$ref": "#/$defs/x",
                       "items": {"$dynamicRef": "http://127.0.0.2/s.json"}})
    assert "in-a-string" not in declared(_tool(inputSchema=text), {})[0]["invalid"]
    assert "http://127.0.0.2/s.json" in declared(_tool(inputSchema=text), {})[0]["invalid"]


def test_a_site_tools_answer_is_bounded_and_names_what_it_left_out() -> None:
    big = [{"name": f"t{i}", "inputSchema": {"description": "x" * 60_000}} for i in range(300)]
    answer = listed(big)
    assert len(json.dumps(answer)) < declarations.MAX_LISTED + 64 * 1024
    kept = len(answer["tools"])
    assert 0 < kept < 300 and answer["truncated"]["tools"] == 300 - kept
    assert answer["truncated"]["names"][0] == f"t{kept}" and len(answer["truncated"]["names"]) == 256
    assert listed(big[:3]) == {"tools": big[:3]}


def test_the_page_script_checks_the_node_s_limits_first() -> None:
    script = (Path(declarations.__file__).parent.parent / "js" / "model_context.js").read_text()
    assert (f"const LIMITS = {{ tools: {declarations.MAX_TOOLS}, description: {declarations.MAX_DESCRIPTION}, "
            f"schemaBytes: {declarations.MAX_SCHEMA_BYTES} }};") in script
    assert (f"const RATE = {{ bytes: {declarations.DECLARATION_RATE}, burst: {declarations.DECLARATION_BURST}, "
            f"cost: {declarations.DECLARATION_COST} }};") in script


async def _chain_tokens(ttl: float = 60.0) -> tuple[ChainTokens, Chain, list[str], list[str]]:
    """Tokens of one chain of a tool on the shop (no page: the document's frame is a name), with the kinds of the
    events they record and how their tokens ended."""
    kinds: list[str] = []
    ended: list[str] = []
    tokens = ChainTokens(lambda: ttl, lambda chain, kind, **fields: kinds.append(kind.kind), ended.append)
    document = Document("nonce", "frame", 3, SHOP, SHOP + "/shop/billing", True)
    return tokens, Chain("checkout", document, {}, call=1, path="0", agent=None), kinds, ended


def test_a_token_issued_with_an_invocation_is_outstanding_only_once_asked_for_and_dropped_unseen_if_not() -> None:
    async def run() -> None:
        tokens, chain, kinds, ended = await _chain_tokens()
        asked = chain.invoke(_doc(chain))
        token = tokens.reserve(chain, asked)
        assert len(tokens) == 1 and not chain.outstanding and kinds == []  # issued, not yet the tool's
        assert tokens.take(chain, asked) and not tokens.take(chain, asked)  # taken once
        assert len(chain.outstanding) == 1 and asked.reserved is None and asked.tokens == 1
        quiet = chain.invoke(_doc(chain))
        tokens.reserve(chain, quiet)
        tokens.release(quiet)  # settled without asking
        assert len(tokens) == 1 and kinds == ["ContinuationRequested"] and ended == []
        found = tokens.redeem(token, _doc(chain))
        assert not isinstance(found, Refusal)
        tokens.redeemed(found)
        assert not chain.outstanding and chain.redeemed == [found]
        tokens.end(chain, "completed")
        assert len(tokens) == 0 and ended == []  # nothing outstanding was left to revoke
    asyncio.run(run())


def test_a_reserved_token_redeemed_before_the_node_heard_it_taken_is_taken_then_and_a_settled_one_is_not() -> None:
    async def run() -> None:
        tokens, chain, kinds, ended = await _chain_tokens()
        first = chain.invoke(_doc(chain))
        token = tokens.reserve(chain, first)
        found = tokens.redeem(token, _doc(chain))  # the page's script gave it; its "took" is still on its way
        assert not isinstance(found, Refusal) and first.tokens == 1 and kinds == ["ContinuationRequested"]
        tokens.redeemed(found)
        second = chain.invoke(_doc(chain))
        tokens.reserve(chain, second)
        chain.settle(second, {"ok": True, "value": None})
        assert not tokens.take(chain, second) and len(tokens) == 1  # asked after its promise settled: dropped
        late = chain.invoke(_doc(chain))
        tokens.issue(chain, late)
        tokens.end(chain, "timeout")  # the one issued as asked is revoked; the reserved ones go unseen
        assert len(tokens) == 0 and ended == ["revoked"] and kinds[-1] == "ContinuationRevoked"
    asyncio.run(run())


def test_an_outstanding_token_expires_after_its_lifetime_from_when_it_was_asked_for() -> None:
    async def run() -> None:
        tokens, chain, kinds, ended = await _chain_tokens(ttl=0.05)
        invocation = chain.invoke(_doc(chain))
        tokens.reserve(chain, invocation)
        await asyncio.sleep(0.1)  # longer than the lifetime, before the tool asks: it has not started yet
        assert tokens.take(chain, invocation) and not chain.ended
        with pytest.raises(Stop, match="expired unredeemed"):
            await asyncio.wait_for(chain.result, 5)
        assert ended == ["expired"] and kinds == ["ContinuationRequested", "ContinuationExpired"]
        assert len(tokens) == 0
    asyncio.run(run())


def _doc(chain: Chain) -> Document:
    """Another document of the chain's origin and tab."""
    return Document("other", "frame", chain.tab, chain.origin, chain.origin + "/shop/shipping", True)


# --- continuations armed ahead -------------------------------------------------------------------------------

CARD = {"card": "canary-4242-armed"}


def _installing() -> tuple[list[str], list[int], Install]:
    """An install that keeps each script a chain adds to its tab, and the numbers of those taken out."""
    scripts: list[str] = []
    removed: list[int] = []

    def install(chain: Chain, script: str) -> Callable[[], None]:
        scripts.append(script)
        number = len(scripts)
        return lambda: removed.append(number)
    return scripts, removed, install


def _opened(token: str, script: str) -> dict[str, Any] | None:
    """What the hand-off of ``script`` that ``token`` opens gives (None: none is sealed under it)."""
    for iv, sealed in re.findall(r'arm\(\d+, "([^"]+)", "([^"]+)"\)', script):
        try:
            plain = AESGCM(token_key(token)).decrypt(base64.b64decode(iv), base64.b64decode(sealed), None)
        except InvalidTag:
            continue
        opened: dict[str, Any] = json.loads(plain)
        return opened
    return None


async def _armed_chain() -> tuple[ChainTokens, Chain, list[str], list[int]]:
    scripts, removed, install = _installing()
    tokens = ChainTokens(lambda: 60.0, lambda chain, kind, **fields: None, lambda outcome: None, install)
    document = Document("nonce", "frame", 3, SHOP, SHOP + "/shop/billing", True)
    return tokens, Chain("checkout", document, CARD, call=1, path="0", agent=None), scripts, removed


def test_a_chain_s_tokens_are_armed_ahead_in_one_script_each_hand_off_sealed_under_its_own_token() -> None:
    async def run() -> None:
        tokens, chain, scripts, removed = await _armed_chain()
        first = chain.invoke(_doc(chain))
        token = tokens.reserve(chain, first)
        [script] = scripts
        assert len(tokens) == 1 + ARMED_AHEAD  # the reserved token and those its redemptions lead to
        assert token not in script and CARD["card"] not in script and f'"{SHOP}"' in script
        keys, ids = [token], []
        for _ in range(ARMED_AHEAD):
            hand_off = _opened(keys[-1], script)
            assert hand_off is not None and hand_off["input"] == CARD
            assert hand_off["token"] not in script
            keys.append(hand_off["token"])
            ids.append(hand_off["invocation"])
        assert _opened(keys[-1], script) is None  # the last token made ahead opens nothing of this script
        assert tokens.armed(first.reserved) == ids[0]  # type: ignore[arg-type]

        invocation = first
        for level in range(ARMED_AHEAD):  # each document opens its hand-off: no new script until the last
            assert tokens.take(chain, invocation)
            found = tokens.redeem(keys[level], _doc(chain))
            assert not isinstance(found, Refusal) and tokens.armed(found) == ids[level]
            ahead = tokens.redeemed(found, from_hand_off=True)
            assert ahead is not None and ahead.id == ids[level]
            invocation = chain.invoke(_doc(chain), ahead.id)
            assert tokens.reserve(chain, invocation, ahead) == ""  # the page has it from the hand-off
            assert len(scripts) == (1 if level < ARMED_AHEAD - 1 else 2)
        further = _opened(keys[-1], scripts[-1])  # the chain went past the first script: a second one goes on
        assert further is not None and further["input"] == CARD and further["token"] not in scripts[-1]
        assert removed == []  # no command to the tab while the chain runs
        tokens.end(chain, "completed")
        assert removed == [1, 2] and len(tokens) == 0
    asyncio.run(run())


def test_a_token_redeemed_by_asking_the_node_drops_the_tokens_made_ahead_of_it() -> None:
    async def run() -> None:
        tokens, chain, scripts, _ = await _armed_chain()
        first = chain.invoke(_doc(chain))
        token = tokens.reserve(chain, first)
        assert tokens.take(chain, first)
        found = tokens.redeem(token, _doc(chain))
        assert not isinstance(found, Refusal)
        assert tokens.redeemed(found) is None and len(tokens) == 1  # the redeemed one, until the chain ends
        second = chain.invoke(_doc(chain))
        assert tokens.reserve(chain, second) != "" and len(scripts) == 2  # its own token, armed afresh
        tokens.end(chain, "completed")
        assert len(tokens) == 0
    asyncio.run(run())


def test_a_call_whose_input_is_too_large_to_arm_is_not_armed() -> None:
    async def run() -> None:
        tokens, _, scripts, _ = await _armed_chain()
        document = Document("nonce", "frame", 3, SHOP, SHOP + "/shop/billing", True)
        chain = Chain("checkout", document, {"note": "x" * MAX_SEALED_BYTES}, call=1, path="0", agent=None)
        invocation = chain.invoke(document)
        tokens.reserve(chain, invocation)
        assert scripts == [] and len(tokens) == 1 and tokens.armed(invocation.reserved) is None  # type: ignore[arg-type]
    asyncio.run(run())


def test_a_token_that_is_not_32_random_bytes_is_no_key() -> None:
    with pytest.raises(ValueError, match="32 random bytes"):
        token_key(secrets.token_urlsafe(24))
