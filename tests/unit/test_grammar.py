"""One grammar: the published JSON Schema and the parser accept the same commands.

Documents drawn from the schema are accepted by the parser. Every combination of the parameters'
example values, built from the command tables, gets the same answer from both, and so does every
value the parser refuses for its shape. What JSON Schema cannot say is named in
:data:`PARSER_ONLY` and :data:`PARSER_LENIENT`, and each is shown once.
"""

from __future__ import annotations

import dataclasses
import itertools
import json
import types
import typing
from collections.abc import Callable, Iterator
from typing import Any, Literal, Union

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator, ValidationError
from jsonschema.protocols import Validator
from jsonschema.validators import extend

from messages.commands import ACTIONS, Command, Param, parameters, parse_body, parse_call
from messages.errors import KitsuneError
from messages.references import Ref, Template, parse_references
from messages.schema import batch_schema, command_schema, parallel_schema

SCHEMAS = {"batch": batch_schema(), "parallel": parallel_schema(), "command": command_schema()}
DEFS = SCHEMAS["command"]["$defs"]
COMMON = {f.name for f in dataclasses.fields(Command)}
"""The parameters every command takes (tabId, timeout, label)."""
STEP = {"action": "url"}
PARALLEL = {"action": "parallel", "sequences": [[STEP]]}
FIRST = {"action": "getTabs"}
"""Step 0 of every batch built here, so that ``${$0...}`` names an earlier step."""
ABSENT = object()
ARABIC_ONE = "\u0661"
"""A digit to Python's ``\\d`` that is no step index."""
pytestmark = pytest.mark.filterwarnings("ignore:Generating overly large repr")  # of the recursive strategies

# --- documents drawn from the schema ---------------------------------------------------------

CHOICE_DEPTH = 6
"""References followed before a choice takes its first alternative (an action, an integer)."""
STRINGS = st.text(max_size=6) | st.sampled_from(
    ["#a", "${$0}", "${$1.tabId}", "a ${$0.x.1} b", "${${$0}", "${$", "${$x}", "$${$2}"])
"""Any text, and texts with references, well-formed or not: the schema's ``not`` sorts them."""


def _remembering_validator() -> type[Validator]:
    """Draft 2020-12 validators (of one ``$defs``) that check a value against a definition once: whether it is valid
    there is kept, and the definitions and documents that hold the value again answer from that without descending
    into it. (Valid against a ``$ref`` is a fact of the definition and the value alone: the schemas use no
    ``$dynamicRef`` and no ``unevaluated*``, :func:`test_the_schemas_are_valid_json_schema_and_name_every_action`.)
    For :meth:`~Validator.is_valid`: an invalid value's one error names the definition alone."""
    known: dict[tuple[str, str], bool] = {}
    follow = Draft202012Validator.VALIDATORS["$ref"]

    def ref(validator: Validator, ref: str, instance: Any, schema: dict[str, Any]) -> Iterator[Any]:
        key = (ref, json.dumps(instance, sort_keys=True))
        if key not in known:
            known[key] = next(iter(follow(validator, ref, instance, schema)), None) is None
        if not known[key]:
            yield ValidationError(f"not valid against {ref}")

    remembering: type[Validator] = extend(Draft202012Validator, {"$ref": ref})
    return remembering


VALIDATORS = {kind: _remembering_validator()(schema) for kind, schema in SCHEMAS.items()}
"""The schemas' validators, each remembering its definitions' answers (the cases below share many values)."""


class SchemaDocuments:
    """Documents valid for a schema of the command language, drawn from its keywords.

    A value is built from ``type``, ``properties`` (or ``additionalProperties``), ``items``, ``enum``,
    ``const`` and the choices;
    the rules across keys (``allOf``, ``not``, ``maxLength``) are left to each definition's own
    validator, which filters what is drawn. (hypothesis-jsonschema cannot follow the schema's
    recursive ``$ref``.)
    """

    def __init__(self, root: dict[str, Any]) -> None:
        self.defs: dict[str, Any] = root["$defs"]
        checking = _remembering_validator()
        self.validators = {name: checking({"$defs": self.defs, "$ref": f"#/$defs/{name}"}) for name in self.defs}
        self.named: dict[tuple[str, int], st.SearchStrategy[Any]] = {}
        self.documents = self.draw(root, 0).filter(checking(root).is_valid)

    def definition(self, name: str, depth: int) -> st.SearchStrategy[Any]:
        if (name, depth) not in self.named:
            self.named[name, depth] = st.deferred(
                lambda: self.draw(self.defs[name], depth + 1).filter(self.validators[name].is_valid))
        return self.named[name, depth]

    def draw(self, schema: dict[str, Any], depth: int) -> st.SearchStrategy[Any]:
        if "$ref" in schema:
            return self.definition(schema["$ref"].rsplit("/", 1)[1], depth)
        if "const" in schema:
            return st.just(schema["const"])
        if "enum" in schema:
            return st.sampled_from(schema["enum"])
        choices = schema.get("oneOf", schema.get("anyOf"))
        if choices:
            shared = {k: v for k, v in schema.items() if k not in ("oneOf", "anyOf")}
            taken = choices if depth < CHOICE_DEPTH else choices[:1]
            return st.one_of([self.draw({**shared, **choice}, depth) for choice in taken])
        kind = schema["type"]
        if kind == "object" and "properties" not in schema:  # any object: its values drawn from their schema
            return st.dictionaries(STRINGS, self.draw(schema["additionalProperties"], depth + 1), max_size=2)
        if kind == "object":
            properties = {k: self.draw(v, depth) for k, v in schema["properties"].items()}
            required = schema.get("required", [])
            return st.fixed_dictionaries({k: properties[k] for k in required},
                                         optional={k: v for k, v in properties.items() if k not in required})
        if kind == "array":
            low = schema.get("minItems", 0)
            return st.lists(self.draw(schema["items"], depth), min_size=low, max_size=low + 2)
        if kind == "string":
            return st.from_regex(schema["pattern"], fullmatch=True) if "pattern" in schema else STRINGS
        if kind == "integer":
            return st.integers(schema.get("minimum"), schema.get("maximum"))
        if kind == "number":
            return st.floats(schema.get("minimum", schema.get("exclusiveMinimum")), schema.get("maximum"),
                             allow_nan=False, allow_infinity=False, exclude_min="exclusiveMinimum" in schema)
        if kind == "null":
            return st.none()
        assert kind == "boolean", schema
        return st.booleans()


def _accepted_or_parser_only(parse: Callable[[], object]) -> None:
    """``parse`` succeeds, or refuses for a rule of :data:`PARSER_ONLY`."""
    try:
        parse()
    except KitsuneError as e:
        assert e.code in ("too_deep", "too_many_commands") or (
            e.code == "bad_reference" and "earlier step" in e.message), (e.code, e.message)


DRAWN = settings(max_examples=100, derandomize=True, deadline=None,
                 suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


@DRAWN
@given(SchemaDocuments(SCHEMAS["batch"]).documents)
def test_a_batch_drawn_from_the_schema_is_accepted_by_the_parser(body: Any) -> None:
    _accepted_or_parser_only(lambda: parse_body("batch", body))


@DRAWN
@given(SchemaDocuments(SCHEMAS["parallel"]).documents)
def test_a_parallel_drawn_from_the_schema_is_accepted_by_the_parser(body: Any) -> None:
    _accepted_or_parser_only(lambda: parse_body("parallel", body))


@DRAWN
@given(SchemaDocuments(SCHEMAS["command"]).documents)
def test_a_command_drawn_from_the_schema_is_accepted_by_the_parser(command: Any) -> None:
    _accepted_or_parser_only(lambda: parse_call("batch", [command]))


# --- the parser's cases, from the command tables ----------------------------------------------


def _examples(param: Param) -> list[Any]:
    """Values of the parameter's type the parser may take; some of them its checks across parameters refuse."""
    if param.type == tuple[tuple[Command, ...], ...]:
        return [[[STEP]], [[STEP], [STEP, STEP]]]
    if param.type == tuple[Command, ...]:
        return [[STEP], [STEP, {"action": "sequence", "steps": [STEP]}], *([] if param.meta.get("min_items") else [[]])]
    if param.type is Command:
        return [STEP, {**STEP, "tabId": 1}, {"action": "sequence", "steps": [STEP]}]
    return _typed_examples(param.type, param.meta)


def _typed_examples(tp: Any, meta: typing.Mapping[str, Any]) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if Template in members:
            return ["#a", "${$0}", "a ${$0.items.1} b"]
        return [*(v for m in members if m is not Ref for v in _typed_examples(m, meta)),
                *(["${$0.v}"] if Ref in members else [])]
    if origin is Literal:
        return list(typing.get_args(tp))
    if origin is tuple:
        return [_typed_examples(typing.get_args(tp)[0], meta), *([] if meta.get("min_items") else [[]])]
    if typing.is_typeddict(tp):
        fields = typing.get_type_hints(tp)
        return [{name: _typed_examples(t, meta)[0] for name, t in fields.items()
                 if full or name in tp.__required_keys__} for full in (True, False)]
    if tp is str:
        return ["x"]
    if tp is bool:
        return [True, False]
    low, high = meta.get("minimum", 0), meta.get("maximum", 7)
    return [low, high] if tp is int else [float(low), float(high)]


def _cases(action: str) -> Iterator[dict[str, Any]]:
    """Every combination of the examples of the action's own parameters; each common parameter's examples alone."""
    own = [p for p in parameters(ACTIONS[action]) if p.name not in COMMON]
    choices = [_examples(p) if p.required else [ABSENT, *_examples(p)] for p in own]
    for picks in _covering(tuple(range(len(c))) for c in choices):
        values = [choice[i] for choice, i in zip(choices, picks, strict=True)]
        yield {"action": action, **{p.json_name: v for p, v in zip(own, values, strict=True) if v is not ABSENT}}
    for param in parameters(ACTIONS[action]):
        if param.name in COMMON:
            yield from ({**_minimal(action), param.json_name: value} for value in _examples(param))


MAX_COMBINATIONS = 500
"""Past this many combinations of an action's examples, the cases cover every pair of them instead (the checks
across parameters are about pairs: selector and ref, op and key...)."""


def _covering(ranges: Iterator[tuple[int, ...]]) -> Iterator[tuple[int, ...]]:
    """Every combination of the indexes, or, when there are more than :data:`MAX_COMBINATIONS`, the first of
    them that covers each pair of (parameter, index) not covered yet."""
    every = list(itertools.product(*ranges))
    if len(every) <= MAX_COMBINATIONS:
        yield from every
        return
    seen: set[tuple[int, int, int, int]] = set()
    for picks in every:
        pairs = {(a, picks[a], b, picks[b]) for a in range(len(picks)) for b in range(a + 1, len(picks))}
        if not pairs <= seen:
            seen |= pairs
            yield picks


def _minimal(action: str) -> dict[str, Any]:
    return {"action": action, **{p.json_name: _examples(p)[0] for p in parameters(ACTIONS[action]) if p.required}}


def _answers(body: Any, kind: Literal["batch", "parallel"] = "batch") -> tuple[bool, bool]:
    """(whether the parser accepts ``body``, whether the schema does)."""
    try:
        parse_body(kind, body)
        parsed = True
    except KitsuneError:
        parsed = False
    return parsed, VALIDATORS[kind].is_valid(body)


@pytest.mark.parametrize("action", list(ACTIONS))
def test_parser_and_schema_agree_on_every_combination_of_example_values(action: str) -> None:
    disagree = [(case, answers) for case in _cases(action)
                if (answers := _answers({"commands": [FIRST, case]}))[0] != answers[1]]
    assert disagree == [], f"{len(disagree)} (parser, schema) disagreements, the first: {disagree[:1]}"


def test_the_cases_include_refusals_by_the_checks_across_parameters() -> None:
    """The combinations above are not all accepted: the checks across parameters are exercised."""
    for action in ("find", "waitFor", "cookies", "storage", "clipboard", "broadcast"):
        assert any(not _answers({"commands": [FIRST, case]})[0] for case in _cases(action)), action


# --- refused for their shape ------------------------------------------------------------------

NESTED_PARALLEL = [PARALLEL]


def _wrong(param: Param) -> list[Any]:
    """Values the parser refuses for their shape: wrong JSON types, out of bounds, malformed references."""
    if param.type == tuple[tuple[Command, ...], ...]:
        return ["x", [], [[]], [["x"]], [NESTED_PARALLEL]]
    if param.type == tuple[Command, ...]:
        return ["x", [1], [{"action": "nope"}], NESTED_PARALLEL, *([[]] if param.meta.get("min_items") else [])]
    if param.type is Command:
        return ["x", {"action": "nope"}, PARALLEL]
    return _typed_wrong(param.type, param.meta)


def _typed_wrong(tp: Any, meta: typing.Mapping[str, Any]) -> list[Any]:
    origin = typing.get_origin(tp)
    if origin in (Union, types.UnionType):
        members = [m for m in typing.get_args(tp) if m is not type(None)]
        if Template in members:
            return [*_typed_wrong(str, meta)[:2], "${$x}", "a ${$", "${$0.}", "${$" + ARABIC_ONE + "}"]
        return [*(v for m in members if m is not Ref for v in _typed_wrong(m, meta)),
                *(["a${$0}", "${$0", ["${$0}"]] if Ref in members else [])]
    if origin is Literal:
        return ["nope", 1]
    if origin is tuple:
        return ["x", [{}], *([[]] if meta.get("min_items") else []),
                *([[item] for item in _typed_wrong(typing.get_args(tp)[0], meta)])]
    if typing.is_typeddict(tp):
        return [{"name": "a"}, {"name": "a", "value": "b", "other": 1}, {"name": 1, "value": "b"},
                {"name": "a", "value": "${$0}"}, "x"]
    if tp is str:
        return [1, "a" * (meta.get("max_length", 8) + 1), "${$0}"]
    if tp is bool:
        return ["x", 1]
    wrong: list[Any] = ["1", True, *([1.5] if tp is int else [])]
    if "minimum" in meta:
        wrong.append(meta["minimum"] - 1)
    if "maximum" in meta:
        wrong.append(meta["maximum"] + 1)
    return wrong


SHAPE_CASES = [(action, param.json_name, value) for action, cls in ACTIONS.items() for param in parameters(cls)
               for value in _wrong(param)]


@pytest.mark.parametrize(("action", "name", "value"), SHAPE_CASES,
                         ids=[f"{a}.{n}={v!r:.30}" for a, n, v in SHAPE_CASES])
def test_a_parameter_the_parser_refuses_for_its_shape_is_refused_by_the_schema(action: str, name: str,
                                                                               value: Any) -> None:
    assert _answers({"commands": [FIRST, {**_minimal(action), name: value}]}) == (False, False)


@pytest.mark.parametrize("action", list(ACTIONS))
def test_a_missing_or_unknown_parameter_is_refused_by_both(action: str) -> None:
    minimal = _minimal(action)
    cases = [{**minimal, "bogus": 1}, *({k: v for k, v in minimal.items() if k != name} for name in minimal),
             *({**minimal, name: None} for name in minimal)]
    assert [_answers({"commands": [FIRST, case]}) for case in cases] == [(False, False)] * len(cases)


BAD_BODIES: list[tuple[Literal["batch", "parallel"], Any]] = [
    ("batch", []), ("batch", {}), ("batch", {"commands": []}), ("batch", {"commands": STEP}),
    ("batch", {"commands": ["x"]}), ("batch", {"commands": [{}]}), ("batch", {"commands": [{"action": 1}]}),
    ("batch", {"commands": [{"action": "nope"}]}), ("batch", {"commands": [STEP], "bogus": 1}),
    ("batch", {"commands": [STEP], "tabId": True}), ("batch", {"commands": [STEP], "tabId": "1"}),
    ("batch", {"commands": [STEP], "timeout": 0}), ("batch", {"commands": [STEP], "timeout": 3601}),
    ("batch", {"commands": [STEP], "stopOnWarning": "x"}),
    ("batch", {"commands": [{"action": "sequence", "steps": [PARALLEL]}]}),
    ("batch", {"commands": [{"action": "parallel", "sequences": [[PARALLEL]]}]}),
    ("parallel", {"sequences": []}), ("parallel", {"sequences": [[]]}), ("parallel", {"sequences": [[PARALLEL]]}),
    ("parallel", {"sequences": [[STEP]], "commands": [STEP]}), ("parallel", {"commands": [STEP]}),
]


@pytest.mark.parametrize(("kind", "body"), BAD_BODIES, ids=[f"{k}:{b!r:.50}" for k, b in BAD_BODIES])
def test_a_body_the_parser_refuses_for_its_shape_is_refused_by_the_schema(kind: Literal["batch", "parallel"],
                                                                          body: Any) -> None:
    assert _answers(body, kind) == (False, False)


# --- what JSON Schema cannot say ---------------------------------------------------------------


def _nested(depth: int) -> dict[str, Any]:
    return STEP if depth == 1 else {"action": "sequence", "steps": [_nested(depth - 1)]}


PARSER_ONLY = {
    "a reference names a step that is not an earlier one (positions in a list)":
        {"commands": [{"action": "click", "selector": "${$0}"}]},
    "blocks nest deeper than the call's limit (8; expressible only by unrolling the grammar)":
        {"commands": [_nested(9)]},
    "more commands than the call's limit (1000, counted across the whole tree)":
        {"commands": [{"action": "navigate", "url": "about:blank"}] * 1001},  # the schema's first action: quick
}
"""Documents the schema accepts and only the parser refuses."""
PARSER_LENIENT = {
    "null for an optional parameter is taken as absent (the schema does not offer null)":
        {"commands": [{"action": "navigate", "url": "http://x.test/", "waitUntil": None}]},
}
"""Documents the parser accepts that the schema does not publish."""


@pytest.mark.parametrize("body", PARSER_ONLY.values(), ids=list(PARSER_ONLY))
def test_what_only_the_parser_refuses(body: Any) -> None:
    assert _answers(body) == (False, True)


def test_an_integer_written_with_a_fraction_is_refused_by_the_parser_alone() -> None:
    """JSON Schema takes ``2.0`` as an integer; the parser reads numbers one way, strictly (issue 29): a tab
    id ``48.0`` was taken as tab 48 and its write sent."""
    assert _answers({"commands": [{"action": "click", "selector": "a", "clickCount": 2.0}]}) == (False, True)
    assert _answers({"commands": [{"action": "click", "selector": "a", "tabId": 48.0}]}) == (False, True)
    assert _answers({"commands": [{"action": "click", "selector": "a", "clickCount": 2.5}]}) == (False, False)


@pytest.mark.parametrize("body", PARSER_LENIENT.values(), ids=list(PARSER_LENIENT))
def test_what_only_the_parser_accepts(body: Any) -> None:
    assert _answers(body) == (True, False)


# --- references in strings ---------------------------------------------------------------------

TEXT = Draft202012Validator(DEFS["click"]["properties"]["selector"])
PLAIN = Draft202012Validator(DEFS["click"]["properties"]["label"])
WHOLE = Draft202012Validator({"$defs": DEFS, "$ref": "#/$defs/reference"})
REFERENCE_ALPHABET = "${}$.0a-_ " + ARABIC_ONE
"""Characters references are made of."""


def _parses(text: str) -> str | Ref | Template | None:
    try:
        return parse_references(text)
    except ValueError:
        return None


@settings(max_examples=500, derandomize=True, deadline=None)
@given(st.text(REFERENCE_ALPHABET + "\n", max_size=14))
def test_a_text_parameter_takes_what_the_reference_parser_reads(text: str) -> None:
    assert TEXT.is_valid(text) == (_parses(text) is not None)
    assert PLAIN.is_valid(text) == ("${$" not in text)


@settings(max_examples=300, derandomize=True, deadline=None)
@given(st.text(REFERENCE_ALPHABET, max_size=14) | st.from_regex(r"\$\{\$[0-9]{1,3}(\.[a-z0-9_-]{1,3}){0,3}\}",
                                                               fullmatch=True))
def test_a_whole_reference_is_what_the_reference_parser_reads_as_one(text: str) -> None:
    """Without a newline: Python's ``re`` lets the pattern's ``$`` match before a final one, ECMA-262 does not."""
    assert WHOLE.is_valid(text) == isinstance(_parses(text), Ref)


def test_the_schemas_are_valid_json_schema_and_name_every_action() -> None:
    for schema in SCHEMAS.values():
        Draft202012Validator.check_schema(schema)
        assert not {"$dynamicRef", "unevaluatedProperties", "unevaluatedItems"} & set(_keywords(schema))
    assert set(ACTIONS) <= set(DEFS)


def _keywords(schema: Any) -> Iterator[str]:
    """Every key of every object in ``schema``."""
    if isinstance(schema, dict):
        for key, value in schema.items():
            yield key
            yield from _keywords(value)
    elif isinstance(schema, list):
        for value in schema:
            yield from _keywords(value)
