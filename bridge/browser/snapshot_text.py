"""The text of a snapshot, pure: Playwright's ai-mode aria snapshot with Kitsune's refs, its interactive
view, its cut at an element boundary and its diff against the last one. No IO here.

Playwright writes an element one can act on as ``- button "Save" [ref=e13]`` (``f1e4`` in a frame); Kitsune
writes the ref with the tag of the document that issued it (``[ref=t3d2e13]``: tab 3, its ref document 2),
so a ref names its tab and document and a ref of another one is told apart before anything is sent.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

__all__ = ["Cut", "Line", "cut", "diff", "interactive", "lines_of", "redact_values", "tagged"]

_REF = re.compile(r"\[ref=((?:f[0-9]+)?e[0-9]+)\]")
_TAGGED_REF = re.compile(r"\[ref=(t[0-9]+d[0-9]+(?:f[0-9]+)?e[0-9]+)\]")
_LINE = re.compile(r"^(?P<indent>\s*)- (?P<role>[a-z/][\w/-]*)(?: \"(?P<name>(?:[^\"\\]|\\.)*)\")?")
_VALUE = re.compile(r"^(?P<head>\s*- textbox\b.*?\]): (?P<value>.+)$")
_BOX = re.compile(r" \[box=[^\]]*\]| \[active\]")
"""What a diff does not count as a change: boxes, and where the focus is."""

ACTIONABLE = frozenset({
    "button", "link", "textbox", "searchbox", "checkbox", "radio", "combobox", "listbox", "option", "menuitem",
    "menuitemcheckbox", "menuitemradio", "tab", "switch", "slider", "spinbutton", "treeitem", "iframe",
})
"""Roles one acts on (``interactive`` keeps them; an ``option`` has no ref: its select has)."""
CONTEXT = frozenset({
    "heading", "banner", "navigation", "main", "contentinfo", "complementary", "form", "region", "search",
    "dialog", "alertdialog", "alert", "tablist", "menu", "menubar", "toolbar",
})
"""Headings and landmarks: what ``interactive`` keeps around the actionable elements."""
REDACTED = "••••"
"""What a password field's value reads as."""


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a snapshot: an element (with its ref, when one can act on it) or one of its properties."""

    text: str
    indent: int
    role: str
    name: str | None
    ref: str | None


def tagged(raw: str, tag: str) -> str:
    """Playwright's text with every ``[ref=e13]`` written ``[ref=<tag>e13]``."""
    return _REF.sub(lambda m: f"[ref={tag}{m.group(1)}]", raw)


def redact_values(text: str, secrets: Iterable[str]) -> str:
    """``text`` with every textbox whose value is one of ``secrets`` (a password field's) showing
    :data:`REDACTED` instead: the snapshot of a password field never holds its value."""
    hidden = {s for s in secrets if s}
    if not hidden:
        return text
    out = []
    for line in text.split("\n"):
        match = _VALUE.match(line)
        hide = match is not None and _unquoted(match.group("value")) in hidden
        out.append(f"{match.group('head')}: {REDACTED}" if hide and match is not None else line)
    return "\n".join(out)


def _unquoted(value: str) -> str:
    if value.startswith('"') and value.endswith('"'):
        try:
            return str(json.loads(value))
        except ValueError:
            return value
    return value


def lines_of(text: str) -> list[Line]:
    """The snapshot's lines, each with its depth, role, name and ref."""
    out = []
    for raw in text.split("\n"):
        if not raw.strip():
            continue
        match = _LINE.match(raw)
        indent = len(raw) - len(raw.lstrip(" "))
        ref = _TAGGED_REF.search(raw)
        name = match.group("name") if match is not None else None
        out.append(Line(raw, indent, match.group("role") if match is not None else "", name,
                        ref.group(1) if ref is not None else None))
    return out


def interactive(lines: list[Line]) -> list[Line]:
    """Only the elements one can act on, with the headings and landmarks they sit in, and the options of
    the selects they are."""
    return [line for line in lines
            if line.role in ACTIONABLE or line.role in CONTEXT or "[cursor=pointer]" in line.text]


@dataclass(frozen=True, slots=True)
class Cut:
    """A snapshot's text within its bound."""

    text: str
    shown: int
    """Lines shown."""
    next_offset: int | None
    """Where the rest starts (the ``offset`` of the next snapshot), None when nothing was left out."""


def cut(lines: list[Line], offset: int, max_chars: int) -> Cut:
    """The lines from ``offset`` on, as many whole lines as ``max_chars`` holds (at least one line, itself
    cut when it alone is longer), each line an element or one of its properties."""
    chosen: list[str] = []
    size = 0
    end = offset
    for line in lines[offset:]:
        if size + len(line.text) + 1 > max_chars:
            if not chosen:
                chosen.append(line.text[: max(0, max_chars - 1)])
                end += 1
            break
        chosen.append(line.text)
        size += len(line.text) + 1
        end += 1
    rest = end if end < len(lines) else None
    return Cut("\n".join(chosen), len(chosen), rest)


def _elements(lines: list[Line]) -> dict[str, str]:
    """Each ref's element as its lines say it (its own line and its properties, without boxes or focus)."""
    out: dict[str, str] = {}
    owner: list[tuple[int, str]] = []  # (indent, ref) of the elements above
    for line in lines:
        while owner and owner[-1][0] >= line.indent:
            owner.pop()
        bare = _BOX.sub("", line.text.strip())
        if line.ref is not None:
            out[line.ref] = bare
            owner.append((line.indent, line.ref))
        elif owner:  # a property or an element without a ref: part of the nearest element above with one
            out[owner[-1][1]] += "\n  " + bare
    return out


def diff(before: list[Line], after: list[Line]) -> list[str]:
    """What changed from ``before`` to ``after``, element by element (by ref): ``+`` added, ``-`` removed,
    ``~`` changed (its new state), in the order of ``after`` (removed ones last)."""
    old, new = _elements(before), _elements(after)
    out = []
    for ref, text in new.items():
        if ref not in old:
            out.append("+ " + text)
        elif old[ref] != text:
            out.append("~ " + text)
    out.extend("- " + text.split("\n")[0] for ref, text in old.items() if ref not in new)
    return out
