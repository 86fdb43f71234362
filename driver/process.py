"""The Chromium process: which binary, its flags, and its launch through Playwright, begun first.

A node's Chromium launches before the rest of the node has loaded (:class:`FirstLaunch`): this module
imports Playwright's API and the URL guard (whose proxy every connection goes through) and nothing of the
driver's actions or the command language, so that ``kitsune serve`` begins the launch a few tenths of a
second after its start and loads the rest while Playwright's driver and Chromium start.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import re
import shutil
from collections.abc import MutableMapping
from pathlib import Path

from playwright.async_api import Browser, Playwright, async_playwright
from playwright.async_api import Error as PlaywrightError

from driver.guard import UrlGuard
from messages.errors import KitsuneError

__all__ = ["AGENT_DISABLED_FEATURES", "CHROMIUM_FLAGS", "PLAYWRIGHT_DISABLED_FEATURES", "FirstLaunch",
           "driver_compile_cache", "find_chromium", "first_line", "launch_process"]

PLAYWRIGHT_DISABLED_FEATURES: tuple[str, ...] = (
    "AvoidUnnecessaryBeforeUnloadCheckSync", "DestroyProfileOnBrowserClose", "HttpsUpgrades",
    "HttpsFirstBalancedModeAutoEnable", "LensOverlay", "MediaRouter", "PaintHolding", "ThirdPartyStoragePartitioning",
    "AvoidCorsURLLoaderRestartOnRedirect", "TcpPortRandomizationWin", "OptimizationHints", "NetworkTimeServiceQuerying",
    "AimEnabled", "PreconnectToSearch", "msForceBrowserSignIn", "msEdgeUpdateLaunchServicesPreferredVersion",
)
"""The features Playwright's own ``--disable-features`` turns off: Chromium keeps only the last
``--disable-features`` of its command line, so the node's repeats them (a test holds it to Playwright's)."""

AGENT_DISABLED_FEATURES: tuple[str, ...] = ("WebUIOmniboxPopup", "WebUIOmniboxAimPopup")
"""What a headless agent browser runs for nobody: the omnibox's WebUI popups, preloaded into a renderer
of their own in every browser context (about 40 MB a session, and the CPU to load them as the context
opens) though no window of a headless browser has an omnibox (``bench/chromium_memory.py``)."""

CHROMIUM_FLAGS: tuple[str, ...] = (
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--proxy-bypass-list=<-loopback>",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1",
    "--webrtc-ip-handling-policy=disable_non_proxied_udp",
    "--disable-blink-features=SpeculationRules",
    "--disable-features=" + ",".join((*PLAYWRIGHT_DISABLED_FEATURES, *AGENT_DISABLED_FEATURES)),
    "--optimization-guide-performance-class=8",
)
"""Flags every launch gets, with ``--proxy-server`` naming the node's proxy (``--no-sandbox`` is added
when running as root). Loopback goes through the proxy too (``<-loopback>``); Chromium resolves no
name itself (the proxy does); WebRTC sends no UDP and nothing that does not go through the proxy;
speculation rules (prefetch and prerender) are not parsed at all; what no agent uses is turned off
(:data:`AGENT_DISABLED_FEATURES`), and the device's performance class is given, as Chrome for Testing
does, so that no ``OnDeviceModelService`` utility is started (three minutes after the launch) to
benchmark it for on-device models no agent has."""

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")


def find_chromium() -> Path:
    """The Chromium to launch: ``KITSUNE_CHROMIUM``, else ``/usr/bin/chromium`` or one on ``PATH``.

    Raises :class:`KitsuneError` (``browser_unavailable``) when there is none; a
    ``KITSUNE_CHROMIUM`` that names no executable file is an error too, never silently replaced.
    """
    override = os.environ.get("KITSUNE_CHROMIUM")
    if override:
        path = Path(override).expanduser()
        if not (path.is_file() and os.access(path, os.X_OK)):
            raise KitsuneError("browser_unavailable", f"KITSUNE_CHROMIUM names no executable file: {path}")
        return path
    default = Path("/usr/bin/chromium")
    if default.is_file() and os.access(default, os.X_OK):
        return default
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return Path(found)
    raise KitsuneError(
        "browser_unavailable",
        "No Chromium found: install Debian's chromium package or set KITSUNE_CHROMIUM",
    )


def driver_compile_cache(environ: MutableMapping[str, str] = os.environ) -> None:
    """Have Playwright's driver (Node.js, started with ``environ``) keep its compiled code between starts: it
    compiles Playwright's JavaScript at every start, 0.07 s of its 0.37 s of CPU to a launched browser, which
    Node.js's compile cache (``NODE_COMPILE_CACHE``, a quiet optimization: a directory it cannot write is not an
    error) saves. The cache is the user's own (``$XDG_CACHE_HOME``, else ``~/.cache``): another user's files are
    never read as compiled code. A cache or a refusal (``NODE_DISABLE_COMPILE_CACHE``) given is kept."""
    if "NODE_COMPILE_CACHE" in environ or "NODE_DISABLE_COMPILE_CACHE" in environ:
        return
    home = environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    environ["NODE_COMPILE_CACHE"] = os.path.join(home, "kitsune", "node-compile-cache")


def first_line(message: str) -> str:
    """The first line of a Playwright message, without its ``Class.method: `` prefix."""
    line = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"^\w+\.\w+: ", "", line)


async def launch_process(playwright: Playwright, executable: Path, guard: UrlGuard, *, headless: bool) -> Browser:
    """A new Chromium process, its connections through ``guard``'s proxy (started), with no context of the
    node's yet; raises :class:`KitsuneError` (``browser_unavailable``) when it does not start."""
    root = hasattr(os, "geteuid") and os.geteuid() == 0
    try:
        return await playwright.chromium.launch(
            executable_path=str(executable), headless=headless, chromium_sandbox=not root,
            args=[*CHROMIUM_FLAGS, guard.proxy_flag(), *(["--no-sandbox"] if root else [])],
            handle_sigint=False, handle_sigterm=False, handle_sighup=False,
        )
    except PlaywrightError as e:
        raise KitsuneError("browser_unavailable", f"Chromium did not start: {first_line(e.message)[:200]}",
                           retryable=True) from e


class FirstLaunch:
    """Chromium's first launch, begun on the running loop as it is made: Playwright's driver, ``guard``'s
    proxy, then the browser process (:func:`find_chromium`'s when ``executable`` is None).

    Whoever serves with it awaits :attr:`browser` (its failure raised there) and takes over
    :attr:`playwright`; one given up is ended with :meth:`stop`.
    """

    def __init__(self, guard: UrlGuard | None = None, *, executable: Path | None = None,
                 headless: bool = True) -> None:
        self.guard = guard or UrlGuard()
        self.executable = executable
        self.headless = headless
        self.playwright: Playwright | None = None
        """Playwright, once its driver started (its owner stops it)."""
        self.browser: asyncio.Future[Browser] = asyncio.ensure_future(self._launch())

    async def _launch(self) -> Browser:
        if self.executable is None:
            self.executable = find_chromium()
        driver_compile_cache()
        self.playwright = await async_playwright().start()
        await self.guard.start()
        return await launch_process(self.playwright, self.executable, self.guard, headless=self.headless)

    async def stop(self) -> None:
        """End a launch nobody took over: the launch ends (a cancelled one could leave its process starting), then
        the browser, Playwright's driver and the proxy are closed; no Chromium process is left."""
        browser: Browser | None = None
        with contextlib.suppress(Exception):
            browser = await self.browser
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if self.playwright is not None:
            with contextlib.suppress(Exception):
                await self.playwright.stop()
        await self.guard.stop()
