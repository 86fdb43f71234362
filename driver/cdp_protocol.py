"""The protocol's description as the node's Chromium serves it, normalized and kept per browser version.

Chromium serves its protocol at ``/json/protocol`` of a DevTools HTTP endpoint, which the node's browser never
opens (Playwright talks to it over a pipe). So the same executable is started once per version, headless, with a
throwaway profile, an endpoint on an ephemeral loopback port and every connection sent to a dead proxy: the
description is read from it and it is stopped at once. Normalized, every item has ``name`` (a domain's and a
type's too) and every domain lists ``types``, ``commands`` and ``events`` as arrays; each command carries its
``class`` for a ``cdp`` step (:mod:`messages.cdp_methods`).
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import shutil
import tempfile
import urllib.request
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson

from messages.cdp_methods import method_class
from messages.errors import KitsuneError

__all__ = ["ProtocolBook", "normalized"]

_START_TIMEOUT = 20.0
"""Seconds the throwaway Chromium may take to open its endpoint."""
_FLAGS = ("--headless", "--no-first-run", "--disable-gpu", "--disable-background-networking",
          "--disable-component-update", "--disable-sync", "--remote-debugging-address=127.0.0.1",
          "--remote-debugging-port=0", "--proxy-server=127.0.0.1:9", "--proxy-bypass-list=<-loopback>",
          "--host-resolver-rules=MAP * ~NOTFOUND")
"""Its endpoint on loopback only; every connection of its own to a dead proxy (port 9), no name resolved."""


class ProtocolBook:
    """The normalized protocol of each browser version seen, read once (used on the loop)."""

    def __init__(self, executable: Callable[[], Path | None]) -> None:
        self._executable = executable
        self._known: dict[str, list[dict[str, Any]]] = {}
        self._lock = asyncio.Lock()

    async def of(self, version: str) -> list[dict[str, Any]]:
        """The domains of browser ``version``'s protocol; raises :class:`KitsuneError` (``browser_error``)."""
        async with self._lock:
            if version not in self._known:
                executable = self._executable()
                if executable is None:
                    raise KitsuneError("browser_error", "cdpSpec: the browser's executable is not known")
                self._known[version] = normalized(await _served(executable))
            return self._known[version]


async def _served(executable: Path) -> dict[str, Any]:
    """``/json/protocol`` of a throwaway ``executable``, stopped once it answered."""
    profile = Path(tempfile.mkdtemp(prefix="kitsune-protocol-"))
    flags = [*_FLAGS, f"--user-data-dir={profile}", *(["--no-sandbox"] if os.geteuid() == 0 else []), "about:blank"]
    process = await asyncio.create_subprocess_exec(executable, *flags, stdin=asyncio.subprocess.DEVNULL,
                                                   stdout=asyncio.subprocess.DEVNULL,
                                                   stderr=asyncio.subprocess.DEVNULL)
    try:
        async with asyncio.timeout(_START_TIMEOUT):
            port = await _port(profile / "DevToolsActivePort", process)
            return await asyncio.to_thread(_get, f"http://127.0.0.1:{port}/json/protocol")
    except (TimeoutError, OSError, ValueError) as e:
        raise KitsuneError("browser_error", f"cdpSpec: the protocol could not be read ({type(e).__name__})") from e
    finally:
        with contextlib.suppress(ProcessLookupError):
            process.kill()
        await process.wait()
        shutil.rmtree(profile, ignore_errors=True)


async def _port(announced: Path, process: asyncio.subprocess.Process) -> int:
    """The port Chromium writes into its profile's ``DevToolsActivePort`` once its endpoint listens."""
    while True:
        if process.returncode is not None:
            raise OSError("the browser exited before it opened its endpoint")
        with contextlib.suppress(FileNotFoundError, ValueError, IndexError):
            return int(announced.read_text().splitlines()[0])
        await asyncio.sleep(0.05)


def _get(url: str) -> dict[str, Any]:
    opener = urllib.request.build_opener(urllib.request.ProxyHandler({}))  # loopback, never through a proxy
    with opener.open(url, timeout=_START_TIMEOUT) as answer:
        found = orjson.loads(answer.read())
    if not isinstance(found, dict):
        raise ValueError("not a protocol description")
    return found


def normalized(protocol: dict[str, Any]) -> list[dict[str, Any]]:
    """The domains of a ``/json/protocol`` answer, each item named by ``name``, lists always there."""
    domains = []
    for raw in protocol.get("domains", ()):
        name = raw["domain"]
        domain = {"name": name, **{k: v for k, v in raw.items() if k not in ("domain", "types", "commands", "events")}}
        domain["types"] = [{"name": t["id"], **{k: v for k, v in t.items() if k != "id"}} for t in raw.get("types", ())]
        domain["commands"] = [{**c, "class": method_class(f"{name}.{c['name']}")} for c in raw.get("commands", ())]
        domain["events"] = list(raw.get("events", ()))
        domains.append(domain)
    return domains
