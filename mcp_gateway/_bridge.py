"""The gateway's side of the bridge's HTTP API: one agent's requests, each with its own timeout.

Over loopback (``kitsune mcp --bridge URL``, or the embedded bridge) or in-process through the
ASGI app itself (``/mcp`` on ``kitsune serve``, its answers streamed: ``_inprocess``): either way
the same code reads a call's progress lines as they come, and a request passes the bridge's whole
middleware (bearer token, capability groups), so the gateway can do nothing its caller could not.
Transport failures come back as results, never exceptions: a request that may have reached the
bridge before it failed reports ``status: "unknown"``, one that cannot have reached it ``failed``.
"""

from __future__ import annotations

import importlib.util
import sys
from collections.abc import Awaitable, Callable
from contextlib import suppress
from typing import Any

import httpx
import orjson

from mcp_gateway._embedded import BridgeNotStarted

__all__ = ["NDJSON", "SESSION_HEADER", "Bridge", "BridgeNotStarted"]

SESSION_HEADER = "X-Kitsune-Session"
"""Names the MCP session a request is for: the owner of its tasks, the holder of its approvals."""

NDJSON = "application/x-ndjson"
"""What a container call's answer is asked as, to hear its steps as they finish."""

Progress = Callable[[dict[str, Any]], Awaitable[None]]
"""Told each progress line of a streamed call."""

if importlib.util.find_spec("sniffio") is None:
    # httpcore (each request) and httpx's ASGI transport (each in-process request) try ``import sniffio``,
    # which anyio no longer brings: a failed import searches sys.path every time (0.05-0.3 ms, twice a request).
    # None in sys.modules fails it at once, as it would fail anyway.
    sys.modules["sniffio"] = None  # type: ignore[assignment]


def _failure(message: str, code: str, *, sent: bool) -> dict[str, Any]:
    return {"error": message, "code": code, "retryable": not sent, "status": "unknown" if sent else "failed"}


def _answer(status: int, content: bytes, *, sent: bool) -> dict[str, Any]:
    try:
        answer = orjson.loads(content)
    except orjson.JSONDecodeError:
        answer = None
    if not isinstance(answer, dict):
        return _failure(f"The bridge answered HTTP {status} without a JSON object", "bridge_error",
                        sent=sent and status >= 500)
    return answer


class Bridge:
    """One agent's view of a bridge: its bearer token on every request, and its MCP session's id.

    ``started``, when given, is awaited before every request (an embedded bridge that may still be
    starting); when it raises :class:`BridgeNotStarted`, the request answers ``bridge_unavailable``.
    ``base``, when given, is the URL requests name (``http://host:port``) instead of the client's own:
    the bridge builds the links it answers (Live View) from it. ``session``, when given, rides every
    request (``X-Kitsune-Session``): a task's lease and a confirm token follow the MCP session.
    """

    def __init__(self, http: httpx.AsyncClient, token: str, *,
                 started: Callable[[], Awaitable[None]] | None = None, base: str = "", session: str = "") -> None:
        self._http = http
        self._headers = {"Authorization": f"Bearer {token}"}
        if session:
            self._headers[SESSION_HEADER] = session
        self._started = started
        self._base = base.rstrip("/")

    async def get(self, path: str, *, timeout: float, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._request("GET", path, timeout, sent=False, params=params)

    async def post(self, path: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        return await self._request("POST", path, timeout, sent=True, json=body)

    async def delete(self, path: str, *, timeout: float) -> dict[str, Any]:
        return await self._request("DELETE", path, timeout, sent=True)

    async def _request(self, method: str, path: str, timeout: float, *, sent: bool, **options: Any) -> dict[str, Any]:
        """One request and its answer (``sent``: whether it may act)."""
        async def send() -> dict[str, Any]:
            response = await self._http.request(method, self._base + path, headers=self._headers, timeout=timeout,
                                                **options)
            return _answer(response.status_code, response.content, sent=sent)
        return await self._guarded(send, timeout, sent=sent)

    async def stream(self, path: str, body: dict[str, Any], *, timeout: float,
                     on_progress: Progress) -> dict[str, Any]:
        """POST a container call and hear its progress lines as it runs; its answer (the last line).
        ``timeout`` bounds the wait for each line (a step may take it all)."""
        async def send() -> dict[str, Any]:
            headers = {**self._headers, "Accept": NDJSON}
            async with self._http.stream("POST", self._base + path, json=body, headers=headers,
                                         timeout=timeout) as response:
                if not response.headers.get("content-type", "").startswith(NDJSON):  # refused before it ran
                    return _answer(response.status_code, await response.aread(), sent=True)
                lines = response.aiter_lines()
                async for line in lines:
                    record = orjson.loads(line) if line.strip() else {}
                    if isinstance(record.get("result"), dict):
                        with suppress(httpx.HTTPError):  # read to the end, so the connection serves the next call
                            async for _ in lines:
                                pass
                        return dict(record["result"])
                    if isinstance(record.get("progress"), dict):
                        await on_progress(record["progress"])
            return _failure("The bridge's answer ended before the call did; the call may have taken effect",
                            "bridge_unavailable", sent=True)
        return await self._guarded(send, timeout, sent=True)

    async def _guarded(self, send: Callable[[], Awaitable[dict[str, Any]]], timeout: float, *,
                       sent: bool) -> dict[str, Any]:
        """``send()``'s answer, with the transport's failures as results (``sent``: whether it may act)."""
        try:
            if self._started is not None:
                await self._started()
            return await send()
        except BridgeNotStarted as e:
            return _failure(f"{e}; nothing was sent", "bridge_unavailable", sent=False)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            return _failure(f"The bridge cannot be reached ({type(e).__name__}); nothing was sent",
                            "bridge_unavailable", sent=False)
        except httpx.TimeoutException:
            return _failure(f"The bridge did not answer within {timeout:g}s; the request may have taken effect",
                            "bridge_timeout", sent=sent)
        except httpx.HTTPError as e:
            return _failure(f"The bridge connection failed ({type(e).__name__}); the request may have taken effect",
                            "bridge_unavailable", sent=sent)
        except ValueError:
            return _failure("The bridge's progress line was not JSON; the call may have taken effect",
                            "bridge_error", sent=True)
