"""``snapshot`` and refs: the tab's accessibility tree (Playwright's ai mode) and the refs it gives, bound to
the document, the tab and the session that took it.

The :class:`~driver.refs.RefBook` keeps the refs each session holds on each tab, tagged with the document
they belong to (``t3d2``). A command that names a ref is resolved here before
anything is sent: a ref of another tag (an earlier document, another tab, another session) or of a
document that is gone answers ``stale_ref`` with nothing sent. Playwright's ``aria-ref=`` locator resolves
only against the last snapshot of that document's frame, so after a navigation it finds nothing until a
snapshot of the new document, which makes a new tag first: a ref is never resolved in another document.
"""

from __future__ import annotations

import gc
import re
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, cast

from playwright.async_api import Error as PlaywrightError
from playwright.async_api import Locator, Page

from driver.errors import Stop
from driver.page_js import HEADINGS
from driver.refs import Issued
from driver.run import Result, Run
from driver.snapshot_text import Line, cut, plain
from driver.snapshot_tree import Kept, diff, interactive, parse, render
from messages.commands import Snapshot

__all__ = ["DOCUMENT", "describe", "resolve_ref", "snapshot", "take"]

DOCUMENT = ("() => globalThis[Symbol.for('kitsune.siteTools')]?.doc ?? (globalThis[Symbol.for('kitsune.doc')] ??="
            " Math.random().toString(36).slice(2) + Date.now().toString(36))")
"""The main frame's document identity: the site tools' per-document nonce (or one of its own where the init
script did not run)."""
_STATE = (f"() => [({DOCUMENT})(),"
          " [...document.querySelectorAll('input[type=password]')].slice(0, 200).map((e) => e.value)]")
"""A frame's document and the values of its password fields (never shown), in one round trip."""
_NOT_IN_OUTLINE = re.compile(r" \[(?:ref|active)[^\]]*\]")
_TYPED = re.compile(r"^ *- textbox\b[^\n]*: ", re.MULTILINE)
"""A textbox with a value in Playwright's text: its value may be a password field's, which must be read to hide."""
_MAX_FRAMES = 50
"""Frames whose documents and password fields are read (the snapshot includes every frame Playwright reaches)."""


def _stale(ref: str, why: str, tab: int) -> Stop:
    return Stop("stale_ref", f"ref {ref} {why}; take a new snapshot; nothing was sent", retryable=True,
                took_effect=False, state={"ref": ref, "tabId": tab})


async def resolve_ref(run: Run, ref: str) -> str:
    """The Playwright selector of ``ref`` in the run's tab: ``stale_ref`` (nothing sent) unless it is a ref
    this session got from the current document of this tab and its element is still there."""
    book = run.refs
    issued = book.current(run.tab, run.owner) if book is not None else None
    if issued is None or not ref.startswith(issued.tag) or ref[len(issued.tag):][:1] not in ("e", "f"):
        why = "is not one of this tab's refs for this session" if issued is None or not ref.startswith(
            f"t{run.tab}d") else "belongs to an earlier snapshot's document"
        raise _stale(ref, why, run.tab)
    if (run.tabs.navigations(run.tab) != issued.navigations  # else the same document, no round trip to ask
            and await run.within(run.page.main_frame.evaluate(DOCUMENT)) != issued.document):
        raise _stale(ref, "belongs to a document this tab has left", run.tab)
    if "f" in ref[len(issued.tag):] and (await run.within(_state(run.page)))[1] != issued.frames:
        raise _stale(ref, "belongs to a frame whose document changed", run.tab)
    selector = f"aria-ref={ref[len(issued.tag):]}"
    locator = run.page.locator(selector)
    if await run.within(locator.count()) == 0:  # another snapshot (a subtree's) may have replaced the last one
        await run.within(run.page.aria_snapshot(mode="ai", timeout=run.ms()))
        if await run.within(locator.count()) == 0:
            raise _stale(ref, "names an element that is no longer in the page", run.tab)
    return selector


async def _state(page: Page) -> tuple[str, tuple[str, ...], list[str]]:
    """The main frame's document, the documents of the other frames, and the values of the frames' password
    fields (never shown); unbounded: the caller bounds it."""
    document, secrets = await page.main_frame.evaluate(_STATE)
    frames = []
    for frame in page.frames[1:_MAX_FRAMES]:
        try:
            found, values = await frame.evaluate(_STATE)
        except PlaywrightError:
            found, values = "", []
        frames.append(str(found))
        secrets.extend(values)
    return str(document), tuple(frames), secrets


async def describe(page: Page, lines: int = 40) -> dict[str, list[str]]:
    """A page as a task's checkpoint describes it: its headings, and its outline: the interactive snapshot's
    first ``lines`` lines, without refs (a ref is no one else's). Unbounded in time: the caller bounds it."""
    found = await page.evaluate(HEADINGS)
    raw = await page.aria_snapshot(mode="ai")
    _, _, secrets = await _state(page)
    outline = [_NOT_IN_OUTLINE.sub("", line.text) for line in interactive(parse(raw, "", secrets))]
    return {"headings": [str(text) for text in found] if isinstance(found, list) else [], "outline": outline[:lines]}


async def take(run: Run, command: Snapshot) -> tuple[str, list[str], Issued, bool]:
    """The snapshot's text as Playwright gives it, the values it must hide (password fields'), its refs' record,
    and whether its document is the one of this session's last snapshot of the tab."""
    navigations = run.tabs.navigations(run.tab)
    target: Locator | None = None
    if command.ref is not None:
        target = run.page.locator(await resolve_ref(run, str(command.ref)))
    elif run.selector is not None:
        target = run.locator().first
    options: dict[str, Any] = {"mode": "ai", "timeout": run.ms(), "boxes": command.boxes is True}
    if command.depth is not None:
        options["depth"] = command.depth
    raw = await (target.aria_snapshot(**options) if target is not None else run.page.aria_snapshot(**options))
    assert run.refs is not None
    known = run.refs.current(run.tab, run.owner)
    state: tuple[str, tuple[str, ...], list[str]]
    if (known is not None and known.navigations == navigations == run.tabs.navigations(run.tab)
            and len(run.page.frames) == 1 and ("- textbox" not in raw or _TYPED.search(raw) is None)):
        state = (known.document, (), [])  # its document still, no frame, no value to hide: no round trip
    else:
        state = await run.within(_state(run.page))
    document, frames, secrets = state
    if run.tabs.navigations(run.tab) != navigations:  # what was read may be of the document before
        raise Stop("navigated", "snapshot: the page navigated while it was read; take it again", retryable=True)
    issued, same = run.refs.issue(run.tab, run.owner, document, frames, navigations)
    return raw, secrets, issued, same


def _elements(lines: list[Line]) -> list[dict[str, Any]]:
    return [{"ref": line.ref, "role": line.role, **({"name": line.name} if line.name else {})}
            for line in lines if line.ref is not None]


@contextmanager
def _collector_paused() -> Iterator[None]:
    """No garbage collection while a snapshot is read and written: it makes (and drops) an object per element,
    none in a cycle, and the collector would walk them again and again, and keep them (see ``Kept``)."""
    if not gc.isenabled():
        yield
        return
    gc.disable()
    try:
        yield
    finally:
        gc.enable()


async def snapshot(run: Run) -> Result:
    command = cast(Snapshot, run.command)
    raw, secrets, issued, same = await take(run, command)
    head: dict[str, Any] = {"url": run.page.url, "document": issued.tag}
    with _collector_paused():
        return _answer(command, head, (raw, secrets), issued, same), None


def _answer(command: Snapshot, head: dict[str, Any], read: tuple[str, list[str]], issued: Issued,
            same: bool) -> dict[str, Any]:
    """The snapshot (or its diff) of Playwright's text and secrets ``read``; kept for the next diff."""
    raw, secrets = read
    tree = parse(raw, issued.tag, secrets)
    previous, issued.last = issued.last, Kept(raw, issued.tag, tree, secrets)
    if command.since == "last":
        before = previous.tree() if same and previous is not None else []
        if before:
            changes = diff(before, tree, only_interactive=command.interactive is True)
            text = "\n".join(changes) if changes else "(no change)"
            bounded = cut(plain(text), 0, command.max_chars)
            return {**head, "diff": bounded.text, "changes": len(changes),
                    **_rest(bounded.next_offset, len(changes), "diff")}
        head["documentChanged"] = True  # no earlier snapshot of this document: the whole snapshot
    shown = interactive(tree) if command.interactive is True else render(tree)
    bounded = cut(shown, command.offset, command.max_chars)
    text = bounded.text
    if bounded.next_offset is not None:
        text += (f"\n# cut at line {bounded.next_offset} of {len(shown)}: snapshot with offset={bounded.next_offset} "
                 "for the rest, or narrow it (selector, ref, interactive, depth)")
    return {**head, "snapshot": text, "elements": _elements(shown[command.offset:command.offset + bounded.shown]),
            **_rest(bounded.next_offset, len(shown), "snapshot")}


def _rest(next_offset: int | None, total: int, what: str) -> dict[str, Any]:
    if next_offset is None:
        return {"truncated": False}
    return {"truncated": True, "nextOffset": next_offset, "lines": total}
