"""The refs each session holds on each tab: per tab and per session (agent, ``X-Kitsune-Session``), the
document its refs belong to (the document's own nonce, which the site-tools init script gives every document),
a tag unique to that tab, session and document (``t3d2``) and its last snapshot."""

from __future__ import annotations

import itertools
from dataclasses import dataclass

from driver.snapshot_tree import Kept

__all__ = ["Issued", "Owner", "RefBook"]

Owner = tuple[str | None, str | None]
"""Whose refs: (agent, agent's session)."""


@dataclass(slots=True)
class Issued:
    """The refs a session holds on a tab: the document they belong to, their tag, the last snapshot (for a diff)."""

    document: str
    tag: str
    frames: tuple[str, ...] = ()
    """The documents of the page's frames when the refs were issued: a frame's ref (``f1e3``) is stale once
    they changed (a frame's new document numbers its elements again)."""
    navigations: int = 0
    """How many times the tab's main frame had navigated when they were last seen current: while it has not
    navigated since, their document is still the tab's."""
    last: Kept | None = None


class RefBook:
    """The refs each session holds on each tab (used on the loop only)."""

    def __init__(self) -> None:
        self._issued: dict[tuple[int, Owner], Issued] = {}
        self._counters: dict[int, itertools.count[int]] = {}

    def issue(self, tab: int, owner: Owner, document: str, frames: tuple[str, ...],
              navigations: int) -> tuple[Issued, bool]:
        """The refs of ``owner`` on ``tab`` for ``document`` and its frames' documents (a new tag when one of
        them changed), seen current after the tab's ``navigations``, and whether they are the same as the last
        snapshot's."""
        issued = self._issued.get((tab, owner))
        if issued is not None and (issued.document, issued.frames) == (document, frames):
            issued.navigations = navigations
            return issued, True
        counter = self._counters.setdefault(tab, itertools.count(1))
        issued = self._issued[(tab, owner)] = Issued(document, f"t{tab}d{next(counter)}", frames, navigations)
        return issued, False

    def current(self, tab: int, owner: Owner) -> Issued | None:
        return self._issued.get((tab, owner))

    def forget(self, tab: int) -> None:
        """A tab closed: its refs go."""
        for key in [key for key in self._issued if key[0] == tab]:
            del self._issued[key]
        self._counters.pop(tab, None)
