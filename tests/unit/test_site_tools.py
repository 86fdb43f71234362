"""Site tools' pure parts: the continuation tokens' rules and the check of a tool's input."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from bridge.browser.site_tools.continuations import Continuations, Refusal
from bridge.browser.site_tools.input_schema import check_input
from messages.errors import KitsuneError

SHOP = "http://127.0.0.1:8001"


def test_a_token_is_random_kept_only_as_its_hash_and_redeemed_once() -> None:
    tokens: Continuations[str] = Continuations()
    token, continuation = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    other, _ = tokens.issue("chain", 3, SHOP, expires_at=60.0)
    assert len(token) >= 32 and token != other  # 24 random bytes, URL-safe
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


@pytest.mark.parametrize(("value", "path", "rule"), [
    ({}, "/billing_address", "required"),
    ({"billing_address": 12}, "/billing_address", "type"),
    ({"billing_address": "ab"}, "/billing_address", "minLength"),
    ({"billing_address": "1 Main St", "items": [1, "canary-secret"]}, "/items/1", "type"),
    ({"billing_address": "1 Main St", "canary-key": "x"}, "/", "additionalProperties"),
])
def test_an_input_the_schema_refuses_names_its_path_and_rule_never_its_value(
        value: dict[str, Any], path: str, rule: str) -> None:
    with pytest.raises(KitsuneError) as refused:
        check_input("checkout", CHECKOUT, value)
    error = refused.value
    assert (error.code, error.http_status) == ("invalid_input", 400)
    assert error.state == {"tool": "checkout", "path": path, "rule": rule}
    assert path in error.message and "nothing was sent" in error.message
    assert "canary" not in error.message and "12" not in error.message


def test_an_input_the_schema_accepts_passes_and_a_page_s_broken_schema_is_the_site_s_error() -> None:
    check_input("checkout", CHECKOUT, {"billing_address": "1 Main St", "items": [1, 2]})
    check_input("anything", {}, {"whatever": [None]})
    with pytest.raises(KitsuneError) as broken:
        check_input("checkout", {"type": "no-such-type"}, {})
    assert broken.value.code == "site_tool_error"
