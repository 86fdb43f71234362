"""Strict JSON: keys given twice and deep nesting are refused with their path."""

from __future__ import annotations

from typing import Any

import orjson
import pytest

from messages.errors import KitsuneError
from messages.strict_json import MAX_DEPTH, loads


@pytest.mark.parametrize(("text", "path"), [
    ('{"commands": [{"action": "url"}], "commands": [{"action": "click", "selector": "a"}]}', "commands"),
    ('{"commands": [{"action": "click", "selector": "a:b", "selector": "c"}]}', "commands.0.selector"),
    ('{"commands": [{"action": "url"}, {"action": "js", "code": "1", "code": "2"}]}', "commands.1.code"),
    ('{"a": {"b": 1, "b": 1}, "a": 2}', "a"),
    ('{"a": "\\u003a", "a": 1}', "a"),
    ('{"k\\u0065y": 1, "key": 2}', "key"),
], ids=["top level", "nested", "second command", "outer first", "an escaped colon", "an escaped key"])
def test_a_key_given_twice_is_refused_with_its_path(text: str, path: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        loads(text)
    assert (caught.value.code, caught.value.state, caught.value.http_status) == ("duplicate_key", {"path": path}, 400)


@pytest.mark.parametrize("value", [
    {"url": "https://a.example:8443/x", "t": 'a":b', "k:": {"c": ["d:e", {"f": "\\u003a"}]}},
    [1, "two", None, {"a": {"b": {}}}],
    "just a string",
])
def test_unique_keys_parse_as_orjson_does(value: Any) -> None:
    text = orjson.dumps(value)
    assert loads(text) == orjson.loads(text) == loads(text.decode())


def test_nesting_to_the_maximum_is_accepted_and_one_more_refused_with_its_path() -> None:
    assert loads("[" * MAX_DEPTH + "]" * MAX_DEPTH)
    with pytest.raises(KitsuneError) as caught:
        loads('{"cookies": [' + '{"a": ' * MAX_DEPTH + "1" + "}" * MAX_DEPTH + "]}")
    assert caught.value.code == "too_deep"
    assert caught.value.state == {"path": "cookies.0" + ".a" * (MAX_DEPTH - 2), "limit": MAX_DEPTH}


def test_a_thousand_levels_are_refused_not_a_crash() -> None:
    with pytest.raises(KitsuneError) as caught:
        loads('{"p": ' * 1000 + "1" + "}" * 1000)
    assert (caught.value.code, caught.value.http_status) == ("too_deep", 400)


@pytest.mark.parametrize("text", ["{not json", "[1, 2", '{"a": NaN}', '{"a": 1e400}', ""])
def test_what_is_not_json_is_invalid_json(text: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        loads(text)
    assert (caught.value.code, caught.value.http_status) == ("invalid_json", 400)
