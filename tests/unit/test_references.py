"""``${$N.path}`` references: parsing, listing and resolving against earlier results."""

from __future__ import annotations

from typing import Any

import pytest

from messages.errors import KitsuneError
from messages.references import Ref, Template, parse_references, references_in, resolve

RESULTS: dict[int, Any] = {
    0: {"ok": True, "tabId": 7, "url": "https://shop.example/cart"},
    1: {"ok": True, "items": [{"text": "First", "price": 12.5}, {"text": "Second", "tags": ["a", "b"]}],
        "count": 2, "visible": True, "empty": None, "meta": {"0": "zero-key"}},
    2: {"ok": True, "value": ["x", "y"]},
}


def result_of(step: int) -> Any:
    return RESULTS.get(step)


# --- parsing ---------------------------------------------------------------------------------


@pytest.mark.parametrize("text", ["", "plain text", "$5 and {braces}", "${0.a}", "$${x}", "${ $0 }"])
def test_text_without_a_reference_opening_is_returned_as_is(text: str) -> None:
    assert parse_references(text) == text
    assert isinstance(parse_references(text), str)


@pytest.mark.parametrize(("text", "ref"), [
    ("${$0}", Ref(0)),
    ("${$12}", Ref(12)),
    ("${$0.tabId}", Ref(0, ("tabId",))),
    ("${$3.items.0.text}", Ref(3, ("items", "0", "text"))),
    ("${$1.snake_case.kebab-case.X9}", Ref(1, ("snake_case", "kebab-case", "X9"))),
])
def test_a_whole_reference_parses_to_a_ref(text: str, ref: Ref) -> None:
    assert parse_references(text) == ref
    assert str(ref) == text


@pytest.mark.parametrize(("text", "parts"), [
    ("#row-${$2.id}", ("#row-", Ref(2, ("id",)))),
    ("${$0.a} and ${$1.b}", (Ref(0, ("a",)), " and ", Ref(1, ("b",)))),
    ("${$0}${$1}", (Ref(0), Ref(1))),
    ("Hello ${$0.name}!", ("Hello ", Ref(0, ("name",)), "!")),
])
def test_text_with_references_inside_parses_to_a_template(text: str, parts: tuple[Any, ...]) -> None:
    parsed = parse_references(text)
    assert parsed == Template(parts)
    assert str(parsed) == text


@pytest.mark.parametrize(("text", "position"), [
    ("${$x}", 0),
    ("${$}", 0),
    ("${$0", 0),
    ("${$0.}", 0),
    ("${$-1}", 0),
    ("${$0.a b}", 0),
    ("id ${$1.a", 3),
    ("${$0.a} then ${$b}", 13),
    ("${$ab} then ${$0.a}", 0),
])
def test_a_malformed_reference_raises_value_error_naming_its_position(text: str, position: int) -> None:
    with pytest.raises(ValueError, match=f"malformed reference at character {position}$"):
        parse_references(text)


def test_references_in_finds_refs_in_templates_and_lists() -> None:
    value = ("plain", Ref(0, ("a",)), Template(("x", Ref(1), "y", Ref(2, ("b",)))))
    assert list(references_in(value)) == [Ref(0, ("a",)), Ref(1), Ref(2, ("b",))]
    assert list(references_in("plain ${$0}")) == []  # unparsed text holds no Ref
    assert list(references_in(5)) == []
    assert list(references_in(None)) == []


# --- resolving -------------------------------------------------------------------------------


def test_a_ref_without_a_path_is_the_whole_result() -> None:
    assert resolve(Ref(2), result_of) == {"ok": True, "value": ["x", "y"]}


@pytest.mark.parametrize(("ref", "value"), [
    (Ref(0, ("tabId",)), 7),
    (Ref(1, ("items", "0", "text")), "First"),
    (Ref(1, ("items", "0", "price")), 12.5),
    (Ref(1, ("items", "1", "tags", "1")), "b"),
    (Ref(1, ("items", "1")), {"text": "Second", "tags": ["a", "b"]}),
    (Ref(1, ("visible",)), True),
    (Ref(1, ("empty",)), None),
    (Ref(1, ("meta", "0")), "zero-key"),
    (Ref(2, ("value",)), ["x", "y"]),
])
def test_a_whole_ref_takes_the_value_at_its_path_with_its_type(ref: Ref, value: Any) -> None:
    assert resolve(ref, result_of) == value


def test_a_template_resolves_to_a_string() -> None:
    template = Template(("tab ", Ref(0, ("tabId",)), " at ", Ref(0, ("url",))))
    assert resolve(template, result_of) == "tab 7 at https://shop.example/cart"


@pytest.mark.parametrize(("ref", "text"), [
    (Ref(0, ("tabId",)), "n=7"),
    (Ref(1, ("items", "0", "price")), "n=12.5"),
    (Ref(1, ("visible",)), "n=true"),
    (Ref(1, ("empty",)), "n=null"),
    (Ref(2, ("value",)), 'n=["x","y"]'),
    (Ref(1, ("items", "1")), 'n={"text":"Second","tags":["a","b"]}'),
])
def test_a_template_writes_non_string_values_as_json_text(ref: Ref, text: str) -> None:
    assert resolve(Template(("n=", ref)), result_of) == text


def test_resolve_replaces_references_inside_lists() -> None:
    value = ("fixed", Ref(0, ("tabId",)), Template(("#", Ref(1, ("count",)))))
    assert resolve(value, result_of) == ("fixed", 7, "#2")


@pytest.mark.parametrize("value", ["plain", 3, 2.5, True, None, ("a", "b")])
def test_values_without_references_resolve_to_themselves(value: Any) -> None:
    assert resolve(value, result_of) == value


def test_resolve_asks_only_for_the_steps_it_names() -> None:
    asked: list[int] = []

    def recording(step: int) -> Any:
        asked.append(step)
        return RESULTS[step]

    resolve(("a", Template((Ref(1, ("count",)), "-", Ref(0, ("tabId",))))), recording)
    assert asked == [1, 0]


@pytest.mark.parametrize(("value", "message"), [
    (Ref(5, ("tabId",)), "${$5.tabId} names step 5, which has no result"),
    (Template(("x", Ref(9))), "${$9} names step 9, which has no result"),
])
def test_a_step_without_a_result_is_reference_unresolved(value: Any, message: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        resolve(value, result_of)
    assert caught.value.code == "reference_unresolved"
    assert caught.value.message == message
    assert caught.value.retryable is False


@pytest.mark.parametrize(("ref", "missing"), [
    (Ref(0, ("nope",)), "nope"),
    (Ref(1, ("items", "2")), "items.2"),
    (Ref(1, ("items", "first")), "items.first"),
    (Ref(1, ("items", "-1")), "items.-1"),
    (Ref(1, ("items", "0", "text", "deeper")), "items.0.text.deeper"),
    (Ref(1, ("count", "x")), "count.x"),
    (Ref(1, ("empty", "x")), "empty.x"),
])
def test_a_missing_path_is_reference_unresolved_naming_how_far_it_got(ref: Ref, missing: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        resolve(ref, result_of)
    assert caught.value.code == "reference_unresolved"
    assert caught.value.message == f"{ref}: step {ref.step}'s result has no {missing}"
    assert caught.value.http_status == 400


def test_an_unresolved_reference_message_holds_no_result_value() -> None:
    with pytest.raises(KitsuneError) as caught:
        resolve(Ref(0, ("password",)), lambda step: {"ok": True, "token": "s3cret-token"})
    assert "s3cret-token" not in caught.value.message
