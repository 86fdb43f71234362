"""What the API's routes read of a request: its JSON body, its agent and session (set by ``bridge.routes.gate``),
a confirm token, and the tabs it names (by id, or by stable handle), refused whole unless open."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request

from bridge.fleet.member import HANDLE
from bridge.services import TabService
from messages import strict_json
from messages.errors import KitsuneError, invalid_call

__all__ = ["agent_of", "confirm_token", "json_body", "not_open", "require_open", "session_of", "with_handles_resolved"]

_HOLDING = ("command", "commands", "steps", "sequences", "then", "else", "body", "catch")
"""The keys of a body or a command that hold commands (lists of them; a parallel's, lists of lists)."""


async def json_body(request: Request, limit: int) -> dict[str, Any]:
    """The request's JSON object, of at most ``limit`` bytes; ``invalid_content_type``, ``body_too_large`` or
    strict_json's errors."""
    media = request.headers.get("content-type", "").split(";")[0].strip().lower()
    if media != "application/json":
        raise KitsuneError("invalid_content_type", "Send the body as application/json",
                           state={"contentType": media or None})
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise KitsuneError("body_too_large", f"The body is over {limit} bytes", state={"limit": limit})
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > limit:
            raise KitsuneError("body_too_large", f"The body is over {limit} bytes", state={"limit": limit})
        chunks.append(chunk)
    body = strict_json.loads(b"".join(chunks))
    if not isinstance(body, dict):
        raise invalid_call("invalid_call", "", "the body must be a JSON object")
    return body


def with_handles_resolved(body: Any, tabs: TabService) -> Any:
    """``body`` with every ``tabId`` given as a stable handle (``target:<id>``), a broadcast's ``tabIds`` too,
    replaced by its tab's id, wherever a command names a tab; ``tab_closed`` for a handle of no open tab."""
    if isinstance(body, list):
        return [with_handles_resolved(item, tabs) for item in body]
    if not isinstance(body, dict):
        return body
    out = dict(body)
    if _is_handle(out.get("tabId")):
        out["tabId"] = tabs.resolve(out["tabId"])
    if isinstance(out.get("tabIds"), list):
        out["tabIds"] = [tabs.resolve(tab) if _is_handle(tab) else tab for tab in out["tabIds"]]
    for key in _HOLDING:
        if key in out:
            out[key] = with_handles_resolved(out[key], tabs)
    return out


def _is_handle(value: Any) -> bool:
    return isinstance(value, str) and value.startswith(HANDLE)


def agent_of(request: Request) -> str:
    """The agent the request's bearer token names."""
    agent: str = request.state.agent
    return agent


def session_of(request: Request) -> str | None:
    """The agent's session the request names (``X-Kitsune-Session``), if any."""
    session: str | None = getattr(request.state, "session", None)
    return session


def confirm_token(body: dict[str, Any]) -> str | None:
    """The body's ``confirm_token`` (the approval of a held write), if any."""
    token = body.get("confirm_token")
    if token is not None and not isinstance(token, str):
        raise invalid_call("invalid_parameter", "", "confirm_token must be a string", param="confirm_token")
    return token


async def require_open(tabs: TabService, tab: int, path: str) -> None:
    """Raise unless ``tab`` is open (:func:`not_open`)."""
    if tab not in await tabs.open_ids(frozenset({tab})):
        raise not_open(tabs, tab, path)


def not_open(tabs: TabService, tab: int, path: str) -> KitsuneError:
    """Why a request naming a tab that is not open is refused whole: ``session_expired`` when its
    session's end closed it, else ``unknown_tab``."""
    closed = tabs.closed_error(tab)  # its session ended, or its node left the fleet
    if closed is not None:
        return KitsuneError(closed.code, closed.message, state={"path": path, "tabId": tab, **(closed.state or {})})
    where = f"command {path}: no" if path else "No"
    return KitsuneError("unknown_tab", f"{where} open tab {tab}", state={"path": path, "tabId": tab})
