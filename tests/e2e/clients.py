"""MCP clients of the SDK itself for the end-to-end tests, and what a user does by hand meanwhile.

Over stdio (``kitsune mcp``, against a node or its own embedded bridge) and over streamable HTTP
(``/mcp`` on a node); :class:`Asker` answers elicitation prompts from a script.
"""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import httpx2
import mcp_types as types
from mcp import ClientSession, StdioServerParameters, stdio_client
from mcp.client.session import ClientRequestContext
from mcp.client.streamable_http import streamable_http_client

from mcp_gateway._results import page_texts
from tests.integration.serving import KITSUNE, TOKENS, Served

__all__ = ["Asker", "act", "audit_of", "call", "open_tab", "over_http", "over_stdio", "process_tree", "processes",
           "select_tab"]


class Asker:
    """A client's elicitation callback that answers from a script: "accept", "decline", "cancel",
    "hang" (never answers), or a dict (accepted with that content). It records every prompt."""

    def __init__(self, *script: str | dict[str, Any]) -> None:
        self.script = list(script)
        self.messages: list[str] = []
        self.schemas: list[dict[str, Any]] = []

    async def __call__(self, context: ClientRequestContext,
                       params: types.ElicitRequestParams) -> types.ElicitResult | types.ErrorData:
        assert isinstance(params, types.ElicitRequestFormParams)
        self.messages.append(params.message)
        self.schemas.append(params.requested_schema)
        step = self.script.pop(0) if self.script else "hang"
        if isinstance(step, dict):
            return types.ElicitResult(action="accept", content=step)
        if step == "accept":
            return types.ElicitResult(action="accept", content={"approve": True})
        if step in ("decline", "cancel"):
            return types.ElicitResult(action="decline" if step == "decline" else "cancel")
        await anyio.sleep(3600)
        raise AssertionError("an unanswered prompt was never cancelled")


@asynccontextmanager
async def over_http(served: Served, agent: str = "alice", asker: Asker | None = None) -> AsyncIterator[ClientSession]:
    """An MCP session over streamable HTTP at the node's /mcp, as ``agent``."""
    async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {TOKENS[agent]}"}, timeout=60) as http, \
            streamable_http_client(served.base + "/mcp", http_client=http) as (read, write), \
            ClientSession(read, write, elicitation_callback=asker) as session:
        await session.initialize()
        yield session


@asynccontextmanager
async def over_stdio(served: Served | None, asker: Asker | None = None, caps: str = "core,automation",
                     agent: str = "alice", **env: str) -> AsyncIterator[ClientSession]:
    """An MCP session with ``kitsune mcp`` over stdio: against the node, or its own embedded bridge."""
    args = ["mcp"]
    if served is not None:
        token_file = served.directory / f"{agent}.token"
        token_file.write_text(TOKENS[agent])
        args += ["--bridge", served.base, "--token-file", str(token_file)]
    # the SDK passes on only a few variables (PATH, HOME...): without PYTHONPATH, a worktree's test would run the
    # code the venv's editable install points at, not its own
    inherited = {"PYTHONPATH": os.environ["PYTHONPATH"]} if os.environ.get("PYTHONPATH") else {}
    parameters = StdioServerParameters(command=str(KITSUNE), args=args,
                                       env={**inherited, "KITSUNE_CAPS": caps, **env})
    async with stdio_client(parameters) as (read, write), \
            ClientSession(read, write, elicitation_callback=asker) as session:
        await session.initialize()
        yield session


async def sdk_served(progress: float, total: float | None, message: str | None) -> None:
    """A progress callback that hears nothing: the call carries a progressToken, so ``kitsune mcp``'s SDK serves it
    (its front serves a call without one while the SDK loads)."""


async def call(session: ClientSession, name: str, arguments: dict[str, Any], **options: Any) -> dict[str, Any]:
    """A tool's structured result; its text content must say the same."""
    result = await session.call_tool(name, arguments, **options)
    assert isinstance(result.structured_content, dict), result
    texts = [c.text for c in result.content if isinstance(c, types.TextContent)]
    assert len(texts) == 1
    shown, pages = page_texts(result.structured_content)  # a snapshot's text is shown as text, after the JSON
    said, end = json.JSONDecoder().raw_decode(texts[0][texts[0].index("\n{") + 1:])
    assert said == shown and texts[0][texts[0].index("\n{") + 1 + end:].strip() == "\n".join(pages).strip()
    assert result.is_error == ("error" in result.structured_content)
    return result.structured_content


def api(served: Served, agent: str = "alice") -> httpx.Client:
    return served.client(agent)


def open_tab(served: Served, url: str, agent: str = "alice") -> int:
    """Open a tab as ``agent`` through the HTTP API (confirming it on an asking node); it becomes current."""
    with api(served, agent) as client:
        answer = client.post("/api/tabs", json={"op": "open", "url": url}).json()
        if answer.get("status") == "held":
            answer = client.post("/api/act", json={"command": {"action": "newTab", "url": url},
                                                   "confirm_token": answer["state"]["confirm_token"]}).json()
        assert answer["status"] == "ok", answer
        tab: int = answer["tabId"]
        return tab


def act(served: Served, command: dict[str, Any], agent: str = "alice") -> dict[str, Any]:
    """One action through the HTTP API (confirmed at once on an asking node): what the user does by hand."""
    with api(served, agent) as client:
        answer: dict[str, Any] = client.post("/api/act", json={"command": command}).json()
        if answer.get("status") == "held":
            answer = client.post("/api/act", json={"command": command,
                                                   "confirm_token": answer["state"]["confirm_token"]}).json()
        return answer


def select_tab(served: Served, tab: int, agent: str = "alice") -> None:
    with api(served, agent) as client:
        assert client.post("/api/tabs", json={"op": "select", "tabId": tab}).json()["ok"]


def audit_of(served: Served, action: str, **params: Any) -> list[dict[str, Any]]:
    """The node's audit entries of direct ``action`` requests with these parameters."""
    return [e for e in served.audit() if e.get("kind") == "direct" and e.get("action") == action
            and all(e.get("params", {}).get(k) == v for k, v in params.items())]


def processes() -> dict[int, tuple[int, str]]:
    """pid -> (parent pid, command line) of every process."""
    found = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        found[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    return found


def process_tree(root: int, running: dict[int, tuple[int, str]]) -> set[int]:
    """``root`` and its descendants among ``running``."""
    tree, grown = {root}, True
    while grown:
        grown = False
        for pid, (parent, _) in running.items():
            if parent in tree and pid not in tree:
                tree.add(pid)
                grown = True
    return tree
