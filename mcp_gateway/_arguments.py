"""What a refused argument says: the key, and the one the tool takes instead when there is a close one.

Models carry habits from other browser tools (Playwright MCP's ``browser_tabs`` takes ``action``,
chrome-devtools-mcp names a tab ``pageIdx``): a refusal that names the key and the right one lets
the next call succeed without reading the schema again.
"""

from __future__ import annotations

import difflib
from collections.abc import Collection

__all__ = ["unknown_parameter"]

PEERS: dict[str, tuple[str, ...]] = {
    "action": ("op",),
    "operation": ("op",),
    "command": ("op",),
    "index": ("tabId",),
    "tab": ("tabId",),
    "tab_id": ("tabId",),
    "tabIndex": ("tabId",),
    "pageId": ("tabId",),
    "pageIdx": ("tabId",),
    "page": ("tabId",),
    "element": ("selector", "ref"),
    "locator": ("selector", "ref"),
    "css": ("selector",),
    "xpath": ("selector",),
    "uid": ("ref", "selector"),
    "value": ("text", "values"),
    "option": ("values",),
    "options": ("values",),
    "keys": ("key",),
    "full_page": ("fullPage",),
    "wait_until": ("waitUntil",),
    "max_chars": ("maxChars",),
    "submitForm": ("submit",),
    "time": ("timeout", "wait"),
    "task_id": ("taskId",),
    "id": ("taskId", "tabId", "call"),
    "token": ("confirm_token", "resume_token"),
    "confirmToken": ("confirm_token",),
    "resumeToken": ("resume_token",),
    "callId": ("call",),
}
"""Names other browser tools give a parameter, and Kitsune's names for it (the first a tool takes wins)."""


def unknown_parameter(tool: str, key: str, known: Collection[str]) -> str:
    """``unknown parameter 'action'; browser_tabs takes 'op'`` (or the parameters it takes, when none is close)."""
    suggestion = next((name for name in PEERS.get(key, ()) if name in known), None)
    if suggestion is None:
        close = difflib.get_close_matches(key, list(known), n=1, cutoff=0.6)
        lowered = {name.lower().replace("_", ""): name for name in known}
        suggestion = lowered.get(key.lower().replace("_", "").replace("-", "")) or (close[0] if close else None)
    if suggestion is not None:
        return f"unknown parameter {key!r}; {tool} takes {suggestion!r}"
    return f"unknown parameter {key!r}; {tool} takes {', '.join(repr(n) for n in sorted(known)) or 'none'}"
