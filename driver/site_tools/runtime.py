"""The node's side of site tools: the binding every document speaks through, the tools each tab's
documents declare, and the chains of the tools it calls.

Each browser context gets ``navigator.modelContext`` as an init script, and each of its pages a channel
(:mod:`~driver.site_tools.channel`): a CDP binding whose every call the browser attributes to the execution
context, and so the frame, that made it. A message must also carry the nonce of that frame's current document,
and come from its context, so a document that is gone (or one that forges another's name) speaks for nobody. A
document's origin is its context's as the browser reports it, never the page's word. The continuation rules
(once, same origin, same tab, within the lifetime, revoked when the call ends another way) are enforced here and
in :mod:`~driver.site_tools.continuations`, for a redemption asked of the node and for one a top document made
from its armed hand-off (:mod:`~driver.site_tools.armed`). A token also ends with its authority:
:meth:`SiteTools.revoke` ends the chains of calls whose task was revoked or taken over, and a redemption in a
document whose URL the agent's URL lists now refuse revokes its chain's tokens and ends the call ``url_denied``.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable, Collection
from dataclasses import dataclass
from typing import Any

from playwright.async_api import BrowserContext, Page
from playwright.async_api import Error as PlaywrightError

from core.url_policy import UrlPolicy
from driver.errors import Stop
from driver.page_js import MODEL_CONTEXT
from driver.site_tools.chains import Chain, Document, Invocation, bare_url, potentially_trustworthy
from driver.site_tools.channel import BINDING, Channel, NotTaken
from driver.site_tools.continuations import Refusal
from driver.site_tools.declarations import (
    MAX_FRAME_SCHEMA_BYTES,
    MAX_FRAME_TOOLS,
    MAX_TAB_DOCUMENTS,
    DeclarationRate,
    Refused,
    Room,
    declared,
    listed,
    rate_refused,
    tab_documents_refused,
)
from driver.site_tools.input_schema import InputChecker
from driver.site_tools.tokens import Ahead, ChainTokens
from messages.contract import CONTINUATION_TTL
from messages.events import (
    ContinuationRedeemed,
    SiteToolChainCompleted,
    SiteToolEvent,
)

__all__ = ["BINDING", "TOKEN_CHARS", "SiteToolHooks", "SiteTools"]

log = logging.getLogger(__name__)

_INVOKE = ("(doc, id, name, input, token) => "
           "!!globalThis[Symbol.for('kitsune.siteTools')]?.invoke(doc, id, name, input, token)")
_ABORT = "(doc, id) => globalThis[Symbol.for('kitsune.siteTools')]?.abort(doc, id)"
_DECLARED = "() => globalThis[Symbol.for('kitsune.siteTools')]?.declared() ?? null"
_RESPONSE = "() => globalThis[Symbol.for('kitsune.siteTools')]?.response() ?? null"
TOKEN_CHARS = 256
"""Characters a continuation token a page redeems may have (none has as many): a longer one is refused unread."""
_RESPONSE_MS = 300_000
"""Milliseconds at most a form's response document has to load (the call's own timeout ends it sooner)."""


@dataclass(slots=True)
class SiteToolHooks:
    """Who hears of site tools: the step log and audit (``event``), and the metrics."""

    event: Callable[[SiteToolEvent, str | None], None] = lambda event, agent: None
    """Every event, with the agent whose call it belongs to."""
    continuation: Callable[[str], None] = lambda outcome: None
    """A token's end: ``redeemed``, ``expired``, ``revoked`` or ``refused``."""
    call_ended: Callable[[str], None] = lambda outcome: None
    """A ``callSiteTool``'s outcome: ``ok``, ``unknown`` or ``failed``."""


class SiteTools:
    """The site tools of every tab of one browser (owned by its driver; used on the loop only)."""

    def __init__(self, tab_of: Callable[[Page], int | None]) -> None:
        self.continuation_ttl = CONTINUATION_TTL
        """Seconds a continuation token may be redeemed after the tool asked for it."""
        self.hooks = SiteToolHooks()
        self.checker = InputChecker()
        """Checks a call's input against its tool's schema, off the loop."""
        self._tab_of = tab_of
        self._channels: dict[Page, asyncio.Future[Channel | None]] = {}
        """Each page's channel, as it opens (None: the page closed first)."""
        self._tabs: dict[int, dict[str, Document]] = {}
        """Each tab's documents the node tracks, by frame (at most :data:`MAX_TAB_DOCUMENTS` each)."""
        self._tab_channels: dict[int, Channel] = {}
        """The channel of each tab with a tracked document."""
        self._frame_rates: dict[int, DeclarationRate] = {}
        """The declarations of each tab's frames, within their rate (the top document's is its own)."""
        self._chains: set[Chain] = set()
        self._tokens = ChainTokens(lambda: self.continuation_ttl, self._emit,
                                   lambda outcome: self.hooks.continuation(outcome),  # noqa: PLW0108 (hooks change)
                                   self._install)
        self._changed = asyncio.Event()
        """Set (and replaced) whenever a document or a declaration changes."""
        self.url_policy: Callable[[str | None], UrlPolicy] | None = None
        """An agent's URL lists as they are now (None: no lists): a redemption's document must pass its chain's."""

    async def install(self, context: BrowserContext) -> None:
        """Give every document of ``context``, a context with no page yet, its ``navigator.modelContext``: the script
        in every document, and a channel to each page (its binding: a document loaded before it has none)."""
        await context.add_init_script(MODEL_CONTEXT)
        context.on("page", self._watch)

    def _watch(self, page: Page) -> None:
        self._channels[page] = opening = asyncio.ensure_future(self._open(page))
        opening.add_done_callback(lambda f: f.cancelled() or f.exception())
        page.on("close", self._closed)

    async def _open(self, page: Page) -> Channel | None:
        try:
            return await Channel.open(page, lambda *message: self._message(*message),  # noqa: PLW0108 (wrapped in tests)
                                      self._lost, self._change)
        except PlaywrightError:
            return None  # the page closed as it opened
        except Exception as e:  # a channel that does not open leaves its page without site tools, never the tab
            log.error("a page's site-tool channel did not open (%s)", type(e).__name__)
            return None

    async def attached(self, page: Page, seconds: float) -> None:
        """Wait (``seconds`` at most) until ``page``'s channel is open: each document it loads from then on has the
        binding (a tab is navigated only then)."""
        opening = self._channels.get(page)
        if opening is not None:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(asyncio.shield(opening), max(0.001, seconds))

    def _channel(self, page: Page) -> Channel | None:
        """The page's channel, once open (None: still opening, or it could not open)."""
        opening = self._channels.get(page)
        if opening is None or not opening.done() or opening.cancelled() or opening.exception() is not None:
            return None
        return opening.result()

    # -- what the tabs declare ---------------------------------------------------------------

    def held(self, tab: int) -> dict[str, int]:
        """What the node holds of a tab's documents: ``documents``, ``tools``, ``schema_bytes`` (a count, never a
        scan of the page)."""
        documents = self._tabs.get(tab, {}).values()
        return {"documents": len(documents), "tools": sum(len(d.tools) for d in documents),
                "schema_bytes": sum(sum(d.sizes.values()) for d in documents)}

    @property
    def tokens(self) -> int:
        """How many continuation tokens the node holds (issued and not yet dropped: a call's ended)."""
        return len(self._tokens)

    def documents(self, page: Page) -> list[Document]:
        """The tab's top document and the documents of its frames of the same origin, in frame order."""
        channel, tab = self._channel(page), self._tab_of(page)
        documents = self._tabs.get(tab, {}) if tab is not None else {}
        main = documents.get(channel.main) if channel is not None else None
        if main is None or channel is None:
            return []
        others = (documents.get(frame) for frame in channel.frame_ids() if frame != channel.main)
        return [main, *(d for d in others if d is not None and d.origin == main.origin != "null")]

    def listing(self, page: Page) -> dict[str, Any]:
        """What ``siteTools`` lists: ``tools``, and ``truncated`` when some did not fit."""
        return listed({**tool, "origin": document.origin, "frame": "main" if document.main else "iframe"}
                      for document in self.documents(page) for tool in document.tools.values())

    def names(self, page: Page) -> list[str]:
        """The names of the tools the tab declares, sorted."""
        return sorted(name for document in self.documents(page) for name in document.tools)

    def declaring(self, page: Page, name: str) -> tuple[Document, dict[str, Any]] | None:
        """The document that declares tool ``name`` (the top one first), and its declaration."""
        return next(((d, d.tools[name]) for d in self.documents(page) if name in d.tools), None)

    async def in_sync(self, page: Page, seconds: float) -> None:
        """Wait (``seconds`` at most) until the node has heard every declaration the page's documents made so far."""
        loop = asyncio.get_running_loop()
        end = loop.time() + seconds
        await self.attached(page, seconds)  # a popup's: its first document speaks once the channel is open
        channel, tab = self._channel(page), self._tab_of(page)
        if channel is None or tab is None:
            return  # no document of the page can speak to the node
        while not all(await asyncio.gather(*(self._in_sync(channel, tab, frame) for frame in channel.frame_ids()))):
            if loop.time() >= end:
                return
            await self.changed(end - loop.time())

    async def _in_sync(self, channel: Channel, tab: int, frame: str) -> bool:
        context = channel.context(frame)
        try:
            declared = None if context is None else await channel.call(context, _DECLARED)
        except PlaywrightError:
            return True  # a document that went says nothing more
        document = self._tabs.get(tab, {}).get(frame)
        return declared is None or (document is not None and [document.nonce, document.heard] == declared)

    async def changed(self, seconds: float) -> None:
        """Wait until a document or a declaration changes, or ``seconds`` pass."""
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._changed.wait(), max(0.0, seconds))

    def _change(self) -> None:
        self._changed.set()
        self._changed = asyncio.Event()

    # -- calls ---------------------------------------------------------------------------------

    def begin(self, tool: str, document: Document, value: dict[str, Any], *, call: int | None, path: str | None,
              agent: str | None, form: bool = False) -> tuple[Chain, Invocation]:
        """A new chain for a call of ``tool`` (``form``: a declarative form's) in ``document``, and its first
        invocation."""
        chain = Chain(tool, document, value, call=call, path=path, agent=agent, form=form)
        self._chains.add(chain)
        return chain, chain.invoke(document)

    async def start(self, chain: Chain, invocation: Invocation) -> bool:
        """Run the chain's tool in the invocation's document (with the token it may ask for, but a form's); False
        when that document no longer declares it."""
        document = invocation.document
        channel = self._tab_channels.get(document.tab)
        if document.gone or channel is None:
            return False
        token = None if chain.form else self._tokens.reserve(chain, invocation)  # the invoke's task after the arm's
        return bool(await asyncio.ensure_future(channel.call(document.context, _INVOKE, document.nonce, invocation.id,
                                                             chain.tool, chain.input, token)))

    def _install(self, chain: Chain, script: str) -> Callable[[], None] | None:
        """Add ``script`` to the documents of ``chain``'s tab (None: no document of the tab speaks to the node)."""
        return channel.add_script(script) if (channel := self._tab_channels.get(chain.tab)) is not None else None

    def end(self, chain: Chain, reason: str) -> None:
        """The chain's step is over (``reason`` says how, if it did not end by itself): revoke its tokens, stop
        what still runs of it."""
        self._chains.discard(chain)
        chain.fail(Stop(reason, f"callSiteTool {chain.tool}: the call ended ({reason})"))  # wakes what waits on it
        self._tokens.end(chain, reason)
        for invocation in chain.invocations:
            document = invocation.document
            if not invocation.settled.is_set() and not document.gone:
                self._tab_channels[document.tab].send(document.context, _ABORT, document.nonce, invocation.id)
        if chain.result.done() and chain.result.exception() is None:
            self._emit(chain, SiteToolChainCompleted, documents=len(chain.invocations))

    def revoke(self, calls: Collection[int], tabs: Collection[int], code: str, message: str) -> int:
        """End the chains of ``calls`` on ``tabs`` whose authority ended (their task revoked or taken over): their
        tokens revoked, the call's step ended ``code``; how many chains ended."""
        ended = [chain for chain in self._chains if chain.call in calls and chain.tab in tabs and not chain.ended]
        for chain in ended:
            self._tokens.revoke(chain, code)
            chain.fail(Stop(code, f"callSiteTool {chain.tool}: {message}", state={"tabId": chain.tab,
                                                                                  "tool": chain.tool}))
        return len(ended)

    def _denied(self, chain: Chain, document: Document) -> bool:
        """Whether the agent's URL lists now refuse ``document`` (its chain's tokens are revoked, the call ends)."""
        lists = self.url_policy(chain.agent) if self.url_policy is not None else None
        if lists is None or lists.check(document.url) is None:
            return False
        self._tokens.revoke(chain, "url_denied")
        chain.fail(Stop("url_denied", f"callSiteTool {chain.tool}: the URL lists now refuse the site its "
                        "continuation went to", state={"tabId": chain.tab, "tool": chain.tool}))
        return True

    # -- the binding -----------------------------------------------------------------------------

    async def _message(self, channel: Channel, frame: str, context: int, message: Any) -> Any:
        """One message of a document: its declarations, its continuation's start (``resume``), or its invocations'
        news. A document's first message says ``hello`` too: the node tracks the document from it (a refusal
        answers ``{"untracked": why}`` and takes nothing of the message)."""
        if not isinstance(message, dict):
            raise NotTaken
        tab, op, nonce = self._tab_of(channel.page), message.get("op"), message.get("doc")
        if tab is None or not isinstance(nonce, str):
            raise NotTaken
        channel.tab = tab
        if message.get("hello") is True and (untracked := self._hello(channel, frame, context, tab, nonce)):
            return {"untracked": untracked}
        document = self._tabs.get(tab, {}).get(frame)
        if document is None or document.nonce != nonce or document.context != context:
            raise NotTaken
        if op == "resume":
            return self._resume(document, message.get("token"), message.get("invocation"))
        found = self._invocation_of(document, message.get("invocation"))
        if op == "took" and found is not None and self._tokens.take(*found):
            return None
        if op == "requestToken" and found is not None and not found[1].settled.is_set():
            return self._tokens.issue(*found)
        if op == "settled" and found is not None:
            self._settled(*found, message)
            return None
        if op == "begin" and found is not None:
            return await self._begin(*found)
        if op in ("register", "unregister", "clear"):
            return self._declare(document, op, message)
        raise NotTaken

    def _hello(self, channel: Channel, frame: str, context: int, tab: int, nonce: str) -> str | None:
        """A new document in ``frame`` (its first message); a frame's document past :data:`MAX_TAB_DOCUMENTS` is
        refused by name (returned) and not tracked (its messages are refused), a detached frame's is not tracked."""
        if not channel.has(frame):
            raise NotTaken
        known, main = self._tabs.get(tab, {}).get(frame), frame == channel.main
        if not main and known is None and len(self._tabs.get(tab, ())) >= MAX_TAB_DOCUMENTS:
            return tab_documents_refused()
        origin = channel.origin(context)
        if not potentially_trustworthy(origin):
            raise NotTaken  # no secure context: its script offers no modelContext, and the node takes none
        if known is not None and (known.nonce == nonce or known.context == context):
            raise NotTaken  # a document says hello once: a second is not the page's script
        self._gone(self._untrack(tab, frame), channel)
        self._tabs.setdefault(tab, {})[frame] = Document(nonce, frame, tab, origin, bare_url(channel.url(frame)),
                                                         main, context)
        self._tab_channels[tab] = channel
        self._change()
        return None

    def _untrack(self, tab: int, frame: str) -> Document | None:
        documents = self._tabs.get(tab, {})
        document = documents.pop(frame, None)
        if document is not None and not documents:
            self._tabs.pop(tab, None)
            self._tab_channels.pop(tab, None)
            self._frame_rates.pop(tab, None)
        return document

    def _declare(self, document: Document, op: str, message: dict[str, Any]) -> dict[str, str] | None:
        """Take a declaration message; a refused one answers ``{"refused": why}`` (the page's promise rejects)."""
        if isinstance(seq := message.get("seq"), int):
            document.heard = max(document.heard, seq)
        tool = message.get("tool")
        rate = document.rate if document.main else self._frame_rates.setdefault(document.tab, DeclarationRate())
        if op == "register" and not rate.take(asyncio.get_running_loop().time(), _size(tool)):
            return {"refused": rate_refused(tool)}  # before any other work: a flood costs a refusal each
        try:
            if op == "clear":
                document.tools.clear()
                document.sizes.clear()
            elif op == "unregister":
                document.tools.pop(name := str(message.get("name")), None)
                document.sizes.pop(name, None)
            else:
                kept, size = declared(tool, document.tools, self._room(document, tool))
                document.tools[kept["name"]], document.sizes[kept["name"]] = kept, size
        except Refused as refused:
            return {"refused": str(refused)}
        finally:
            self._change()
        return None

    def _room(self, document: Document, tool: object) -> Room | None:
        """What the tab's frames leave to a declaration of ``document`` (None for the top document: its own limits
        are its own)."""
        if document.main:
            return None
        name = str(tool.get("name")) if isinstance(tool, dict) else ""
        frames = [d for d in self._tabs.get(document.tab, {}).values() if not d.main]
        tools = sum(len(d.tools) for d in frames) - (name in document.tools)
        schema_bytes = sum(sum(d.sizes.values()) for d in frames) - document.sizes.get(name, 0)
        return Room(MAX_FRAME_TOOLS - tools, MAX_FRAME_SCHEMA_BYTES - schema_bytes)

    def _invocation_of(self, document: Document, id_: object) -> tuple[Chain, Invocation] | None:
        for chain in self._chains:
            invocation = chain.invocation(id_, document)
            if invocation is not None and not chain.ended:
                return chain, invocation
        return None

    def _settled(self, chain: Chain, invocation: Invocation, message: dict[str, Any]) -> None:
        answer = {"ok": True, "value": message.get("value")} if message.get("ok") is True else \
            {"ok": False, "error": message.get("error")}
        self._tokens.release(invocation)
        chain.settle(invocation, answer)
        chain.advance()

    def _resume(self, document: Document, token: object, opened: object) -> dict[str, Any] | None:
        """A document's start as a continuation. From its armed hand-off (``opened``: the invocation the hand-off
        named), its callback runs already: the redemption is checked as the node's own, a refused one has the
        callback's signal aborted, and nothing is answered. Else in one round trip: its hello (when it is its first
        message), its redemption of ``token``, and its callback's ``input`` once the invocations before it settled
        (if they have not, the document asks for it with ``begin``, which waits for them)."""
        try:
            chain, invocation, ahead = self._redeem(document, token, opened)
        except NotTaken:
            if isinstance(opened, str) and len(opened) <= TOKEN_CHARS:  # the page's own, back to it
                self._tab_channels[document.tab].send(document.context, _ABORT, document.nonce, opened)
            raise
        answer = {"invocation": invocation.id, "token": self._tokens.reserve(chain, invocation, ahead)}
        if opened is not None:
            return None
        if all(i.settled.is_set() for i in chain.invocations if i is not invocation):
            return {**answer, "input": chain.input}
        return answer

    def _redeem(self, document: Document, token: object, armed: object) -> tuple[Chain, Invocation, Ahead | None]:
        """Redeem ``token`` for ``document`` (``armed``: the invocation its hand-off named, if it made it from there):
        the chain, the invocation it starts and, from a hand-off, what was made ahead for it."""
        found = self._tokens.redeem(token, document) \
            if isinstance(token, str) and len(token) <= TOKEN_CHARS and document.origin != "null" else Refusal.UNKNOWN
        from_hand_off = armed is not None
        if (isinstance(found, Refusal)
                or (from_hand_off and (not document.main or self._tokens.armed(found) != armed))
                or self._denied(found.chain, document)):
            self.hooks.continuation("refused")
            raise NotTaken
        ahead = self._tokens.redeemed(found, from_hand_off=from_hand_off)
        chain = found.chain
        invocation = chain.invoke(document, None if ahead is None else ahead.id)
        self._emit(chain, ContinuationRedeemed, origin=document.origin, frame="main" if document.main else "iframe")
        self.hooks.continuation("redeemed")
        return chain, invocation, ahead

    async def _begin(self, chain: Chain, invocation: Invocation) -> dict[str, Any]:
        """The input of a redeemed continuation's callback, once the invocations before it settled."""
        waiting: asyncio.Future[Any] = asyncio.ensure_future(chain.earlier_settled(invocation))
        ended: asyncio.Future[Any] = chain.result
        await asyncio.wait([waiting, ended], return_when=asyncio.FIRST_COMPLETED)
        if not waiting.done():
            waiting.cancel()
            raise NotTaken  # the call ended meanwhile
        return chain.input

    # -- documents that go ---------------------------------------------------------------------

    def _lost(self, channel: Channel, frame: str, context: int) -> None:
        """The document of ``context`` in ``frame`` is gone (the browser destroyed its context: it navigated away, or
        its frame went); a same-document navigation keeps it."""
        tab = self._tab_of(channel.page)
        document = self._tabs.get(tab, {}).get(frame) if tab is not None else None
        if document is not None and document.context == context:
            self._gone(self._untrack(document.tab, frame), channel)

    def _gone(self, document: Document | None, channel: Channel) -> None:
        if document is None or document.gone:
            return
        document.gone = True
        for chain in list(self._chains):
            if chain.lost(document):
                task = asyncio.get_running_loop().create_task(self._respond(chain, document, channel))
                task.add_done_callback(lambda t: t.cancelled() or t.exception())
            for invocation in chain.invocations:
                if invocation.document is document:
                    self._tokens.release(invocation)
            chain.advance()
        self._change()

    async def _respond(self, chain: Chain, gone: Document, channel: Channel) -> None:
        """Answer a form's call whose submission navigated the frame of ``gone``: with the first JSON-LD of the
        document it loaded, once loaded (None when it has none, or none that is JSON within the output's bound)."""
        loop = asyncio.get_running_loop()
        end = loop.time() + _RESPONSE_MS / 1000
        try:
            while (context := channel.context(gone.frame)) in (None, gone.context) and not chain.ended:
                if not channel.has(gone.frame) or loop.time() >= end:
                    raise PlaywrightError("the form's frame went")
                await self.changed(end - loop.time())
            if chain.ended:
                return
            assert context is not None
            answer = await asyncio.wait_for(channel.call(context, _RESPONSE, wait=True), end - loop.time())
        except (PlaywrightError, TimeoutError):
            chain.fail(Stop("navigated", f"callSiteTool {chain.tool}: the form was submitted, and the document it "
                            "navigated to was lost before it answered", state={"tabId": chain.tab, "tool": chain.tool,
                                                                                "reason": "navigated_mid_execution"}))
            return
        output = answer.get("value") if isinstance(answer, dict) and answer.get("ok") is True else None
        chain.answer(output, {"url": bare_url(channel.url(gone.frame)), "frame": "main" if gone.main else "iframe"})

    def _closed(self, page: Page) -> None:
        """The tab closed: its documents are gone, and its chains end ``tab_closed``."""
        channel = self._channel(page)
        self._channels.pop(page, None)
        tab = channel.tab if channel is not None and channel.tab is not None else self._tab_of(page)
        for document in list(self._tabs.get(tab, {}).values()) if tab is not None else ():
            self._untrack(document.tab, document.frame)
            document.gone = True
        for chain in self._chains:
            if chain.tab == tab:
                chain.fail(Stop("tab_closed", f"callSiteTool {chain.tool}: tab {chain.tab} closed while the tool ran",
                                state={"tabId": chain.tab}))
        self._change()

    def _emit(self, chain: Chain, kind: type[SiteToolEvent], **fields: Any) -> None:
        if chain.call is not None:
            event = kind(chain.call, chain.path, chain.tab, chain.tool, fields.pop("origin", chain.origin), **fields)
            self.hooks.event(event, chain.agent)


def _size(tool: object) -> int:
    """What a declaration counts in its rate: the characters of its schema and description."""
    if not isinstance(tool, dict):
        return 0
    return sum(len(text) for text in (tool.get("inputSchema"), tool.get("description")) if isinstance(text, str))

