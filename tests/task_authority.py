"""A reference task authority (docs/guides/tasks.md, "The authority's interface"): records in memory with
revisions, served by uvicorn on a loopback port, with switches to be slow, down, or to answer every
compare-and-set with a newer revision than the node's."""

from __future__ import annotations

import asyncio
import hmac
import threading
import time
from collections.abc import Awaitable, Callable
from typing import Any

import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response
from starlette.routing import Route

from actors.nats_server import free_port
from actors.task_authority import DEADLINE_HEADER

__all__ = ["ReferenceAuthority"]

Handler = Callable[[Request], Awaitable[Response]]


class ReferenceAuthority:
    """The authority: ``records`` (task id -> record and revision) and what each request carried."""

    def __init__(self, token: str) -> None:
        self.token = token
        self.records: dict[str, tuple[dict[str, Any], int]] = {}
        self.delay = 0.0
        """Seconds it waits before it handles a request (slow when past the node's timeout)."""
        self.stale = False
        """Answer every compare-and-set and heartbeat 409 with a newer revision (another writer, always first)."""
        self.credentials: list[str] = []
        """The ``Authorization`` header of every request."""
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.app = Starlette(routes=[
            Route("/tasks", self._guarded(self._create), methods=["POST"]),
            Route("/tasks/{id}", self._guarded(self._get), methods=["GET"]),
            Route("/tasks/{id}", self._guarded(self._replace), methods=["PUT"]),
            Route("/tasks/{id}/heartbeat", self._guarded(self._heartbeat), methods=["POST"])])

    # life cycle: up, down, up again on the same port

    def start(self) -> None:
        self._server = uvicorn.Server(uvicorn.Config(self.app, host="127.0.0.1", port=self.port, log_config=None,
                                                     lifespan="off"))
        self._thread = threading.Thread(target=self._server.run, name="task-authority", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            assert time.monotonic() < deadline, "the reference authority did not start"
            time.sleep(0.02)

    def stop(self) -> None:
        assert self._server is not None and self._thread is not None
        self._server.should_exit = True
        self._thread.join(timeout=10)
        self._server = self._thread = None

    def record(self, task_id: str) -> tuple[dict[str, Any], int] | None:
        return self.records.get(task_id)

    # the interface

    def _guarded(self, handler: Handler) -> Handler:
        """``handler`` behind the credential, the delay, and the request's deadline (never applied past it)."""
        async def guarded(request: Request) -> Response:
            given = request.headers.get("authorization", "")
            self.credentials.append(given)
            if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
                return JSONResponse({"error": "unauthorized"}, 401)
            await asyncio.sleep(self.delay)
            if time.time() > float(request.headers.get(DEADLINE_HEADER, "inf")):
                return JSONResponse({"error": "deadline passed: nothing applied"}, 504)
            return await handler(request)
        return guarded

    async def _create(self, request: Request) -> Response:
        task = (await request.json())["task"]
        if task["id"] in self.records:
            return JSONResponse({"error": "exists"}, 409)
        self.records[task["id"]] = (task, 1)
        return JSONResponse({"revision": 1}, 201)

    async def _get(self, request: Request) -> Response:
        found = self.records.get(request.path_params["id"])
        if found is None:
            return JSONResponse({"error": "not found"}, 404)
        return JSONResponse({"task": found[0], "revision": found[1]})

    async def _replace(self, request: Request) -> Response:
        body = await request.json()
        return self._compare_and_set(request.path_params["id"], body["revision"], lambda task: body["task"])

    async def _heartbeat(self, request: Request) -> Response:
        body = await request.json()
        return self._compare_and_set(request.path_params["id"], body["revision"], lambda task: {
            **task, "lease_expires": body["lease_expires"], "updated": body["updated"]})

    def _compare_and_set(self, task_id: str, revision: int, change: Callable[[dict[str, Any]], dict[str, Any]]
                         ) -> Response:
        found = self.records.get(task_id)
        if found is None:
            return JSONResponse({"error": "not found"}, 404)
        if self.stale or revision != found[1]:
            return JSONResponse({"error": "stale revision", "revision": found[1] + int(self.stale)}, 409)
        self.records[task_id] = (change(found[0]), found[1] + 1)
        return JSONResponse({"revision": found[1] + 1})
