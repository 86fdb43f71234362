"""The lines of a snapshot as a model reads them, pure, and their cut at an element boundary. No IO here."""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["REDACTED", "Cut", "Line", "cut", "plain"]

REDACTED = "••••"
"""What a password field's value reads as."""


@dataclass(slots=True)
class Line:
    """One line of a snapshot: an element (with its ref, when it shows one) or what one of them holds (not frozen:
    a frozen dataclass's ``__init__`` is three times as slow, and a snapshot makes one per element)."""

    text: str
    indent: int
    role: str
    name: str | None
    ref: str | None


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
    if offset == 0:  # most snapshots are read whole: one join says whether they fit
        whole = "\n".join([line.text for line in lines])
        if len(whole) < max_chars:  # as the loop below counts: each line and its newline
            return Cut(whole, len(lines), None)
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


def plain(text: str) -> list[Line]:
    """``text``'s lines, as :func:`cut` takes them."""
    return [Line(line, 0, "", None, None) for line in text.split("\n")]
