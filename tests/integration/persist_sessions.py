"""What the persistent sessions' tests share: the key, opening a session, signing in, what the site saw."""

from __future__ import annotations

from typing import Any

import httpx

from tests.site import TestSite

KEY = "persist-key-for-tests-0123456789abcdef"
SIGN_IN = "GET /session/start"
"""The site's sign-in: it sets a session cookie of its own making (``TestSite.session_tokens``), a secret that
must reach no log, audit entry or stored blob in clear."""


def open_persistent(client: httpx.Client, url: str, name: str = "shop", persist: bool | None = True,
                    status: int = 200) -> dict[str, Any]:
    """``POST /api/tabs {"op": "open", "session": {"name", "persist"}}``: its answer."""
    session: dict[str, Any] = {"name": name, **({"persist": persist} if persist is not None else {})}
    answer = client.post("/api/tabs", json={"op": "open", "url": url, "session": session})
    assert answer.status_code == status, answer.text
    body: dict[str, Any] = answer.json()
    return body


def sign_in(client: httpx.Client, site: TestSite, name: str = "shop", persist: bool | None = True) -> dict[str, Any]:
    """Open a persistent session's tab at the site's sign-in; the open's answer, once the site says signed in."""
    opened = open_persistent(client, site.url("/session/start"), name, persist)
    assert opened["status"] == "ok" and opened["restored"] is False, opened
    assert seen_by_site(client, opened["tabId"]) == "signed in"
    return opened


def seen_by_site(client: httpx.Client, tab: int) -> str:
    """Whether the site saw tab ``tab``'s page's request carry a session cookie it gave: ``signed in`` or ``out``."""
    answer = client.post("/api/act", json={"command": {"action": "pageText", "tabId": tab, "selector": "#session"}})
    assert answer.status_code == 200, answer.text
    text: str = answer.json()["text"]
    return text


def secrets_absent(site: TestSite, *texts: str) -> bool:
    """Whether none of the session cookies the site gave is in any of ``texts``."""
    return bool(site.session_tokens) and not any(token in text for token in site.session_tokens for text in texts)


def close_tab(client: httpx.Client, tab: int) -> None:
    answer = client.post("/api/tabs", json={"op": "close", "tabId": tab})
    assert answer.status_code == 200 and answer.json()["status"] == "ok", answer.text
