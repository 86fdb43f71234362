"""The Playwright driver: runs actions on real Chromium tabs and says truthfully what happened.

Every tab gets a window of its own (CDP ``Target.createTarget`` with ``newWindow``): in one
window only the front tab renders, and Playwright's actionability checks on a background tab
wait for animation frames that never come (DESIGN.md, Browser). Tabs have small integer ids
from 1 that are never reused; pages the site opens itself (``window.open``, ``target=_blank``)
get ids too.

:meth:`ChromiumBrowser.execute` runs one action (never a block) and answers an outcome of the
step engine, never an exception:

- ``Done`` when the page did what was asked (``warning`` for what deserves a look);
- ``Failed`` when nothing reached the page (element missing or not actionable in time, invalid
  selector, closed tab), retryable for transient causes; reads always end ``Failed``;
- ``Unknown`` when a write was sent and its effect is not known: it timed out after it was
  sent (``timeout``), its tab closed or crashed while it ran (``tab_closed``), the page
  navigated away under it (``navigated``), or agent JavaScript threw half-way (``js_error``).

Error messages are built here from the action, the selector and a code; they never carry typed
values or JavaScript bodies, and Playwright's own messages (which can echo a filled value) are
passed on only in part, and only for actions without typed values.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import datetime
import hashlib
import itertools
import math
import os
import re
import shutil
import tempfile
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar, cast

from playwright.async_api import (
    Browser,
    BrowserContext,
    CDPSession,
    Locator,
    Page,
    Playwright,
    Route,
    WebSocketRoute,
    async_playwright,
)
from playwright.async_api import Download as PlaywrightDownload
from playwright.async_api import Error as PlaywrightError
from playwright.async_api import TimeoutError as PlaywrightTimeoutError

from bridge.proxy import PROXY_HEADER, Endpoint, PolicyProxy
from bridge.url_policy import UrlPolicy
from messages.commands import (
    BLOCKS,
    Check,
    Click,
    Clipboard,
    CloseTab,
    Command,
    Cookies,
    Download,
    Fill,
    Find,
    GetTabs,
    Js,
    Navigate,
    NewTab,
    PageText,
    Press,
    Screenshot,
    Select,
    Storage,
    SubmitForm,
    SwitchTab,
    SyncBarrier,
    Title,
    Type,
    Url,
    WaitFor,
    WaitForResult,
    is_write,
    own_references,
    secret_values,
)
from messages.errors import KitsuneError
from messages.results import Done, Failed, Failure, Outcome, Unknown

__all__ = ["CHROMIUM_FLAGS", "ChromiumBrowser", "find_chromium"]

T = TypeVar("T")

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
)
"""Flags every launch gets, with ``--proxy-server`` naming the node's proxy (``--no-sandbox`` is added
when running as root). Loopback goes through the proxy too (``<-loopback>``); Chromium resolves no
name itself (the proxy does); WebRTC sends no UDP and nothing that does not go through the proxy;
speculation rules (prefetch and prerender) are not parsed at all."""

_CANDIDATES = ("chromium", "chromium-browser", "google-chrome")
_OPEN_TAB_TIMEOUT = 30.0
_GRACE = 1.0
"""Seconds past a command's timeout before the backstop cancels it (Playwright's own timeouts fire first)."""
_PROBE_TIMEOUT = 0.5
"""Seconds for the look after a failure (does the element exist at all?)."""
_SETTLE_TIMEOUT = 5.0
"""Seconds a failed navigation waits for the error page Chromium commits after it."""
_ERROR_PAGE = "chrome-error://"

_SECRET_ACTIONS = (Type, Fill, Storage, Clipboard, Cookies, Js, WaitForResult)
"""Actions with typed values or JavaScript: Playwright's messages about them are never passed on."""

# Network errors that happen before a request leaves the browser: nothing reached the server.
_UNSENT_NET_ERRORS = frozenset({
    "ERR_NAME_NOT_RESOLVED", "ERR_NAME_RESOLUTION_FAILED", "ERR_CONNECTION_REFUSED", "ERR_ADDRESS_UNREACHABLE",
    "ERR_ADDRESS_INVALID", "ERR_INTERNET_DISCONNECTED", "ERR_BLOCKED_BY_CLIENT", "ERR_BLOCKED_BY_ADMINISTRATOR",
    "ERR_UNSAFE_PORT", "ERR_INVALID_URL", "ERR_DISALLOWED_URL_SCHEME", "ERR_UNKNOWN_URL_SCHEME",
    "ERR_NETWORK_ACCESS_DENIED", "ERR_PROXY_CONNECTION_FAILED", "ERR_SSL_PROTOCOL_ERROR",
    "ERR_CERT_AUTHORITY_INVALID", "ERR_CERT_COMMON_NAME_INVALID", "ERR_CERT_DATE_INVALID", "ERR_CERT_INVALID",
    "ERR_SSL_VERSION_OR_CIPHER_MISMATCH", "ERR_CONNECTION_TIMED_OUT", "ERR_TUNNEL_CONNECTION_FAILED",
})

_WRONG_ELEMENT = ("is not an <input>", "Not a checkbox or radio button", "not a <select>", "cannot be filled",
                  "Cannot uncheck radio button", "Malformed value", "Cannot type text into input[type=number]")
"""Playwright's errors about the kind of element, raised before anything is sent to it."""

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


# --- failures ------------------------------------------------------------------------------


class _Stop(Exception):
    """Ends an action with a failure built here (never from a page's or Playwright's text)."""

    def __init__(self, code: str, message: str, *, retryable: bool = False, took_effect: bool | None = None,
                 state: Mapping[str, Any] | None = None) -> None:
        super().__init__(message)
        self.code = code
        self.message = message
        self.retryable = retryable
        self.took_effect = took_effect
        """False when it is known that nothing took effect, even after the write was sent."""
        self.state = state


@dataclass(slots=True)
class _Run:
    """One execution of one action on one tab."""

    command: Command
    tab: int
    page: Page
    timeout: float
    deadline: float
    write: bool
    sent: bool = False
    """Whether something has been sent that may change the page (from here on, failures are Unknown)."""
    pause: Callable[[float], Awaitable[None]] = asyncio.sleep
    """Awaited between the rounds of a write that polls (``waitForResult``): the tab actor lets its
    other writes run meanwhile."""

    def remaining(self) -> float:
        return max(0.0, self.deadline - asyncio.get_running_loop().time())

    def ms(self) -> float:
        """Milliseconds left, for Playwright (whose 0 means no timeout at all)."""
        return max(1.0, self.remaining() * 1000.0)

    @property
    def action(self) -> str:
        return self.command.action

    @property
    def selector(self) -> str | None:
        selector = getattr(self.command, "selector", None)
        return selector if isinstance(selector, str) else None


def _first_line(message: str) -> str:
    line = message.strip().splitlines()[0] if message.strip() else ""
    return re.sub(r"^\w+\.\w+: ", "", line)


def _net_error(message: str) -> str | None:
    match = re.search(r"net::(ERR_[A-Z0-9_]+)", message)
    return match.group(1) if match else None


def _js_error_name(message: str) -> str:
    """The JavaScript error class a page threw (``TypeError``...), from Playwright's message."""
    match = re.match(r"([A-Z][A-Za-z]*(?:Error|Exception))\b", _first_line(message))
    return match.group(1) if match else "an exception"


def _is_closed_error(error: BaseException) -> bool:
    if type(error).__name__ == "TargetClosedError":
        return True
    message = str(error)
    return any(s in message for s in ("has been closed", "Target closed", "Target crashed", "Browser closed",
                                       "Browser has been closed", "Connection closed"))


def _is_navigation_error(message: str) -> bool:
    return any(s in message for s in ("Execution context was destroyed", "Frame was detached", "frame was detached",
                                      "Navigation interrupted", "interrupted by another navigation",
                                      "Cannot find context with specified id"))


_CALL_LOG = "\nCall log:\n"
_POINTER_SENT_LINE = re.compile(
    r"^\s*(?:-|\d+ \u00d7)\s+(?:performing [\w ]+ action|[\w ]+ action done"
    r"|forcing action|waiting for scheduled navigations to finish|navigations have finished)\s*$",
    re.MULTILINE)
"""A call-log line Playwright writes once it dispatches (or is about to dispatch) a pointer action's input."""


def _pointer_sent(message: str) -> bool:
    """Whether a failed Playwright pointer action (click, setChecked) may have sent input to the page.

    Playwright logs ``performing click action`` just before it dispatches the mouse events, in the
    same synchronous run as the dispatch (its timeout, a timer, cannot fall between the two), and
    every later line (``click action done``, ``waiting for scheduled navigations to finish``...)
    follows it. A call log without any of them shows the action stopped while it was still waiting
    for the element (missing, hidden, disabled, covered, moving): nothing was sent. An error with no
    call log at all tells nothing, and counts as sent.
    """
    _head, found, log = message.partition(_CALL_LOG)
    return not found or _POINTER_SENT_LINE.search(log) is not None


def _is_selector_error(message: str) -> bool:
    return any(s in message for s in ("while parsing", "Unknown engine", "is not a valid selector",
                                      "Invalid selector"))


def _jsonable(value: Any) -> Any:
    """A value from the page as JSON can carry it."""
    if isinstance(value, float) and not math.isfinite(value):
        return None
    if isinstance(value, Mapping):
        return {str(k): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_jsonable(v) for v in value]
    if isinstance(value, datetime.datetime | datetime.date):
        return value.isoformat()
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


def _truthy(value: Any) -> bool:
    """JavaScript truthiness of a value that came back from the page."""
    if value is None or value is False:
        return False
    if isinstance(value, int | float):
        return value != 0 and not (isinstance(value, float) and math.isnan(value))
    if isinstance(value, str):
        return value != ""
    return True  # objects and arrays, even empty ones


def _safe_filename(name: str) -> str:
    name = Path(name.replace("\\", "/")).name.strip().lstrip(".")
    name = re.sub(r"[\x00-\x1f]", "", name)
    return name or "download"


def _unique_path(directory: Path, name: str) -> Path:
    path = directory / name
    stem, suffix = path.stem, path.suffix
    for n in itertools.count(1):
        if not path.exists():
            return path
        path = directory / f"{stem} ({n}){suffix}"
    raise AssertionError("unreachable")  # pragma: no cover


def _digest(path: Path) -> tuple[int, str]:
    sha = hashlib.sha256()
    size = 0
    with path.open("rb") as f:
        for chunk in iter(lambda: f.read(1 << 16), b""):
            sha.update(chunk)
            size += len(chunk)
    return size, sha.hexdigest()


# --- JavaScript run in the page (ours, not the agent's) ---------------------------------------

_SUBMIT_JS = """(el) => {
  const form = el instanceof HTMLFormElement ? el : (el.form || el.closest('form'));
  if (!form) return 'no_form';
  const submitter = (el !== form && el.form === form && (el.type === 'submit' || el.type === 'image'))
    ? el : null;
  let seen = null;
  const listen = (event) => { seen = event; };
  form.addEventListener('submit', listen);
  try { if (submitter) form.requestSubmit(submitter); else form.requestSubmit(); }
  finally { form.removeEventListener('submit', listen); }
  if (!seen) return 'invalid';
  return seen.defaultPrevented ? 'prevented' : 'submitted';
}"""

_FIND_JS = """(els, limit) => els.slice(0, limit).map((el) => {
  const text = (el.innerText !== undefined ? el.innerText : el.textContent) || '';
  const visible = typeof el.checkVisibility === 'function'
    ? el.checkVisibility({visibilityProperty: true, opacityProperty: false})
    : !!(el.offsetWidth || el.offsetHeight || el.getClientRects().length);
  return {tag: el.tagName.toLowerCase(), text: text.trim().replace(/\\s+/g, ' ').slice(0, 200), visible};
})"""

_OPTIONS_JS = """(el, wanted) => {
  if (!(el instanceof HTMLSelectElement)) return {error: 'not_select'};
  const options = Array.from(el.options);
  const missing = wanted.filter((w) => !options.some((o) => o.value === w || o.label === w || o.text === w));
  return {missing, multiple: el.multiple};
}"""

_STORAGE_JS = """([area, op, key, value]) => {
  let store;
  try { store = area === 'session' ? window.sessionStorage : window.localStorage; }
  catch (e) { return {error: 'unavailable'}; }
  if (!store) return {error: 'unavailable'};
  try {
    if (op === 'get') {
      if (key !== null) return {value: store.getItem(key)};
      const items = {};
      for (let i = 0; i < store.length; i++) { const k = store.key(i); items[k] = store.getItem(k); }
      return {items};
    }
    if (op === 'set') { store.setItem(key, value); return {set: key}; }
    if (op === 'remove') { const existed = store.getItem(key) !== null; store.removeItem(key);
                           return {removed: key, existed}; }
    const n = store.length; store.clear(); return {cleared: n};
  } catch (e) { return {error: e && e.name === 'QuotaExceededError' ? 'quota' : 'failed'}; }
}"""

_CLIPBOARD_WRITE_JS = """async (text) => {
  if (!navigator.clipboard || !window.isSecureContext) return 'fallback';
  try { await navigator.clipboard.writeText(text); return 'ok'; } catch (e) { return 'fallback'; }
}"""

_CLIPBOARD_READ_JS = """async () => {
  if (!navigator.clipboard || !window.isSecureContext) return {fallback: true};
  try { return {text: await navigator.clipboard.readText()}; } catch (e) { return {fallback: true}; }
}"""

# The in-page fallback: a scratch textarea and the real copy/paste keys, so it goes through the page.
_SCRATCH_JS = """([text]) => {
  const area = document.createElement('textarea');
  area.id = '__kitsune_clipboard';
  area.setAttribute('aria-hidden', 'true');
  area.style.cssText = 'position:fixed;top:0;left:0;width:2px;height:2px;opacity:0;';
  window.__kitsuneFocus = document.activeElement;
  area.value = text === null ? '' : text;
  (document.body || document.documentElement).appendChild(area);
  area.focus();
  area.select();
  return true;
}"""

_SCRATCH_DONE_JS = """() => {
  const area = document.getElementById('__kitsune_clipboard');
  const text = area ? area.value : null;
  if (area) area.remove();
  const back = window.__kitsuneFocus;
  delete window.__kitsuneFocus;
  if (back && typeof back.focus === 'function') back.focus();
  return text;
}"""


# --- the browser ----------------------------------------------------------------------------


Handler = Callable[[_Run], Awaitable[tuple[dict[str, Any], str | None]]]


_NO_SERVICE_WORKERS = """if (navigator.serviceWorker) {
  const refuse = () => Promise.reject(new DOMException('Service workers are blocked', 'SecurityError'));
  Object.defineProperty(navigator.serviceWorker, 'register', {value: refuse});
}"""
"""Service workers could answer a page's requests where no URL list sees them: none may register."""

_NEEDS_USER_PROBE = """() => {
  const visible = (e) => !!(e.offsetWidth || e.offsetHeight || e.getClientRects().length);
  const marked = document.querySelector('[data-kitsune-needs-user]');
  if (marked && visible(marked)) return {reason: marked.getAttribute('data-kitsune-needs-user'), evidence: 'marker'};
  const check = document.querySelector('.g-recaptcha, .h-captcha, .cf-turnstile, iframe[src*="recaptcha"], '
    + 'iframe[src*="hcaptcha"], iframe[src*="challenges.cloudflare.com"]');
  if (check && visible(check)) return {reason: 'human_check', evidence: 'captcha'};
  const password = [...document.querySelectorAll('input[type=password]')].find(visible);
  if (password) return {reason: 'sign_in', evidence: 'password_field'};
  return null;
}"""
"""Looks for a needs-user hint in a page: an explicit marker, a human check, a sign-in form."""


class ChromiumBrowser:
    """One Chromium (one browser context), its tabs, and the actions that run on them.

    Everything runs on the asyncio loop that called :meth:`start`.
    """

    def __init__(self, *, executable: Path | None = None, downloads_dir: Path | None = None,
                 headless: bool = True) -> None:
        self.executable = executable
        """The Chromium binary; :func:`find_chromium` at start when None."""
        self.downloads_dir = downloads_dir
        """Where downloads are saved; a temporary directory (removed at stop) when None."""
        self.headless = headless
        self.current_tab: int | None = None
        """The tab newTab or switchTab made current (None after it closed)."""
        self.restarts = 0
        """How many times the browser died and was restarted."""
        self.url_policy: Callable[[], UrlPolicy] | None = None
        """The URL lists every request of every page must pass (navigations, redirects, popups,
        frames, subresources, fetch, WebSocket); None lets everything through."""
        self.own_endpoints: set[Endpoint] = set()
        """The node's listening endpoints (its HTTP API, NATS): the proxy refuses them, and its own
        port, on every address of this machine, whatever the URL lists say."""
        self._proxy = PolicyProxy(lambda: self.url_policy() if self.url_policy is not None else UrlPolicy(),
                                  lambda: self.own_endpoints)
        self._own_downloads = downloads_dir is None
        self._playwright: Playwright | None = None
        self._browser: Browser | None = None
        self._context: BrowserContext | None = None
        self._cdp: CDPSession | None = None
        self._context_id: str | None = None
        self._pages: dict[int, Page] = {}
        self._open: frozenset[int] = frozenset()  # a snapshot of the keys of _pages, safe to read from any thread
        self._page_tabs: dict[int, int] = {}  # id(page) -> tab id
        self._target_ids: dict[int, str] = {}  # tab id -> CDP target id
        self.next_tab_id: Callable[[], int] = itertools.count(1).__next__
        """Names each new page, popups included, at once (the node gives ids unique in its fleet)."""
        self._page_added = asyncio.Event()
        self._ready = asyncio.Event()
        self._failure: KitsuneError | None = None
        self._stopping = False
        self._restart_task: asyncio.Task[None] | None = None
        self._handlers: dict[type[Command], Handler] = {
            Navigate: self._navigate, Click: self._click, Type: self._type, Fill: self._fill,
            Select: self._select, Press: self._press, Check: self._check, SubmitForm: self._submit_form,
            PageText: self._page_text, Find: self._find, Url: self._url, Title: self._title,
            Screenshot: self._screenshot, WaitFor: self._wait_for, Js: self._js,
            WaitForResult: self._wait_for_result, CloseTab: self._close_tab_action,
            SwitchTab: self._switch_tab, Cookies: self._cookies, Storage: self._storage,
            Clipboard: self._clipboard, Download: self._download,
        }

    # -- lifecycle -----------------------------------------------------------------------------

    async def start(self) -> None:
        """Launch Chromium; raises :class:`KitsuneError` (``browser_unavailable``) when it cannot."""
        if self._playwright is not None:
            return
        if self.executable is None:
            self.executable = find_chromium()
        if self.downloads_dir is None:
            self.downloads_dir = Path(tempfile.mkdtemp(prefix="kitsune-downloads-"))
        self.downloads_dir.mkdir(parents=True, exist_ok=True)
        self._stopping = False
        self._page_added = asyncio.Event()
        self._ready = asyncio.Event()
        self._playwright = await async_playwright().start()
        try:
            await self._proxy.start()
            await self._launch()
        except BaseException:
            await self.stop()
            raise
        self._ready.set()

    async def stop(self) -> None:
        """Close every tab and the browser; no Chromium process is left."""
        self._stopping = True
        task, self._restart_task = self._restart_task, None
        if task is not None and not task.done():
            task.cancel()
            with contextlib.suppress(BaseException):
                await task
        browser, playwright = self._browser, self._playwright
        self._browser = self._context = self._cdp = None
        self._playwright = None
        self._forget_all()
        if browser is not None:
            with contextlib.suppress(Exception):
                await browser.close()
        if playwright is not None:
            with contextlib.suppress(Exception):
                await playwright.stop()
        await self._proxy.stop()
        if self._own_downloads and self.downloads_dir is not None:
            shutil.rmtree(self.downloads_dir, ignore_errors=True)
            self.downloads_dir = None
        self._ready.set()

    async def _launch(self) -> None:
        assert self._playwright is not None and self.executable is not None
        root = hasattr(os, "geteuid") and os.geteuid() == 0
        try:
            browser = await self._playwright.chromium.launch(
                executable_path=str(self.executable), headless=self.headless, chromium_sandbox=not root,
                args=[*CHROMIUM_FLAGS, f"--proxy-server=http://{':'.join(map(str, self._proxy.endpoint))}",
                      *(["--no-sandbox"] if root else [])],
                handle_sigint=False, handle_sigterm=False, handle_sighup=False,
            )
        except PlaywrightError as e:
            raise KitsuneError("browser_unavailable", f"Chromium did not start: {_first_line(e.message)[:200]}",
                               retryable=True) from e
        try:
            cdp = await browser.new_browser_cdp_session()
            before = set((await cdp.send("Target.getBrowserContexts"))["browserContextIds"])
            context = await browser.new_context(
                permissions=["clipboard-read", "clipboard-write"], accept_downloads=True, service_workers="block",
            )
            await context.add_init_script(_NO_SERVICE_WORKERS)
            if self.url_policy is not None:
                await context.route("**/*", self._guard_request)
                await context.route_web_socket(re.compile(".*"), self._guard_websocket)
            after = set((await cdp.send("Target.getBrowserContexts"))["browserContextIds"])
            created = after - before
            if len(created) != 1:
                raise KitsuneError("browser_unavailable", "Could not identify the browser context of the tabs")
        except BaseException as e:
            with contextlib.suppress(Exception):
                await browser.close()
            if isinstance(e, PlaywrightError):
                raise KitsuneError("browser_unavailable", "Chromium started but its browser context did not",
                                   retryable=True) from e
            raise
        context.on("page", self._on_page)
        browser.on("disconnected", self._on_disconnected)
        self._browser, self._context, self._cdp = browser, context, cdp
        self._context_id = created.pop()
        self._failure = None

    def _on_disconnected(self, browser: Browser) -> None:
        if self._stopping or browser is not self._browser:
            return
        self._browser = self._context = self._cdp = None
        self._forget_all()
        self._ready.clear()
        self._restart_task = asyncio.get_running_loop().create_task(self._restart())

    async def _restart(self) -> None:
        error: KitsuneError | None = None
        for attempt in range(3):
            try:
                await self._launch()
            except Exception as e:  # the next attempt, or the failure new_tab reports
                error = e if isinstance(e, KitsuneError) else KitsuneError(
                    "browser_unavailable", f"Chromium did not restart ({type(e).__name__})", retryable=True)
                await asyncio.sleep(0.5 * (attempt + 1))
                continue
            self.restarts += 1
            self._ready.set()
            return
        self._failure = error or KitsuneError("browser_unavailable", "Chromium died and did not restart")
        self._ready.set()

    async def _ensure_ready(self, timeout: float) -> tuple[BrowserContext, CDPSession, str]:
        if self._playwright is None or self._stopping:
            raise KitsuneError("browser_unavailable", "The browser is not started")
        try:
            await asyncio.wait_for(self._ready.wait(), max(0.001, timeout))
        except TimeoutError:
            raise KitsuneError("browser_unavailable", "The browser is restarting", retryable=True) from None
        if self._context is None or self._cdp is None or self._context_id is None:
            raise self._failure or KitsuneError("browser_unavailable", "The browser is not running", retryable=True)
        return self._context, self._cdp, self._context_id

    async def browser_pid(self) -> int | None:
        """The process id of the running Chromium (its browser process), or None."""
        if self._cdp is None:
            return None
        try:
            info = await self._cdp.send("SystemInfo.getProcessInfo")
        except PlaywrightError:
            return None
        for process in info.get("processInfo", []):
            if process.get("type") == "browser":
                return int(process["id"])
        return None

    # -- tabs ----------------------------------------------------------------------------------

    def _on_page(self, page: Page) -> None:
        if id(page) in self._page_tabs:
            return
        tab = self.next_tab_id()
        self._pages[tab] = page
        self._open = frozenset(self._pages)
        self._page_tabs[id(page)] = tab
        page.on("close", lambda _page: self._forget(tab))
        page.on("crash", lambda _page: self._crashed(tab))
        event, self._page_added = self._page_added, asyncio.Event()
        event.set()

    def _forget(self, tab: int) -> None:
        page = self._pages.pop(tab, None)
        self._open = frozenset(self._pages)
        if page is not None:
            self._page_tabs.pop(id(page), None)
        self._target_ids.pop(tab, None)
        if self.current_tab == tab:
            self.current_tab = None

    def _forget_all(self) -> None:
        for tab in list(self._pages):
            self._forget(tab)

    def _crashed(self, tab: int) -> None:
        page = self._pages.get(tab)
        self._forget(tab)
        if page is not None:
            task = asyncio.get_running_loop().create_task(page.close())
            task.add_done_callback(lambda t: t.cancelled() or t.exception())

    async def _target_id(self, tab: int, page: Page) -> str | None:
        if tab in self._target_ids:
            return self._target_ids[tab]
        if self._context is None:
            return None
        try:
            session = await self._context.new_cdp_session(page)
            try:
                info = await session.send("Target.getTargetInfo")
            finally:
                with contextlib.suppress(PlaywrightError):
                    await session.detach()
        except PlaywrightError:
            return None
        target = str(info["targetInfo"]["targetId"])
        self._target_ids[tab] = target
        return target

    async def _open_window(self, timeout: float) -> int | Failed | Unknown:
        """A new tab in a window of its own: its id, or the outcome of the attempt that failed."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        try:
            _context, cdp, context_id = await self._ensure_ready(timeout)
        except KitsuneError as e:
            return Failed(Failure.of(e))
        try:
            created = await asyncio.wait_for(cdp.send("Target.createTarget", {
                "url": "about:blank", "newWindow": True, "background": False, "browserContextId": context_id,
            }), max(0.001, deadline - loop.time()))
        except TimeoutError:  # the browser may still open it
            return Unknown(Failure(f"Command timed out after {timeout:g}s", "timeout", False))
        except PlaywrightError:
            return Failed(Failure("newTab: the browser could not open a tab", "browser_unavailable", True))
        target = str(created["targetId"])
        while True:
            added = self._page_added
            for tab, page in sorted(self._pages.items(), reverse=True):
                if await self._target_id(tab, page) == target:
                    return tab
            left = deadline - loop.time()
            if left <= 0:
                break
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(added.wait(), left)
        try:  # take the window back, so that nothing is left of the attempt
            await asyncio.wait_for(cdp.send("Target.closeTarget", {"targetId": target}), 2.0)
        except (PlaywrightError, TimeoutError):
            return Unknown(Failure(f"Command timed out after {timeout:g}s", "timeout", False))
        return Failed(Failure(f"newTab: the new tab did not answer within {timeout:g}s; it was closed again",
                              "timeout", True))

    async def new_tab(self, url: str | None = None) -> int:
        """Open a tab in its own window (at ``url`` when given), make it current; its id.

        Raises :class:`KitsuneError` when the tab cannot be opened or ``url`` cannot be loaded.
        """
        outcome = await self.execute(NewTab(url=url), None, _OPEN_TAB_TIMEOUT)
        if isinstance(outcome, Done):
            return int(outcome.value["tabId"])
        failure = outcome.failure
        raise KitsuneError(failure.code, failure.error, retryable=failure.retryable, state=failure.state)

    async def close_tab(self, tab_id: int) -> None:
        """Close a tab now (a command running on it ends ``tab_closed``); closing a closed tab does nothing."""
        page = self._pages.get(tab_id)
        if page is None:
            return
        with contextlib.suppress(PlaywrightError):
            await page.close()
        self._forget(tab_id)

    def tab_ids(self) -> frozenset[int]:
        """Ids of the open tabs (safe to call from any thread)."""
        return self._open

    async def _guard_request(self, route: Route) -> None:
        """Abort a request to a URL the lists refuse before Chromium connects (``ERR_BLOCKED_BY_CLIENT``).

        A clearer refusal than the proxy's, which stays the boundary for what a route never sees:
        redirect hops, names that resolve to denied addresses, the node's own endpoints.
        """
        assert self.url_policy is not None
        if self.url_policy().check(route.request.url) is not None:
            await route.abort("blockedbyclient")
        else:
            await route.fallback()

    async def _guard_websocket(self, socket: WebSocketRoute) -> None:
        """A WebSocket to a refused URL is closed before anything reaches its server."""
        assert self.url_policy is not None
        if self.url_policy().check(socket.url) is not None:
            await socket.close(code=1008, reason="refused by the URL policy")
        else:
            socket.connect_to_server()

    @property
    def running(self) -> bool:
        """Whether Chromium is up (it is restarted when it dies)."""
        return self._browser is not None and self._browser.is_connected()

    async def needs_user(self, tab_id: int) -> dict[str, Any]:
        """Whether the tab shows something only a person can do: ``sign_in``, ``human_check``.

        A read: it looks at the page and changes nothing. ``evidence`` says what was seen.
        """
        try:
            hint = await self.page(tab_id).evaluate(_NEEDS_USER_PROBE)
        except PlaywrightError:
            hint = None
        if not isinstance(hint, dict):
            return {"needs_user": False, "reason": None, "evidence": None}
        return {"needs_user": True, "reason": hint.get("reason"), "evidence": hint.get("evidence")}

    def page(self, tab_id: int) -> Page:
        """The Playwright page of an open tab; raises :class:`KitsuneError` (``tab_closed``)."""
        page = self._pages.get(tab_id)
        if page is None or page.is_closed():
            raise KitsuneError("tab_closed", f"Tab {tab_id} is closed", state={"tabId": tab_id})
        return page

    async def tabs(self) -> list[dict[str, Any]]:
        """The open tabs: ``[{"tabId", "url", "title", "current"}]`` in id order."""

        async def describe(tab: int, page: Page) -> dict[str, Any] | None:
            try:
                title = await asyncio.wait_for(page.title(), 2.0)
            except (PlaywrightError, TimeoutError):
                title = ""
            if page.is_closed():
                return None
            return {"tabId": tab, "url": page.url, "title": title, "current": tab == self.current_tab}

        found = await asyncio.gather(*(describe(tab, page) for tab, page in sorted(self._pages.items())))
        return [tab for tab in found if tab is not None]

    # -- execute -------------------------------------------------------------------------------

    async def execute(self, command: Command, tab_id: int | None, timeout: float, *,
                      pause: Callable[[float], Awaitable[None]] | None = None) -> Outcome:
        """Run one action (never a block) on a tab (the current one when None) within ``timeout`` seconds.

        Never raises for what happens in the browser: every failure is an outcome. Actions on one
        tab are not serialized here: its tab actor runs its writes one at a time (``pause`` is
        awaited between the polls of a ``waitForResult``), and reads beside them.
        """
        try:
            return await self._execute(command, tab_id, float(timeout), pause or asyncio.sleep)
        except KitsuneError as e:
            return Failed(Failure.of(e))
        except Exception as e:  # a bug here must still answer as an outcome, never as an exception
            sent = is_write(command)
            failure = Failure(f"{command.action}: internal driver error ({type(e).__name__})", "internal", False)
            return Unknown(failure) if sent else Failed(failure)

    async def _execute(self, command: Command, tab_id: int | None, timeout: float,
                       pause: Callable[[float], Awaitable[None]]) -> Outcome:
        action = command.action
        if isinstance(command, (*BLOCKS, SyncBarrier)) or type(command) not in (*self._handlers, NewTab, GetTabs):
            return Failed(Failure(f"{action} is not an action the browser runs", "invalid_call", False))
        if own_references(command):
            return Failed(Failure(f"{action}: its ${{$N...}} references are not resolved", "invalid_call", False))
        if timeout <= 0:
            return Failed(Failure(f"Command timed out after {timeout:g}s", "timeout", True))
        if isinstance(command, NewTab):
            return await self._new_tab_action(command, timeout)
        if isinstance(command, GetTabs):
            return Done({"tabs": await self.tabs()})
        tab = tab_id if tab_id is not None else self.current_tab
        if tab is None:
            return Failed(Failure(f"{action}: there is no current tab; open one or name a tabId", "no_tab", False))
        page = self._pages.get(tab)
        if page is None or page.is_closed():
            return Failed(_closed(tab))
        deadline = asyncio.get_running_loop().time() + timeout
        run = _Run(command, tab, page, timeout, deadline, is_write(command), pause=pause)
        try:
            async with asyncio.timeout(run.remaining() + _GRACE):
                value, warning = await self._handlers[type(command)](run)
        except _Stop as stop:
            return self._stopped(run, stop)
        except TimeoutError:
            return self._timed_out(run)
        except PlaywrightError as e:
            return self._translate(run, e)
        return Done(value, warning)

    # -- classification ------------------------------------------------------------------------

    def _gone(self, run: _Run) -> bool:
        return run.page.is_closed() or self._pages.get(run.tab) is not run.page

    def _stopped(self, run: _Run, stop: _Stop) -> Failed | Unknown:
        state = dict(stop.state) if stop.state is not None else None
        if run.write and run.sent and stop.took_effect is not False:
            return Unknown(Failure(stop.message, stop.code, False, state))
        retryable = stop.retryable if stop.code != "tab_closed" else False
        return Failed(Failure(stop.message, stop.code, retryable, state))

    def _timed_out(self, run: _Run) -> Failed | Unknown:
        if self._gone(run):
            return self._stopped(run, _Stop("tab_closed", _closed_message(run), state={"tabId": run.tab}))
        message = f"Command timed out after {run.timeout:g}s"
        if not (run.write and run.sent):
            message += "; nothing was sent" if run.write else ""
        return self._stopped(run, _Stop("timeout", message, retryable=True))

    def _translate(self, run: _Run, error: PlaywrightError) -> Failed | Unknown:
        """A Playwright error as an outcome, with a message built here."""
        message = error.message or str(error)
        action, selector = run.action, run.selector
        if _is_closed_error(error) or self._gone(run):
            return self._stopped(run, _Stop("tab_closed", _closed_message(run), state={"tabId": run.tab}))
        if isinstance(error, PlaywrightTimeoutError):
            return self._timed_out(run)
        if _is_navigation_error(message):
            text = (f"{action}: the page navigated away while the command ran" if run.sent
                    else f"{action}: the page navigated away before the command could run; nothing was sent")
            return self._stopped(run, _Stop("navigated", text, retryable=True))
        if "strict mode violation" in message:
            count = re.search(r"resolved to (\d+) elements", message)
            many = f"{count.group(1)} elements" if count else "several elements"
            return self._stopped(run, _Stop("ambiguous_selector", f"{action}: selector {selector!r} matches {many}; "
                                                                  "it must match one", took_effect=False))
        if _is_selector_error(message):  # Playwright parses and resolves selectors before it acts
            return self._stopped(run, _Stop("invalid_selector", f"{action}: invalid selector {selector!r}",
                                            took_effect=False))
        if any(s in message for s in _WRONG_ELEMENT):  # Playwright checks these before it acts
            return self._stopped(run, _Stop("wrong_element", f"{action}: {selector!r} is not an element "
                                                             f"{action} can act on; nothing was sent",
                                            took_effect=False))
        detail = ""
        if not isinstance(run.command, _SECRET_ACTIONS):
            line = _first_line(message)[:160]
            if line and not any(secret in line for secret in secret_values(run.command)):
                detail = f" ({line})"
        text = f"{action}: the browser reported an error{detail}"
        return self._stopped(run, _Stop("browser_error", text, retryable=not run.write))

    async def _ready_element(self, run: _Run, locator: Locator, attempt: Callable[[float], Awaitable[Any]],
                             what: str) -> None:
        """Wait until ``attempt`` (a check that sends nothing) passes; else fail, saying nothing was sent."""
        try:
            await attempt(run.ms())
        except PlaywrightTimeoutError:
            raise await self._missing(run, locator, what) from None

    async def _pointer_write(self, run: _Run, locator: Locator, action: Callable[[float], Awaitable[Any]]) -> None:
        """Run a Playwright pointer action (a click) as one call, and tell from its call log, when it
        fails, whether it was sent: one round trip instead of a trial run followed by the action.

        ``run.sent`` is True while it runs (a timeout of the backstop, which has no call log, is
        Unknown); a failure whose call log shows the input was never dispatched is Failed, with
        nothing sent (see :func:`_pointer_sent`).
        """
        run.sent = True
        try:
            await action(run.ms())
        except PlaywrightError as e:
            if _pointer_sent(e.message or ""):
                raise
            run.sent = False
            if isinstance(e, PlaywrightTimeoutError):
                raise await self._missing(run, locator, "visible, enabled and stable") from None
            raise

    async def _missing(self, run: _Run, locator: Locator, what: str) -> _Stop:
        """Why an element wait timed out: no element at all, or one that never became ``what``."""
        if self._gone(run):
            return _Stop("tab_closed", _closed_message(run), state={"tabId": run.tab})
        try:
            count = await asyncio.wait_for(locator.count(), _PROBE_TIMEOUT)
        except (PlaywrightError, TimeoutError):
            count = -1
        timeout = f"{run.timeout:g}s"
        if count == 0:
            return _Stop("not_found", f"{run.action}: no element matches {run.selector!r} after {timeout}"
                                      + ("; nothing was sent" if run.write else ""), retryable=True)
        return _Stop("not_actionable", f"{run.action}: {run.selector!r} was not {what} within {timeout}"
                                       + ("; nothing was sent" if run.write else ""), retryable=True)

    async def _within(self, run: _Run, awaitable: Awaitable[T]) -> T:
        """Await something without a timeout of its own (an evaluation) within the command's time."""
        async with asyncio.timeout(max(0.001, run.remaining())):  # no task of its own, unlike wait_for
            return await awaitable

    async def _editable(self, run: _Run) -> Locator:
        assert run.selector is not None
        locator = run.page.locator(run.selector)
        await self._ready_element(run, locator, lambda ms: locator.wait_for(state="visible", timeout=ms), "visible")
        if not await locator.is_editable(timeout=run.ms()):
            raise _Stop("not_editable", f"{run.action}: {run.selector!r} is not editable"
                                        + ("; nothing was sent" if run.write else ""), retryable=True)
        return locator

    # -- navigation and tabs -------------------------------------------------------------------

    async def _goto(self, run: _Run, url: str, wait_until: str) -> tuple[dict[str, Any], str | None]:
        """Navigate; a navigation that fails has settled (its error page committed) before this answers."""
        page, refusals = run.page, self._proxy.refusals
        error_page = asyncio.Event()

        def on_navigated(frame: Any) -> None:
            if frame == page.main_frame and frame.url.startswith(_ERROR_PAGE):
                error_page.set()

        run.sent = True
        page.on("framenavigated", on_navigated)
        try:
            response = await page.goto(url, wait_until=wait_until,  # type: ignore[arg-type]
                                       timeout=run.ms())
        except PlaywrightError as e:
            if _is_closed_error(e) or isinstance(e, PlaywrightTimeoutError):
                raise
            message = e.message or str(e)
            net = _net_error(message)
            if net not in (None, "ERR_ABORTED"):
                # Chromium commits an error page after the failure: a navigation sent before that
                # commit would be reported interrupted by it, although it goes on and takes effect.
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(min(run.remaining(), _SETTLE_TIMEOUT)):
                        await error_page.wait()
                with contextlib.suppress(PlaywrightError):
                    await page.wait_for_load_state("load", timeout=run.ms())
            if net == "ERR_BLOCKED_BY_CLIENT" or (net == "ERR_TUNNEL_CONNECTION_FAILED"
                                                  and self._proxy.refusals > refusals):
                raise _Stop("url_denied", f"{run.action}: the URL policy stopped this navigation on its way",
                            took_effect=False) from None
            if net in _UNSENT_NET_ERRORS:
                raise _Stop("navigation_failed", f"{run.action}: net::{net}; nothing reached the server",
                            retryable=True, took_effect=False) from None
            if "invalid URL" in message or "Invalid url" in message or "Cannot navigate to" in message:
                raise _Stop("invalid_parameter", f"{run.action}: the URL is not one the browser can load",
                            took_effect=False) from None
            if net == "ERR_ABORTED" or _is_navigation_error(message):
                raise _Stop("navigated", f"{run.action}: the navigation was interrupted") from None
            if net is not None:
                raise _Stop("navigation_failed", f"{run.action}: net::{net}") from None
            raise
        finally:
            page.remove_listener("framenavigated", on_navigated)
        refused = self._proxy_answer(response)
        if refused == "unreachable":
            raise _Stop("navigation_failed", f"{run.action}: the server did not answer; nothing reached it",
                        retryable=True, took_effect=False)
        if refused is not None:
            raise _Stop("url_denied", f"{run.action}: the URL policy stopped this navigation on its way "
                                      f"({refused})", took_effect=False, state={"reason": refused})
        status = response.status if response is not None else None
        warning = f"HTTP status {status}" if status is not None and status >= 400 else None
        return {"url": run.page.url, "status": status}, warning

    def _proxy_answer(self, response: Any) -> str | None:
        """The reason the node's proxy answered a navigation itself (a refusal, ``unreachable``), or None."""
        if response is None:
            return None
        marker, _, reason = response.headers.get(PROXY_HEADER, "").partition(" ")
        return reason if marker == self._proxy.marker and reason else None

    async def _navigate(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Navigate, run.command)
        assert isinstance(command.url, str)
        return await self._goto(run, command.url, command.wait_until)

    async def _new_tab_action(self, command: NewTab, timeout: float) -> Outcome:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout
        tab = await self._open_window(timeout)
        if not isinstance(tab, int):
            return tab
        self.current_tab = tab
        page = self._pages.get(tab)
        if page is None:
            return Unknown(Failure(f"newTab: tab {tab} closed as it opened", "tab_closed", False, {"tabId": tab}))
        if command.url is None:
            return Done({"tabId": tab, "url": page.url})
        assert isinstance(command.url, str)
        run = _Run(command, tab, page, timeout, deadline, True, sent=True)
        outcome: Failed | Unknown
        try:
            async with asyncio.timeout(run.remaining() + _GRACE):
                value, warning = await self._goto(run, command.url, "load")
        except _Stop as stop:
            if stop.took_effect is False:  # nothing reached the server: no tab is left behind either
                await self.close_tab(tab)
                return Failed(Failure(stop.message, stop.code, stop.retryable))
            outcome = self._stopped(run, stop)
        except TimeoutError:
            outcome = self._timed_out(run)
        except PlaywrightError as e:
            outcome = self._translate(run, e)
        else:
            return Done({"tabId": tab, "url": value["url"]}, warning)
        failure = outcome.failure
        return type(outcome)(Failure(failure.error, failure.code, failure.retryable, {"tabId": tab}))

    async def _close_tab_action(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        run.sent = True
        await run.page.close()
        self._forget(run.tab)
        return {"tabId": run.tab}, None

    async def _switch_tab(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        run.sent = True
        await self._within(run, run.page.bring_to_front())
        self.current_tab = run.tab
        return {"tabId": run.tab}, None

    # -- element actions -----------------------------------------------------------------------

    async def _click(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Click, run.command)
        assert run.selector is not None
        locator = run.page.locator(run.selector)
        await self._pointer_write(run, locator, lambda ms: locator.click(
            button=command.button, click_count=command.click_count, timeout=ms))
        return {}, None

    async def _type(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Type, run.command)
        assert isinstance(command.text, str)
        locator = await self._editable(run)
        run.sent = True
        await locator.press_sequentially(command.text, timeout=run.ms())
        if command.submit is True:
            await locator.press("Enter", timeout=run.ms())
        return {}, None

    async def _fill(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Fill, run.command)
        assert isinstance(command.value, str)
        locator = await self._editable(run)
        run.sent = True
        await locator.fill(command.value, timeout=run.ms())
        return {}, None

    async def _select(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Select, run.command)
        wanted = [str(v) for v in command.values]
        assert run.selector is not None
        locator = run.page.locator(run.selector)
        await self._ready_element(run, locator, lambda ms: locator.wait_for(state="visible", timeout=ms), "visible")
        check = await locator.evaluate(_OPTIONS_JS, wanted, timeout=run.ms())
        if check.get("error") == "not_select":
            raise _Stop("wrong_element", f"select: {run.selector!r} is not a <select>; nothing was sent")
        if check["missing"]:
            raise _Stop("option_not_found", f"select: {run.selector!r} has no option with value or label "
                                            f"{check['missing'][0]!r}; nothing was sent", retryable=True)
        if len(wanted) > 1 and not check["multiple"]:
            raise _Stop("invalid_parameter", f"select: {run.selector!r} takes one option, not {len(wanted)}; "
                                             "nothing was sent")
        run.sent = True
        selected = await locator.select_option(wanted, timeout=run.ms())
        return {"selected": list(selected)}, None

    async def _press(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Press, run.command)
        assert isinstance(command.key, str)
        key = command.key
        try:
            if run.selector is not None:
                locator = run.page.locator(run.selector)
                await self._ready_element(run, locator, lambda ms: locator.wait_for(state="visible", timeout=ms),
                                          "visible")
                run.sent = True
                await locator.press(key, timeout=run.ms())
            else:
                run.sent = True
                await self._within(run, run.page.keyboard.press(key))
        except PlaywrightError as e:
            if "Unknown key" in (e.message or ""):
                raise _Stop("invalid_parameter", f"press: unknown key {key!r}",
                            took_effect=False if "+" not in key else None) from None
            raise
        return {}, None

    async def _check(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Check, run.command)
        checked = bool(command.checked)
        assert run.selector is not None
        locator = run.page.locator(run.selector)
        await self._pointer_write(run, locator, lambda ms: locator.set_checked(checked, timeout=ms))
        return {"checked": checked}, None

    async def _submit_form(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        assert run.selector is not None
        page = run.page
        locator = page.locator(run.selector)
        await self._ready_element(run, locator, lambda ms: locator.wait_for(state="attached", timeout=ms),
                                  "attached")
        committed = asyncio.Event()
        statuses: list[int] = []

        def on_navigated(frame: Any) -> None:
            if frame == page.main_frame:
                committed.set()

        def on_response(response: Any) -> None:
            with contextlib.suppress(PlaywrightError):
                if response.request.is_navigation_request() and response.frame == page.main_frame:
                    statuses.append(response.status)

        page.on("framenavigated", on_navigated)
        page.on("response", on_response)
        try:
            run.sent = True
            try:
                result = await locator.evaluate(_SUBMIT_JS, timeout=run.ms())
            except PlaywrightError as e:
                if not _is_navigation_error(e.message or "") or _is_closed_error(e):
                    raise
                result = "submitted"  # the navigation began before the evaluation answered
            if result == "no_form":
                raise _Stop("not_found", f"submitForm: {run.selector!r} is not a form or inside one; "
                                         "nothing was sent", took_effect=False)
            if result == "invalid":
                raise _Stop("invalid_form", "submitForm: the form did not pass validation; the browser "
                                            "did not submit it", took_effect=False)
            if result == "prevented":  # the page handles the submit itself
                return {"url": page.url, "navigated": False}, None
            await self._within(run, committed.wait())
            await page.wait_for_load_state("load", timeout=run.ms())
        finally:
            page.remove_listener("framenavigated", on_navigated)
            page.remove_listener("response", on_response)
        status = statuses[-1] if statuses else None
        warning = f"HTTP status {status}" if status is not None and status >= 400 else None
        return {"url": page.url}, warning

    # -- reads ---------------------------------------------------------------------------------

    async def _page_text(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(PageText, run.command)
        if run.selector is not None:
            locator = run.page.locator(run.selector)
            try:  # one element (the usual case): one round trip, that waits for it to be attached
                text = await locator.inner_text(timeout=run.ms())
            except PlaywrightTimeoutError:
                raise await self._missing(run, locator, "attached") from None
            except PlaywrightError as e:
                if "strict mode violation" not in (e.message or ""):
                    raise
                text = "\n".join(await self._within(run, locator.all_inner_texts()))  # several: all of them
        else:
            text = await self._within(run, run.page.evaluate(
                "() => document.body ? document.body.innerText : document.documentElement.innerText || ''"))
        truncated = len(text) > command.max_chars
        return {"text": text[: command.max_chars], "truncated": truncated}, None

    async def _find(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Find, run.command)
        text = command.text if isinstance(command.text, str) else None
        if run.selector is not None:
            locator = run.page.locator(run.selector)
            if text is not None:
                locator = locator.filter(has_text=text)
        else:
            assert text is not None
            locator = run.page.get_by_text(text)
        count = await self._within(run, locator.count())
        matches = await self._within(run, locator.evaluate_all(_FIND_JS, command.limit))
        count = max(count, len(matches))
        return {"count": count, "matches": matches}, None if count else "find matched nothing"

    async def _url(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        return {"url": run.page.url}, None

    async def _title(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        return {"title": await self._within(run, run.page.title())}, None

    async def _screenshot(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Screenshot, run.command)
        if run.selector is not None:
            locator = run.page.locator(run.selector)
            await self._ready_element(run, locator, lambda ms: locator.wait_for(state="visible", timeout=ms),
                                      "visible")
            image = await locator.screenshot(type="png", timeout=run.ms())
        else:
            image = await run.page.screenshot(type="png", full_page=command.full_page is True, timeout=run.ms())
        return {"image": base64.b64encode(image).decode("ascii"), "mimeType": "image/png"}, None

    async def _wait_for(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(WaitFor, run.command)
        page = run.page
        if run.selector is not None:
            locator = page.locator(run.selector).first
            try:
                await locator.wait_for(state=command.state, timeout=run.ms())
            except PlaywrightTimeoutError:
                raise _Stop("timeout", f"waitFor: {run.selector!r} was not {command.state} within "
                                       f"{run.timeout:g}s", retryable=True) from None
        if isinstance(command.url, str):
            try:
                await page.wait_for_url(command.url, wait_until=command.load_state or "load", timeout=run.ms())
            except PlaywrightTimeoutError:
                raise _Stop("timeout", f"waitFor: the URL did not match {command.url!r} within "
                                       f"{run.timeout:g}s", retryable=True) from None
        elif command.load_state is not None:
            try:
                await page.wait_for_load_state(command.load_state, timeout=run.ms())
            except PlaywrightTimeoutError:
                raise _Stop("timeout", f"waitFor: the page did not reach {command.load_state} within "
                                       f"{run.timeout:g}s", retryable=True) from None
        return {"url": page.url}, None

    # -- agent JavaScript ----------------------------------------------------------------------

    async def _evaluate_agent(self, run: _Run, code: str) -> Any:
        """Evaluate agent code: an expression (a function is called), or a function body."""
        run.sent = True
        try:
            try:
                return await self._within(run, run.page.evaluate(code))
            except PlaywrightError as e:
                message = e.message or ""
                if "SyntaxError" not in _first_line(message) or not any(
                        s in message for s in ("Illegal return statement", "await is only valid")):
                    raise
            # A function body (a bare `return` or `await` does not parse as a script); a SyntaxError is
            # raised before any of it runs, so evaluating it again as a function sends nothing twice.
            return await self._within(run, run.page.evaluate(f"async () => {{\n{code}\n}}"))
        except PlaywrightError as e:
            if _is_closed_error(e) or isinstance(e, PlaywrightTimeoutError) or self._gone(run):
                raise
            message = e.message or ""
            if _is_navigation_error(message):
                raise _Stop("navigated", f"{run.action}: the page navigated away while the code ran") from None
            name = _js_error_name(message)
            if name == "SyntaxError":
                raise _Stop("js_syntax_error", f"{run.action}: the code is not valid JavaScript (SyntaxError); "
                                               "nothing ran", took_effect=False) from None
            raise _Stop("js_error", f"{run.action}: the code threw {name}") from None

    async def _js(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Js, run.command)
        assert isinstance(command.code, str)
        return {"value": _jsonable(await self._evaluate_agent(run, command.code))}, None

    async def _wait_for_result(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(WaitForResult, run.command)
        assert isinstance(command.code, str) and isinstance(command.interval, float | int)
        while True:
            value = await self._evaluate_agent(run, command.code)
            if _truthy(value):
                return {"value": _jsonable(value)}, None
            if run.remaining() <= 0:
                raise TimeoutError
            await run.pause(min(float(command.interval), run.remaining()))

    # -- context state -------------------------------------------------------------------------

    async def _cookies(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Cookies, run.command)
        context = run.page.context
        if command.op == "get":
            found = await self._within(run, context.cookies())
            return {"cookies": [dict(c) for c in found]}, None
        if command.op == "clear":
            count = len(await self._within(run, context.cookies()))
            run.sent = True
            await self._within(run, context.clear_cookies())
            return {"cleared": count}, None
        cookies: list[dict[str, Any]] = []
        page_url = run.page.url if run.page.url.startswith(("http://", "https://")) else None
        for i, raw in enumerate(command.cookies):
            cookie = dict(raw)  # its fields and their types were checked when the command was parsed
            if "url" not in cookie and "domain" not in cookie:
                if page_url is None:
                    raise _Stop("invalid_parameter", f"cookies: cookie {i} needs url or domain (the tab shows "
                                                     "no http(s) page)")
                cookie["url"] = page_url
            if "domain" in cookie and "path" not in cookie:
                cookie["path"] = "/"
            cookies.append(cookie)
        run.sent = True
        try:
            await self._within(run, context.add_cookies(cookies))  # type: ignore[arg-type]
        except PlaywrightError as e:
            if _is_closed_error(e):
                raise
            raise _Stop("invalid_parameter", "cookies: the browser refused the cookies", took_effect=False) from None
        return {"set": len(cookies)}, None

    async def _storage(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Storage, run.command)
        key = command.key if isinstance(command.key, str) else None
        value = command.value if isinstance(command.value, str) else None
        if command.op != "get":
            run.sent = True
        result = await self._within(run, run.page.evaluate(_STORAGE_JS, [command.area, command.op, key, value]))
        error = result.get("error")
        if error == "unavailable":
            raise _Stop("storage_unavailable", f"storage: the page has no {command.area}Storage (its URL has "
                                               "no origin that may store)", took_effect=False)
        if error == "quota":
            raise _Stop("storage_full", f"storage: {command.area}Storage is full", took_effect=False)
        if error is not None:
            raise _Stop("storage_failed", f"storage: {command.op} failed in the page", took_effect=False)
        return dict(result), None

    async def _clipboard(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        command = cast(Clipboard, run.command)
        page = run.page
        run.sent = True
        if command.op == "write":
            assert isinstance(command.text, str)
            how = await self._within(run, page.evaluate(_CLIPBOARD_WRITE_JS, command.text))
            if how != "ok":  # headless or an insecure origin blocked the API: copy from a scratch field
                await self._scratch_keys(run, command.text, "ControlOrMeta+C")
            return {"written": True}, None
        read = await self._within(run, page.evaluate(_CLIPBOARD_READ_JS))
        if "text" in read:
            return {"text": read["text"]}, None
        return {"text": await self._scratch_keys(run, None, "ControlOrMeta+V") or ""}, None

    async def _scratch_keys(self, run: _Run, text: str | None, keys: str) -> str | None:
        page = run.page
        await self._within(run, page.evaluate(_SCRATCH_JS, [text]))
        try:
            await self._within(run, page.keyboard.press(keys))
        finally:
            result = await self._within(run, page.evaluate(_SCRATCH_DONE_JS))
        return cast(str | None, result)

    async def _download(self, run: _Run) -> tuple[dict[str, Any], str | None]:
        assert run.selector is not None and self.downloads_dir is not None
        page = run.page
        locator = page.locator(run.selector)
        waiter: asyncio.Task[PlaywrightDownload] = asyncio.ensure_future(
            page.wait_for_event("download", timeout=run.ms()))
        try:
            await self._pointer_write(run, locator, lambda ms: locator.click(timeout=ms))
            download = await waiter
        finally:
            if not waiter.done():
                waiter.cancel()
                with contextlib.suppress(BaseException):
                    await waiter
        path = _unique_path(self.downloads_dir, _safe_filename(download.suggested_filename))
        await self._within(run, download.save_as(path))
        if await self._within(run, download.failure()) is not None:
            raise _Stop("download_failed", "download: the download started but did not complete")
        size, sha256 = await asyncio.to_thread(_digest, path)
        return {"filename": path.name, "size": size, "sha256": sha256}, None


def _closed(tab: int) -> Failure:
    return Failure(f"Tab {tab} is closed", "tab_closed", False, {"tabId": tab})


def _closed_message(run: _Run) -> str:
    if run.write and run.sent:
        return f"{run.action}: tab {run.tab} closed while the command ran"
    return f"{run.action}: tab {run.tab} is closed" + ("; nothing was sent" if run.write else "")
