"""The one table of Chrome DevTools Protocol methods: which a ``cdp`` step may send, and as what.

Each method is a read, a write, a ``javascript`` write (it runs agent script in the page: sent only when the
agent's capability groups allow JavaScript) or refused whatever the policy (it would step outside the tab's
session or the node's boundary). The first rule that matches wins; a method no rule names is a write. A read
is sent again on resume and allowed in read-only mode; a write is held by ask-before-act, refused in read-only
mode and never sent twice. The parser refuses a refused method before anything runs; the policy refuses a
``javascript`` one for an agent without JavaScript; ``cdpSpec`` shows each command's class.

``cdpEvents`` collects the events of a few domains only (:data:`EVENT_DOMAINS`).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Literal

__all__ = ["CDP_DOMAIN", "CDP_METHOD", "DEVTOOLS_REFUSED", "EVENT_DOMAINS", "METHODS", "METRIC_DOMAINS", "CdpClass",
           "EventDomain", "EventSource", "MethodRule", "devtools_refusal", "domain_label", "method_class",
           "refused_pattern", "rule_of"]

CDP_METHOD = r"[A-Z][A-Za-z0-9]{0,63}\.[a-z][A-Za-z0-9]{0,127}"
"""A method's name as the protocol spells it: ``Domain.method``."""
CDP_DOMAIN = r"[A-Z][A-Za-z0-9]{0,63}"

CdpClass = Literal["read", "write", "javascript", "refused"]


@dataclass(frozen=True, slots=True)
class MethodRule:
    """Methods matching one of ``patterns`` (globs over ``Domain.method``) are of class ``kind``."""

    patterns: tuple[str, ...]
    kind: CdpClass
    why: str = ""
    """Why a refused or ``javascript`` method is what it is: the refusal's message says it."""


def _rule(kind: CdpClass, why: str, *patterns: str) -> MethodRule:
    return MethodRule(patterns, kind, why)


_OUTSIDE = "acts outside the tab (other targets, the whole browser or the node)"
_STORAGE = "names any origin's storage (the storage and cookies actions reach the page's own)"
_REQUESTS = "intercepts, rewrites or makes requests outside the page (the node's proxy is the URL boundary)"

METHODS: tuple[MethodRule, ...] = (
    _rule("refused", _OUTSIDE, "Target.*", "Browser.*", "SystemInfo.*", "Tracing.*", "Tethering.*", "IO.*",
          "Extensions.*", "PWA.*", "Cast.*", "Page.crash", "Memory.forciblyPurgeJavaScriptMemory",
          "Memory.setPressureNotificationsSuppressed", "Memory.simulatePressureNotification"),
    _rule("refused", _STORAGE, "Storage.*", "IndexedDB.*", "CacheStorage.*", "DOMStorage.*", "FileSystem.*"),
    _rule("refused", _REQUESTS, "Fetch.*", "Network.*Intercept*", "Network.setExtraHTTPHeaders",
          "Network.loadNetworkResource"),
    _rule("refused", "downloads go to the session's folder, as the download action saves them",
          "Page.setDownloadBehavior"),
    _rule("refused", "turns the browser's certificate checks off", "Security.*Certificate*"),
    _rule("refused", "service workers are blocked on the node", "ServiceWorker.*"),
    _rule("javascript", "runs script in the page", "Runtime.evaluate", "Runtime.callFunctionOn",
          "Runtime.compileScript", "Runtime.runScript", "Debugger.*", "Page.addScriptToEvaluateOn*",
          "Page.setDocumentContent", "DOM.setOuterHTML", "DOM.setAttributeValue", "DOM.setAttributesAsText"),
    _rule("read", "", "DOM.get*", "DOM.querySelector*", "DOM.describeNode", "DOM.resolveNode", "DOM.requestNode",
          "DOM.requestChildNodes", "DOM.pushNode*", "DOM.performSearch", "DOM.collectClassNamesFromSubtree",
          "DOMSnapshot.*", "DOMDebugger.getEventListeners", "Page.captureScreenshot", "Page.captureSnapshot",
          "Page.printToPDF", "Page.get*", "Page.searchInResource", "Network.getResponseBody",
          "Network.getRequestPostData", "Network.getCertificate", "Network.searchInResponseBody",
          "Network.getSecurityIsolationStatus", "Network.can*", "Runtime.getProperties", "Runtime.getHeapUsage",
          "Runtime.getIsolateId", "Runtime.getExceptionDetails", "Runtime.globalLexicalScopeNames",
          "Accessibility.get*", "Accessibility.queryAXTree", "CSS.get*", "CSS.collectClassNames",
          "Performance.getMetrics", "Memory.getDOMCounters*", "Animation.get*", "Emulation.canEmulate",
          "Schema.getDomains", "Audits.getEncodedResponse",
          *(f"{domain}.{switch}" for domain in ("Accessibility", "Animation", "Audits", "CSS", "DOM", "Inspector",
                                                 "LayerTree", "Log", "Media", "Network", "Overlay", "Page",
                                                 "Performance", "Runtime", "Security")
            for switch in ("enable", "disable"))),
)
"""The table, first match first; every method no rule names is a write (``Network.getCookies`` too: reading
cookies is a write, as the ``cookies`` action is)."""


def rule_of(method: str) -> MethodRule | None:
    """The first rule naming ``method``, or None (a write)."""
    return next((rule for rule in METHODS if any(fnmatch.fnmatchcase(method, p) for p in rule.patterns)), None)


def method_class(method: str) -> CdpClass:
    """What sending ``method`` is: a read, a write, a ``javascript`` write, or refused."""
    rule = rule_of(method)
    return "write" if rule is None else rule.kind


def refused_pattern() -> str:
    """A regular expression (JSON Schema's dialect too) matching exactly the refused methods' names."""
    globs = [p for rule in METHODS if rule.kind == "refused" for p in rule.patterns]
    return "^(?:" + "|".join(re.escape(g).replace(r"\*", "[A-Za-z0-9]*") for g in globs) + ")$"


METRIC_DOMAINS = frozenset({"Accessibility", "Animation", "Audits", "CSS", "DOM", "DOMDebugger", "DOMSnapshot",
                            "Debugger", "Emulation", "HeapProfiler", "Input", "Log", "Memory", "Network", "Overlay",
                            "Page", "Performance", "Profiler", "Runtime", "Schema", "Security"})
"""The domains a metric label names; any other is ``other``."""


def domain_label(method: str) -> str:
    """``method``'s domain as a metric label: one of :data:`METRIC_DOMAINS`, else ``other``."""
    domain = method.partition(".")[0]
    return domain if domain in METRIC_DOMAINS else "other"


EventDomain = Literal["Network", "Log", "Runtime", "Page", "Performance"]


@dataclass(frozen=True, slots=True)
class EventSource:
    """What ``cdpEvents`` sends to collect one domain's events, and which of its events it keeps."""

    enable: tuple[tuple[str, Mapping[str, Any]], ...]
    events: tuple[str, ...]


EVENT_DOMAINS: Mapping[EventDomain, EventSource] = {
    "Network": EventSource((("Network.enable", {}),), (
        "Network.requestWillBeSent", "Network.responseReceived", "Network.loadingFinished", "Network.loadingFailed",
        "Network.requestServedFromCache")),
    "Log": EventSource((("Log.enable", {}),), ("Log.entryAdded",)),
    "Runtime": EventSource((("Runtime.enable", {}),), ("Runtime.consoleAPICalled", "Runtime.exceptionThrown")),
    "Page": EventSource((("Page.enable", {}), ("Page.setLifecycleEventsEnabled", {"enabled": True})), (
        "Page.frameStartedLoading", "Page.frameNavigated", "Page.navigatedWithinDocument",
        "Page.domContentEventFired", "Page.loadEventFired", "Page.lifecycleEvent", "Page.frameStoppedLoading")),
    "Performance": EventSource((("Performance.enable", {}),), ("Performance.metrics",)),
}
"""The domains whose events a tab may collect (Runtime: its console and exceptions; Page: its lifecycle)."""


DEVTOOLS_REFUSED: tuple[MethodRule, ...] = (
    _rule("refused", "acts on the whole browser's cache or the session's every cookie, not the tab",
          "Network.clearBrowserCache", "Network.clearBrowserCookies"),
    _rule("refused", "closes the tab: a person holds the tab, its agent owns it", "Page.close"),
)
"""What a person's DevTools (Live View ``mode=devtools``) may not send beyond the table's refused methods. It
holds the tab, so reads, writes and ``javascript`` methods go through; what would step outside the tab does not."""


def devtools_refusal(method: object) -> str | None:
    """Why a person's DevTools may not send ``method`` (the table's refused methods and :data:`DEVTOOLS_REFUSED`),
    or None when it may. A name that is not ``Domain.method`` is refused too."""
    if not isinstance(method, str) or re.fullmatch(CDP_METHOD, method) is None:
        return "is not a method of the protocol"
    for rule in (*DEVTOOLS_REFUSED, *METHODS):
        if rule.kind == "refused" and any(fnmatch.fnmatchcase(method, p) for p in rule.patterns):
            return rule.why
    return None
