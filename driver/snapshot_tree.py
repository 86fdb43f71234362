"""The snapshot a model reads, pure: Playwright's ai-mode tree, with every element's ref (the diff's keys)
written with the tag of the document that issued it and password values hidden, written compactly. No IO here.

Playwright writes an element as ``- button "Save" [ref=e13]`` (``f1e4`` in a frame); Kitsune writes the ref
with the tag of the document that issued it (``t3d2e13``: tab 3, its ref document 2), so a ref names its tab
and document and a ref of another one is told apart before anything is sent.

Playwright gives every element a ref and a line of its own; a model pays for each byte of it. The text
written here keeps what a model needs to read the page and act on it, and nothing it cannot use:

- a ref only on what one acts on (links, buttons, fields, ... and elements drawn with a pointer cursor)
  and on the regions one reads a part of the page by (headings, landmarks, lists and tables);
- no line for an unnamed ``generic``, ``group`` or ``paragraph`` that only holds others (its children
  take its place), nor for a text that only repeats a neighbour's name (a field's label);
- a link's target on its own line (``- link "Home" [ref=t1d1e4] [url=/home]``), a select's options on one
  (``- options: "A" [selected], "B"``), no ``[cursor=pointer]`` (the ref says it).

An element keeps its role, name, states (``[checked]``, ``[level=2]``, ...) and text, in the page's order
and nesting.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection

from driver.snapshot_text import REDACTED, Line

__all__ = ["ACTIONABLE", "CONTEXT", "MAX_DEPTH", "Element", "Kept", "diff", "interactive", "parse", "render"]

ACTIONABLE = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option", "menuitem",
    "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "treeitem", "iframe",
})
"""Roles one acts on: their elements carry a ref (an ``option`` of a select is chosen through its select)."""
CONTEXT = frozenset({
    "heading", "banner", "navigation", "main", "contentinfo", "complementary", "form", "region", "search",
    "dialog", "alertdialog", "alert", "tablist", "menu", "menubar", "toolbar",
})
"""Headings and landmarks: what ``interactive`` keeps around the actionable elements. They carry a ref too, as
lists and tables do: one reads the part of a page under it (``snapshot {ref}``)."""
_REGIONS = CONTEXT | {"list", "table"}
_SELECTS = frozenset({"combobox", "listbox"})
MAX_DEPTH = 100
"""The tree's depth at most (the walks over it recurse): a page's deeper elements are written at this depth."""
"""Roles whose options are written on one line."""
_WRAPPERS = frozenset({"generic", "group", "none", "presentation", "paragraph"})
"""Roles whose unnamed elements only hold others: their children take their place."""
_HEAD = re.compile(r'^(?P<role>/?[a-z][\w-]*)(?: "(?P<name>(?:[^"\\]|\\.)*)")?(?P<attrs>(?: \[[^\]]*\])*)'
                   r"(?::(?: (?P<value>.*))?)?$")
"""An element's line after ``- ``, where Playwright did not quote it as YAML: role, name, states, text."""
_LINE = re.compile(r'^( *+)- (?:(/?[a-z][\w-]*+)( "[^"\\\n]*+(?:\\.[^"\\\n]*+)*+")?((?: \[[^\]\n]*+\])*+)(:(?: .*+)?)?$'
                   r"|(.*+))$", re.MULTILINE)
"""A line of Playwright's text, :data:`_HEAD` read in the same pass (one regex over the whole text): its indent,
role, quoted name, states, ``:`` and text; else (a line Playwright quoted as YAML, or no element's) its content.
Possessive (no part gives back what it matched: none could make the line match another way): a fifth faster."""
_ATTR = re.compile(r"\[([^\]]*)\]")
_POINTER = ("cursor=pointer",)
_IGNORED = frozenset({"cursor=pointer", "active"})
"""States a diff does not count as a change (where the pointer or the focus is; nor boxes)."""


class Element:
    """One element of the tree: its role, name, states, text and children; ``ref`` is Playwright's (tagged)."""

    __slots__ = ("actionable", "children", "name", "pointer", "props", "ref", "role", "shown_ref", "states", "url",
                 "value")

    def __init__(self, role: str, name: str | None, states: tuple[str, ...], ref: str | None, value: str | None,
                 pointer: bool = False, url: str | None = None, props: tuple[str, ...] = ()) -> None:
        self.role = role  # one assignment each: a snapshot makes an element per line
        self.name = name
        self.states = states
        self.ref = ref
        self.value = value
        self.pointer = pointer
        self.url = url
        self.props = props
        self.children: list[Element] = []
        actionable = ref is not None and (pointer or role in ACTIONABLE)
        self.actionable = actionable
        """Whether one acts on it (then it shows its ref)."""
        self.shown_ref = ref if actionable or role in _REGIONS else None
        """The ref its line shows: one acts on it, or it is a region one reads a part of the page by."""

    def head(self) -> str:
        """The element's own line, without indent: role, name, states, ref (when it shows it), url, text."""
        return _written(self, self.states)


def _written(element: Element, states: tuple[str, ...]) -> str:
    """``element``'s line with ``states`` (without ``cursor=pointer``: its ref says it)."""
    head = element.role if element.name is None else f'{element.role} "{element.name}"'
    for state in states:
        if state != "cursor=pointer":
            head += f" [{state}]"
    if element.shown_ref is not None:
        head += f" [ref={element.shown_ref}]"
    if element.url is not None:
        head += f" [url={element.url}]"
    for prop in element.props:
        head += f" [{prop}]"
    return head if element.value is None else f"{head}: {element.value}"


def _unquoted(value: str) -> str:
    if value.startswith('"') and value.endswith('"'):
        try:
            return str(json.loads(value))
        except ValueError:
            return value
    return value


def _element(body: str, tag: str, secrets: Collection[str]) -> Element:
    """The element of a line's content after ``- `` (unquoted where Playwright quoted it as YAML)."""
    if body.startswith("'") and (body.endswith("'") or body.endswith("':")):
        colon = body.endswith(":")
        body = body[1:-2 if colon else -1].replace("''", "'") + (":" if colon else "")
    match = _HEAD.match(body)
    if match is None:
        return Element("text", None, (), None, body)
    role, name, attrs, value = match.groups()
    states, ref = _states_and_ref(attrs, tag)
    if value is not None and role == "textbox" and secrets and _unquoted(value) in secrets:
        value = REDACTED
    return Element(role, name, states, ref, value, "cursor=pointer" in states)


def _states_and_ref(attrs: str, tag: str) -> tuple[tuple[str, ...], str | None]:
    """The states of a line's ``[...]`` and its ref (the first ``ref=``, tagged), which is not one of them."""
    states = _ATTR.findall(attrs)
    for at, state in enumerate(states):
        if state.startswith("ref="):
            del states[at]
            return tuple(states), tag + state[4:]
    return tuple(states), None


def parse(raw: str, tag: str, secrets: Collection[str] = ()) -> list[Element]:
    """The tree of Playwright's ai-mode snapshot text, each ref written with ``tag`` (``e13`` as ``t3d2e13``),
    the value of a textbox that is one of ``secrets`` (a password field's) written :data:`REDACTED`."""
    hidden = {secret for secret in secrets if secret}
    top = Element("", None, (), None, None)  # holds the roots
    indents, elements = [-1], [top]  # the open elements' indents, and them: this runs per line, so no tuples
    deepest = MAX_DEPTH + 1
    for spaces, found, quoted, attrs, said, other in _LINE.findall(raw):
        indent = len(spaces)
        while indents[-1] >= indent:
            indents.pop()
            elements.pop()
        if len(elements) > deepest:  # a page nested deeper: its elements there are siblings at the bound
            indents.pop()
            elements.pop()
        parent = elements[-1]
        element, role = None, found
        if role:
            value = said[2:] if len(said) > 1 else None
        else:  # quoted as YAML, or no element's line
            element = _element(other, tag, hidden)
            role, value = element.role, element.value
        if role[0] == "/" and parent is not top:  # a property: /url, /placeholder
            if role == "/url":
                parent.url = value
            else:
                parent.props += (f"{role[1:]}={value}",)
            continue
        if element is None:
            if attrs[:6] == " [ref=":  # most lines: the ref first, then at most the pointer
                end = attrs.find("]")
                rest, ref = attrs[end + 1:], tag + attrs[6:end]
                states = () if not rest else _POINTER if rest == " [cursor=pointer]" else tuple(_ATTR.findall(rest))
            else:
                states, ref = _states_and_ref(attrs, tag) if attrs else ((), None)
            if hidden and value is not None and role == "textbox" and _unquoted(value) in hidden:
                value = REDACTED
            element = Element(role, quoted[2:-1] if quoted else None, states, ref, value,
                              states is _POINTER or "cursor=pointer" in states)
        parent.children.append(element)
        indents.append(indent)
        elements.append(element)
    return top.children


class Kept:
    """A snapshot kept for the next diff: Playwright's text, read again only when a diff is asked for; or, where
    the text holds a password field's value (never kept), its tree, the value hidden.

    A tree of a big page is thousands of objects (a table of 1,000 rows: 14,000); kept from one snapshot to the
    next, they reach the collector's oldest generation, whose full collections then walk the whole process
    (measured on a node reading that table and 300 products in turn: 5 full collections in 24 snapshots, 140 ms
    each on a loaded machine; 1 with texts kept). A text is one object."""

    __slots__ = ("_raw", "_tag", "_tree")

    def __init__(self, raw: str, tag: str, tree: list[Element], secrets: Collection[str]) -> None:
        hides = any(secrets)
        self._raw, self._tag = ("" if hides else raw), tag
        self._tree: list[Element] | None = tree if hides else None

    def tree(self) -> list[Element]:
        return self._tree if self._tree is not None else parse(self._raw, self._tag)


def _label(value: str | None, siblings: list[Element], at: int) -> bool:
    """A text (``value``, without children) that only repeats the name of the element beside it (a field's label)."""
    if at > 0 and siblings[at - 1].name is not None and siblings[at - 1].name == value:
        return True
    return at + 1 < len(siblings) and siblings[at + 1].name is not None and siblings[at + 1].name == value


def _options(element: Element) -> Element | None:
    """A select's options as one line."""
    options = [child for child in element.children if child.role == "option" and not child.children]
    if not options or len(options) != len(element.children):
        return None
    said = ", ".join(f'"{o.name or ""}"' + "".join(f" [{s}]" for s in o.states) for o in options)
    return Element("options", None, (), None, said)


def _wrapper(element: Element) -> bool:
    return (element.role in _WRAPPERS and element.name is None and element.value is None and not element.pointer
            and not element.props and bool(element.children) and set(element.states) <= {"active"})


def render(roots: list[Element]) -> list[Line]:
    """The tree as a model reads it (see the module's docstring)."""
    out: list[Line] = []
    add = out.append

    def walk(elements: list[Element], depth: int) -> None:
        pad, indent = "  " * depth + "- ", 2 * depth
        for at, element in enumerate(elements):
            role, children = element.role, element.children  # this runs per element: the common case first
            if role == "text":
                if not children and _label(element.value, elements, at):
                    continue
            elif children and role in _WRAPPERS and _wrapper(element):
                walk(children, depth)
                continue
            add(Line(pad + _written(element, element.states), indent, role, element.name, element.shown_ref))
            if children:
                options = _options(element) if role in _SELECTS else None
                if options is not None:
                    add(Line(f"  {pad}{options.head()}", indent + 2, "options", None, None))
                else:
                    walk(children, depth + 1)

    walk(roots, 0)
    return out


def _line(element: Element, depth: int) -> Line:
    return Line(f"{'  ' * depth}- {element.head()}", 2 * depth, element.role, element.name, element.shown_ref)


def interactive(roots: list[Element]) -> list[Line]:
    """Only the elements one acts on, with the headings and the landmarks they sit in."""
    out: list[Line] = []

    def walk(elements: list[Element], depth: int) -> int:
        found = 0
        for element in elements:
            if element.actionable:
                out.append(_line(element, depth))
                options = _options(element) if element.role in _SELECTS else None
                if options is not None:
                    out.append(_line(options, depth + 1))
                found += 1
            elif element.role == "heading":
                out.append(_line(element, depth))
            elif element.role in CONTEXT:
                at = len(out)
                out.append(_line(element, depth))
                if walk(element.children, depth + 1) == 0 and not _has_heading(out, at):
                    del out[at:]
                found += 1
            elif element.children:
                found += walk(element.children, depth)
        return found

    walk(roots, 0)
    return out


def _has_heading(out: list[Line], at: int) -> bool:
    return any(line.role == "heading" for line in out[at + 1:])


def _states(element: Element) -> str:
    """The element's own state as a diff compares it: its line and its options, texts and properties."""
    states = tuple(s for s in element.states if s not in _IGNORED and not s.startswith("box="))
    texts = [f"  - {child.head()}" for child in element.children if child.ref is None and not child.children]
    return "\n".join([f"- {_written(element, states)}", *texts])


def _by_ref(roots: list[Element], only_interactive: bool) -> dict[str, str]:
    out: dict[str, str] = {}

    def walk(elements: list[Element]) -> None:
        for element in elements:
            if element.ref is not None and (not only_interactive or element.actionable or element.role in CONTEXT):
                out[element.ref] = _states(element)
            walk(element.children)

    walk(roots)
    return out


def diff(before: list[Element], after: list[Element], only_interactive: bool = False) -> list[str]:
    """What changed from ``before`` to ``after``, element by element (of the interactive view's, with
    ``only_interactive``): ``+`` added, ``-`` removed, ``~`` changed (its new state), in the order of ``after``
    (removed ones last); where the focus is does not count."""
    old, new = _by_ref(before, only_interactive), _by_ref(after, only_interactive)
    out = [("+ " if ref not in old else "~ ") + text for ref, text in new.items() if old.get(ref) != text]
    out.extend("- " + text.split("\n")[0] for ref, text in old.items() if ref not in new)
    return out
