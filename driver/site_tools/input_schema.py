"""A site tool's input checked against the input schema its page declared, before anything runs, off the loop.

The check runs in a process of the node's own (:mod:`~driver.site_tools.schema_check`), one request at
a time, within :data:`CHECK_SECONDS`: a check that takes longer (a page's ``pattern`` that backtracks on this
input) is killed with its process, which the next check starts again. The node's loop only writes the request
and waits: nothing a page declares runs on it. The failure names the JSON pointer of the bad value and the rule
it breaks, never the value itself.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from typing import Any

import orjson

from driver.site_tools.frames import FRAME
from messages.errors import KitsuneError

__all__ = ["CHECK_SECONDS", "InputChecker"]

CHECK_SECONDS = 2.0
"""Seconds at most for checking one input against its tool's schema (the checker's start not counted)."""
_START_SECONDS = 15.0
"""Seconds at most for the checker process to start and answer its first request."""
_WORKER = [sys.executable, "-m", "driver.site_tools.schema_check"]


class InputChecker:
    """The node's checker process, started at the first check (used on the loop only)."""

    def __init__(self, seconds: float = CHECK_SECONDS) -> None:
        self.seconds = seconds
        self._process: asyncio.subprocess.Process | None = None
        self._lock = asyncio.Lock()

    async def check(self, tool: str, schema: dict[str, Any], value: Any) -> None:
        """Raise :class:`KitsuneError` ``invalid_input`` (``state.path``, ``state.rule``) when ``value`` breaks
        ``schema`` or its check takes too long; ``invalid_schema`` when the schema is unusable."""
        request = orjson.dumps({"schema": schema, "value": value})
        async with self._lock:
            started = self._process is not None
            try:
                answer = await asyncio.wait_for(self._exchange(request),
                                                self.seconds if started else _START_SECONDS + self.seconds)
            except asyncio.CancelledError:
                self._kill()  # its answer would be the next request's
                raise
            except (TimeoutError, OSError, asyncio.IncompleteReadError, orjson.JSONDecodeError):
                self._kill()
                raise KitsuneError("invalid_input", f"callSiteTool {tool}: checking the input against the tool's "
                                   f"schema took longer than {self.seconds:g}s (the page's schema is too costly for "
                                   "this input, as a backtracking pattern is), and was stopped; nothing was sent",
                                   state={"tool": tool, "path": "/", "rule": "timeout"}) from None
        if "invalid_schema" in answer:
            raise invalid_schema(tool, str(answer["invalid_schema"]))
        if "invalid_input" in answer:
            bad = answer["invalid_input"]
            raise KitsuneError("invalid_input", f"callSiteTool {tool}: input {bad['path']} {bad['broken']}; nothing "
                               "was sent", state={"tool": tool, "path": bad["path"], "rule": bad["rule"]})

    async def _exchange(self, request: bytes) -> dict[str, Any]:
        if self._process is None:
            self._process = await asyncio.create_subprocess_exec(
                *_WORKER, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.DEVNULL)
        process = self._process
        assert process.stdin is not None and process.stdout is not None
        process.stdin.write(FRAME.pack(len(request)) + request)
        await process.stdin.drain()
        size = FRAME.unpack(await process.stdout.readexactly(FRAME.size))[0]
        answer: dict[str, Any] = orjson.loads(await process.stdout.readexactly(size))
        return answer

    def _kill(self) -> None:
        process, self._process = self._process, None
        if process is not None:
            with contextlib.suppress(ProcessLookupError):
                process.kill()

    async def close(self) -> None:
        """Stop the checker process (killed: it holds nothing)."""
        process = self._process
        self._kill()
        if process is not None:
            await process.wait()


def invalid_schema(tool: str, why: str) -> KitsuneError:
    """The failure of a call of a tool whose schema cannot be used (nothing is sent)."""
    return KitsuneError("invalid_schema", f"callSiteTool {tool}: the page's input schema cannot be used: {why}; "
                        "the tool cannot be called, and nothing was sent", state={"tool": tool, "reason": why})
