"""Step paths (spec: Step paths): where a step is in a call.

``"2"`` is top-level command 2, ``"1.2"`` step 2 of the sequence at command 1, ``"0.1.3"`` step 3
of sequence 1 of the parallel at command 0. The parser's error paths also name the part of a
block a command is in (``"1.then.0"``, ``"3.command"``). A :class:`StepPath` is a ``str``, so it
is its own wire form: events, checkpoints and JSON carry it as they always did.
"""

from __future__ import annotations

from collections.abc import Iterator

__all__ = ["ROOT", "StepPath"]


class StepPath(str):
    """A step's path: parts joined by dots; built with :meth:`child`, never by hand."""

    __slots__ = ()

    def child(self, *parts: int | str) -> StepPath:
        """The path of a step inside this one (``ROOT.child(2)`` is ``"2"``, ``p.child(1, 3)`` is ``p + ".1.3"``)."""
        tail = str(parts[0]) if len(parts) == 1 else ".".join(map(str, parts))
        return StepPath(f"{self}.{tail}" if self else tail)

    @property
    def parent(self) -> StepPath:
        """The path one level up; :data:`ROOT` for a top-level step."""
        return StepPath(self.rpartition(".")[0])

    def ancestors(self) -> Iterator[StepPath]:
        """The paths this one is inside, innermost first (:data:`ROOT` left out)."""
        path = self.parent
        while path:
            yield path
            path = path.parent

    def within(self, other: str) -> bool:
        """Whether this path is strictly inside the step at ``other`` (the root is no step)."""
        return self.startswith(other + ".")


ROOT = StepPath("")
"""The call itself: the path its top-level commands are children of (and of call-level errors)."""
