"""The gateway's side of the bridge's HTTP API: one agent's requests, each with its own timeout.

Over loopback (``kitsune mcp --bridge URL``, or the embedded bridge) or in-process through the
ASGI app itself (``/mcp`` on ``kitsune serve``): either way a request passes the bridge's whole
middleware (bearer token, capability groups), so the gateway can do nothing its caller could not.
Transport failures come back as results, never exceptions: a request that may have reached the
bridge before it failed reports ``status: "unknown"``, one that cannot have reached it ``failed``.
"""

from __future__ import annotations

from typing import Any

import httpx

__all__ = ["Bridge"]


def _failure(message: str, code: str, *, sent: bool) -> dict[str, Any]:
    return {"error": message, "code": code, "retryable": not sent, "status": "unknown" if sent else "failed"}


class Bridge:
    """One agent's view of a bridge: its bearer token on every request."""

    def __init__(self, http: httpx.AsyncClient, token: str) -> None:
        self._http = http
        self._headers = {"Authorization": f"Bearer {token}"}

    async def get(self, path: str, *, timeout: float, params: dict[str, Any] | None = None) -> dict[str, Any]:
        return await self._request("GET", path, None, timeout, params)

    async def post(self, path: str, body: dict[str, Any], *, timeout: float) -> dict[str, Any]:
        return await self._request("POST", path, body, timeout, None)

    async def _request(self, method: str, path: str, body: dict[str, Any] | None, timeout: float,
                       params: dict[str, Any] | None) -> dict[str, Any]:
        try:
            response = await self._http.request(method, path, json=body, params=params, headers=self._headers,
                                                timeout=timeout)
        except (httpx.ConnectError, httpx.ConnectTimeout) as e:
            return _failure(f"The bridge cannot be reached ({type(e).__name__}); nothing was sent",
                            "bridge_unavailable", sent=False)
        except httpx.TimeoutException:
            return _failure(f"The bridge did not answer within {timeout:g}s; the request may have taken effect",
                            "bridge_timeout", sent=method == "POST")
        except httpx.HTTPError as e:
            return _failure(f"The bridge connection failed ({type(e).__name__}); the request may have taken effect",
                            "bridge_unavailable", sent=method == "POST")
        try:
            answer = response.json()
        except ValueError:
            answer = None
        if not isinstance(answer, dict):
            return _failure(f"The bridge answered HTTP {response.status_code} without a JSON object",
                            "bridge_error", sent=method == "POST" and response.status_code >= 500)
        return answer
