"""The documents that declare site tools, and one call of a tool as the chain of its invocations.

A :class:`Chain` is one ``callSiteTool``: its first invocation runs in the document that declared
the tool; each continuation token it asks for lets another document of the same origin and tab
carry it on in an invocation of its own. The chain ends when every invocation settled and no token
is outstanding: its result is the output of the last invocation. It ends ``unknown`` when a
document is lost under an invocation that asked for no token, when a token expires, or when an
invocation throws. Everything here runs on the node's loop. A document's origin is its execution context's, as the
browser reports it (:mod:`~driver.site_tools.channel`), never the page's word.
"""

from __future__ import annotations

import asyncio
import ipaddress
import itertools
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from driver.errors import Stop
from driver.site_tools.continuations import Continuation
from driver.site_tools.declarations import DeclarationRate

__all__ = ["Chain", "Document", "Invocation", "bare_url", "new_invocation_id", "potentially_trustworthy"]

_invocation_ids = itertools.count(1)


def new_invocation_id() -> str:
    """A name for an invocation no other has (the page's script names its invocations by it)."""
    return f"i{next(_invocation_ids)}"


@dataclass(eq=False, slots=True)
class Document:
    """One document of one frame of a tab, from its first message (its hello)."""

    nonce: str
    """The document's own random name: a message that does not carry it comes from another document."""
    frame: str
    """Its frame's id (the browser's)."""
    tab: int
    origin: str
    """``scheme://host:port``, or ``null`` for an opaque origin."""
    url: str
    """Its URL without query or fragment."""
    main: bool
    """Whether it is the tab's top document."""
    context: int = 0
    """The execution context of its main world (the browser's id): only a message from it is the document's."""
    tools: dict[str, dict[str, Any]] = field(default_factory=dict)
    """The tools it declares, by name: ``{name, description, inputSchema}`` (and ``annotations``, ``invalid``)."""
    sizes: dict[str, int] = field(default_factory=dict)
    """The bytes of each of its tools' schemas, by name."""
    heard: int = 0
    """The number of the last declaration message of the document the node took (or refused)."""
    rate: DeclarationRate = field(default_factory=DeclarationRate)
    """Its declaration messages, within their rate."""
    gone: bool = False

    def described(self) -> dict[str, str]:
        return {"url": self.url, "frame": "main" if self.main else "iframe"}


@dataclass(eq=False, slots=True)
class Invocation:
    """One run of the tool's code (its ``execute``, or a ``resumeTool`` callback) in one document."""

    document: Document
    id: str = field(default_factory=new_invocation_id)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    answer: dict[str, Any] | None = None
    """What the page answered: ``{ok, value}`` or ``{ok: false, error}``; None if it was lost first."""
    tokens: int = 0
    """How many continuation tokens it asked for."""
    reserved: Continuation[Any] | None = None
    """The token issued with it, held by the page's script until the tool asks for one (then it is outstanding);
    dropped unasked when it settles."""


class Chain:
    """One call of a site tool, from its first invocation to its end."""

    def __init__(self, tool: str, document: Document, value: dict[str, Any], *, call: int | None,
                 path: str | None, agent: str | None, form: bool = False) -> None:
        self.tool = tool
        self.form = form
        """The tool is a declarative form's: the document its submission navigates to answers the call."""
        self.tab = document.tab
        self.origin = document.origin
        self.input = value
        self.call, self.path, self.agent = call, path, agent
        self.invocations: list[Invocation] = []
        self.outstanding: dict[Continuation[Chain], asyncio.TimerHandle] = {}
        """Tokens issued and not redeemed, with the timer of their expiry."""
        self.redeemed: list[Continuation[Chain]] = []
        self.result: asyncio.Future[tuple[dict[str, Any], str | None]] = asyncio.get_running_loop().create_future()

    @property
    def ended(self) -> bool:
        return self.result.done()

    def invoke(self, document: Document, id_: str | None = None) -> Invocation:
        """A new invocation in ``document`` (the first, or a redeemed continuation's; ``id_``: named ahead)."""
        invocation = Invocation(document) if id_ is None else Invocation(document, id_)
        self.invocations.append(invocation)
        return invocation

    def invocation(self, id_: object, document: Document) -> Invocation | None:
        """The chain's invocation ``id_`` if it runs in ``document``."""
        return next((i for i in self.invocations if i.id == id_ and i.document is document), None)

    def runs_in(self, document: Document) -> bool:
        """Whether one of its invocations runs in ``document`` and has not settled."""
        return any(i.document is document and not i.settled.is_set() for i in self.invocations)

    def documents(self) -> list[dict[str, str]]:
        """The documents it crossed, in order."""
        return [i.document.described() for i in self.invocations]

    async def earlier_settled(self, invocation: Invocation) -> None:
        """Wait until every invocation before ``invocation`` settled (a callback runs after them)."""
        for earlier in self.invocations[:self.invocations.index(invocation)]:
            await earlier.settled.wait()

    def settle(self, invocation: Invocation, answer: dict[str, Any] | None) -> None:
        invocation.answer = answer
        invocation.settled.set()

    def lost(self, document: Document) -> bool:
        """``document`` is gone: an invocation that asked for no token and had not settled is lost with it, unless
        it is a form's whose submission navigated; True then (the next document answers the call)."""
        navigated = False
        for invocation in self.invocations:
            if invocation.document is document and not invocation.settled.is_set():
                navigated = navigated or (self.form and invocation.tokens == 0)
                if invocation.tokens == 0 and not self.form:
                    self.fail(Stop("navigated", f"callSiteTool {self.tool}: the page navigated mid-execution, and "
                                   "no continuation token carried the call on",
                                   state={"tabId": self.tab, "tool": self.tool, "reason": "navigated_mid_execution"}))
                self.settle(invocation, None)  # its continuation (or the form's next document) carries the call on
        return navigated

    def advance(self) -> bool:
        """End the chain if it is done: an invocation threw, or all settled with no token outstanding."""
        if self.ended:
            return False
        thrown = next((i for i in self.invocations if i.answer is not None and not i.answer.get("ok")), None)
        if thrown is not None:
            assert thrown.answer is not None
            error = thrown.answer.get("error") or {}
            name = str(error.get("name", "Error"))[:64] if isinstance(error, dict) else "Error"
            message = str(error.get("message", ""))[:300] if isinstance(error, dict) else ""
            self.fail(Stop("site_tool_error", f"callSiteTool {self.tool}: the tool threw ({name}) in "
                           f"{thrown.document.url}", state={"tabId": self.tab, "tool": self.tool,
                                                            "toolError": message}))
            return True
        if self.outstanding or not all(i.settled.is_set() for i in self.invocations):
            return False
        last = next((i for i in reversed(self.invocations) if i.answer is not None and i.tokens == 0), None)
        if last is None:
            return False
        assert last.answer is not None
        self.answer(last.answer.get("value"))
        return True

    def answer(self, output: Any, *also: dict[str, str]) -> None:
        """End the chain with ``output``; ``also``: documents it crossed besides its invocations'."""
        if not self.ended:
            self.result.set_result(({"tool": self.tool, "output": output, "documents": [*self.documents(), *also]},
                                    None))

    def fail(self, stop: Stop) -> None:
        if not self.ended:
            self.result.set_exception(stop)
            self.result.exception()  # retrieved: a chain nobody awaits any more logs nothing


def potentially_trustworthy(origin: str) -> bool:
    """Whether a document of ``origin`` may declare tools: anything but plain ``http:`` off loopback (``localhost``,
    ``*.localhost`` and loopback addresses are potentially trustworthy, as browsers hold)."""
    if not origin.startswith("http://"):
        return True
    host = (urlsplit(origin).hostname or "").rstrip(".")
    if host == "localhost" or host.endswith(".localhost"):
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def bare_url(url: str) -> str:
    """``url`` without its query and fragment (where a page may carry a token)."""
    return urlsplit(url)._replace(query="", fragment="").geturl()
