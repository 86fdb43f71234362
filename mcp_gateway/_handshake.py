"""``kitsune mcp``'s first answers, before the MCP SDK has loaded.

Loading the SDK takes about a second (its pydantic models), and a client configured with several
servers waits for each one's ``initialize`` and first ``tools/list``. So ``kitsune mcp`` starts
with a :class:`Front` that needs only the standard library and the tool table: a thread reads
stdin's newline-delimited JSON-RPC and answers ``initialize`` (the version negotiated as the SDK's
server does) and, once it answered that, ``tools/list``; meanwhile the bridge's groups are
resolved and the SDK and the gateway load (``mcp_gateway.stdio``, started by ``mcp_gateway.command``).
Once the gateway's loop runs (before the SDK has loaded), it also takes ``tools/call`` requests it can serve
exactly as the SDK would (:func:`servable_call`; ``mcp_gateway._front_calls`` runs them through the gateway's
own handlers), from a client that did not declare elicitation. Every other line waits, in order, for the SDK.

The hand-over: the gateway's SDK server reads the front's lines in order, first the ``initialize``
the front answered (its answer is dropped: the client has it) and whatever followed except the
``tools/list`` requests answered already; it writes through the front once the front has stopped.
"""

from __future__ import annotations

import fcntl
import json
import os
import queue
import secrets
import threading
import urllib.error
import urllib.request
from collections.abc import Callable
from importlib.metadata import version
from pathlib import Path
from typing import Any, BinaryIO

from mcp_gateway._listing import SCHEMA_URI
from mcp_gateway._tools import PAGE_MAX_CHARS, ToolSpec, enabled_tools

__all__ = ["GROUPS", "HANDSHAKE_VERSIONS", "INSTRUCTIONS", "PROTOCOL_VERSION_META_KEY", "Front", "TokenRefused",
           "bridge_caps", "bridge_tasks", "caps_from_env", "initialize_result", "instructions", "new_session",
           "read_token", "resources_result", "servable_call", "tools_result"]

GROUPS = frozenset({"core", "automation"})
"""Every capability group."""

HANDSHAKE_VERSIONS = ("2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25")
"""The protocol versions the SDK's server negotiates through ``initialize``, oldest first (its
``mcp_types.version.HANDSHAKE_PROTOCOL_VERSIONS``, which cannot be read without loading the SDK's
types; a test holds them equal). A client asking for another gets the newest."""
PROTOCOL_VERSION_META_KEY = "io.modelcontextprotocol/protocolVersion"
"""The ``_meta`` key of a request of the SDK's per-request era (``mcp_types.PROTOCOL_VERSION_META_KEY``; a test
holds them equal)."""

INSTRUCTIONS = (
    "Browser tools on real Chromium tabs. The loop: open a tab at a url or navigate (the answer is the page's "
    "snapshot), act on an element by its ref, read what changed in the write's answer; when the steps are known, "
    "send them in one browser_batch. An element is a ref from a snapshot or a selector (CSS or Playwright), not "
    "both. A tool acts on tabId, else your current tab (the last you opened or selected, a batch's newTab "
    "included); one that acts on a page also takes timeout, in seconds (30 by default). A direct write answers "
    "the page after it: what changed since your last snapshot, or the whole snapshot after a navigation, cut past "
    f"{PAGE_MAX_CHARS:,} characters where it says how to read on (snapshot=none: nothing). A write held for "
    "approval answers needs_user: with the user's approval call it again with its state.confirm_token. A result "
    "with call and resume_token is continued with browser_resume; nothing that ran ok is sent again. The whole "
    "command grammar is the resource kitsune://schema.")
"""What the server tells clients about its tools (``initialize``'s instructions, before their tasks)."""

_OPEN = ("owner", "follower", "expired")
"""The states of a task that is still to be done."""
_LISTED = 10
"""Open tasks named in the instructions at most."""

_CAPS_TIMEOUT = 10.0
"""Seconds a bridge gets to answer ``GET /api/caps``."""
_TASKS_TIMEOUT = 1.0
"""Seconds a bridge gets to answer ``GET /api/tasks`` for the instructions (``initialize`` waits for it)."""


def new_session() -> str:
    """A new MCP session's id, as requests carry it to the bridge (``X-Kitsune-Session``)."""
    return "mcp-" + secrets.token_hex(8)


def instructions(tasks: list[dict[str, Any]] | None) -> str:
    """``initialize``'s instructions: the tools, and the agent's open tasks (None: the bridge did not say)."""
    if tasks is None:
        return (f"{INSTRUCTIONS} Tasks: browser_task_get lists your tasks; browser_task_takeover continues one whose "
                "session was lost.")
    still = [task for task in tasks if task.get("state") in _OPEN]
    if not still:
        return f"{INSTRUCTIONS} Your agent has no open task (browser_task_create starts one)."
    named = "; ".join(f"{task.get('id')} {json.dumps(str(task.get('goal', ''))[:80])} ({task['state']})"
                      for task in still[:_LISTED])
    more = f" and {len(still) - _LISTED} more (browser_task_get lists them)" if len(still) > _LISTED else ""
    return (f"{INSTRUCTIONS} Your agent's open tasks: {named}{more}. A follower's task has a live owner: read it, do "
            "not write; an expired one is continued with browser_task_takeover.")


def caps_from_env(default: frozenset[str]) -> frozenset[str]:
    """``KITSUNE_CAPS`` (comma-separated groups), or ``default`` when it is not set."""
    raw = os.environ.get("KITSUNE_CAPS", "").strip()
    if not raw:
        return default
    caps = frozenset(c.strip() for c in raw.split(",") if c.strip())
    unknown = caps - GROUPS
    if unknown:
        raise ValueError(f"unknown capability group(s) in KITSUNE_CAPS: {', '.join(sorted(unknown))}")
    return caps


def read_token(token_file: str | None) -> str:
    """The agent's token for ``--bridge``: ``--token-file``, ``KITSUNE_TOKEN`` or ``~/.kitsune/token``."""
    if token_file:
        return Path(token_file).read_text().strip()
    if os.environ.get("KITSUNE_TOKEN", "").strip():
        return os.environ["KITSUNE_TOKEN"].strip()
    default = Path.home() / ".kitsune" / "token"
    if default.is_file():
        return default.read_text().strip()
    raise ValueError("--bridge needs the agent's token: --token-file FILE or KITSUNE_TOKEN")


class TokenRefused(Exception):
    """The bridge refused the agent's token: no call of this process can pass."""


def _bridge_json(url: str, token: str, session: str, path: str, timeout: float) -> tuple[Any, str | None]:
    """The bridge's JSON answer to ``GET path`` as the agent's MCP session (None when it gives none), and
    what went wrong, for a person (None when nothing did); :class:`TokenRefused` on a 401."""
    request = urllib.request.Request(url.rstrip("/") + path,
                                     headers={"Authorization": f"Bearer {token}", "X-Kitsune-Session": session})
    try:
        with urllib.request.urlopen(request, timeout=timeout) as answer:
            return json.loads(answer.read()), None
    except urllib.error.HTTPError as e:
        if e.code == 401:
            raise TokenRefused(f"the bridge at {url} refused the agent's token (401 unauthorized): check "
                               "--token-file, KITSUNE_TOKEN or ~/.kitsune/token") from None
        return None, f"the bridge at {url} answered GET {path} with HTTP {e.code}"
    except urllib.error.URLError as e:
        return None, f"the bridge at {url} cannot be reached ({e.reason})"
    except (OSError, ValueError) as e:
        return None, f"the bridge at {url} did not answer GET {path} ({type(e).__name__})"


def bridge_caps(url: str, token: str, session: str) -> tuple[frozenset[str] | None, str | None]:
    """The bridge's groups for the agent (``GET /api/caps``); None when it does not say (the gateway
    then lists its own groups, as it does when it asks itself), with what went wrong; :class:`TokenRefused`."""
    answer, problem = _bridge_json(url, token, session, "/api/caps", _CAPS_TIMEOUT)
    groups = answer.get("caps") if isinstance(answer, dict) else None
    return (frozenset(str(g) for g in groups) if isinstance(groups, list) else None), problem


def bridge_tasks(url: str, token: str, session: str) -> list[dict[str, Any]] | None:
    """The agent's tasks (``GET /api/tasks``), if the bridge answers at once; None when it does not say."""
    try:
        answer, _ = _bridge_json(url, token, session, "/api/tasks", _TASKS_TIMEOUT)
    except TokenRefused:
        return None  # bridge_caps says so
    tasks = answer.get("tasks") if isinstance(answer, dict) else None
    return [task for task in tasks if isinstance(task, dict)] if isinstance(tasks, list) else None


def initialize_result(requested: object, tasks: list[dict[str, Any]] | None = None) -> dict[str, Any]:
    """The result of ``initialize`` for a client asking for protocol version ``requested`` (``tasks``: the
    agent's, when the bridge said them)."""
    return {"protocolVersion": requested if requested in HANDSHAKE_VERSIONS else HANDSHAKE_VERSIONS[-1],
            "capabilities": {"resources": {"subscribe": False, "listChanged": False},
                             "tools": {"listChanged": False}},
            "serverInfo": {"name": "kitsune", "title": "Kitsune", "version": version("kitsune")},
            "instructions": instructions(tasks)}


def _listed(spec: ToolSpec) -> dict[str, Any]:
    listed = {"name": spec.name, "description": spec.description, "inputSchema": spec.listed}
    if spec.read_only:  # the hints' defaults say the rest: a write may be destructive and reaches the open web
        listed["annotations"] = {"readOnlyHint": True}
    return listed


def resources_result() -> dict[str, Any]:
    """The result of ``resources/list``: the command grammar's whole JSON Schema."""
    return {"resources": [{"uri": SCHEMA_URI, "name": "schema", "title": "Kitsune command grammar",
                           "description": "The JSON Schema of a command, a batch body and a parallel body, as "
                                          "GET /api/schema publishes it; the bridge's parser checks every call.",
                           "mimeType": "application/json"}]}


def tools_result(caps: frozenset[str]) -> dict[str, Any]:
    """The result of ``tools/list`` with the groups ``caps`` enabled."""
    return {"tools": [_listed(spec) for spec in enabled_tools(caps)]}


def _answerable(message: Any, method: str) -> bool:
    """Whether ``message`` is a well-formed ``method`` request the front may answer (anything doubtful,
    a malformed ``initialize`` included, is the SDK's to answer or refuse)."""
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and message.get("method") == method
            and isinstance(message.get("id"), int | str) and not isinstance(message.get("id"), bool)):
        return False
    params = message.get("params")
    if method == "tools/list":
        return params is None or (isinstance(params, dict) and set(params) <= {"cursor", "_meta"}
                                  and isinstance(params.get("cursor", ""), str)
                                  and isinstance(params.get("_meta", {}), dict))
    info = params.get("clientInfo") if isinstance(params, dict) else None
    return (isinstance(params, dict) and isinstance(params.get("protocolVersion"), str)
            and isinstance(params.get("capabilities"), dict) and isinstance(info, dict)
            and isinstance(info.get("name"), str) and isinstance(info.get("version"), str))


def servable_call(message: Any) -> bool:
    """Whether ``message`` is a ``tools/call`` the front may serve as the SDK would: well-formed (the SDK refuses
    anything else), without a ``progressToken`` (its notifications are the SDK's) nor any parameter but the name,
    the arguments and ``_meta``."""
    if not (isinstance(message, dict) and message.get("jsonrpc") == "2.0" and message.get("method") == "tools/call"
            and isinstance(message.get("id"), int | str) and not isinstance(message.get("id"), bool)
            and set(message) == {"jsonrpc", "id", "method", "params"}):
        return False
    params = message["params"]
    if not (isinstance(params, dict) and set(params) <= {"name", "arguments", "_meta"}
            and isinstance(params.get("name"), str)):
        return False
    meta = params.get("_meta", {})
    return (isinstance(params.get("arguments", {}), dict) and isinstance(meta, dict) and "progressToken" not in meta
            and PROTOCOL_VERSION_META_KEY not in meta)


def _cancelled(message: Any) -> object:
    """The id of the request a ``notifications/cancelled`` cancels (None for any other message)."""
    if not (isinstance(message, dict) and message.get("method") == "notifications/cancelled" and "id" not in message):
        return None
    params = message.get("params")
    return params.get("requestId") if isinstance(params, dict) else None


def _no_constant(name: str) -> Any:
    """Refuses ``NaN`` and ``Infinity``, which are no JSON: the SDK refuses a line with them, so the front leaves it."""
    raise ValueError(f"{name} is not JSON")


def _needs_answer(line: bytes) -> bool:
    """Whether a line left for the SDK needs its answer: anything but a well-formed notification."""
    try:
        message = json.loads(line, parse_constant=_no_constant)
    except ValueError:
        return True
    return not (isinstance(message, dict) and "method" in message and "id" not in message)


def _is_request(message: Any) -> bool:
    """Whether ``message`` is a JSON-RPC request (a notification or an answer is not)."""
    return isinstance(message, dict) and "method" in message and "id" in message


def _opens_modern(request: dict[str, Any]) -> bool:
    """Whether ``request``, a client's first, opens the SDK's per-request era (``server/discover`` and any
    request but ``initialize`` carrying the protocol version in its ``_meta``), as the SDK decides it."""
    params = request.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return request.get("method") != "initialize" and isinstance(meta, dict) and PROTOCOL_VERSION_META_KEY in meta


class Front:
    """Answers ``initialize`` and ``tools/list`` on a JSON-RPC channel until the SDK takes it over;
    queues every other line, in order, for the SDK. A client that opens the per-request era (its first
    request a ``server/discover`` probe) is the SDK's whole: an ``initialize`` it sends after a probe that
    timed out gets the SDK's answer for that era, never the front's.

    ``tasks_pending``: ``initialize`` waits (1 s at most) for :meth:`know_tasks`, so that its
    instructions name the agent's open tasks. ``calls``: the gateway will serve the front's ``tools/call``
    (:meth:`serve_calls`): one that comes before it does waits for it (or for the SDK's taking over).
    """

    def __init__(self, reader: BinaryIO, writer: BinaryIO, *, tasks_pending: bool = False,
                 calls: bool = False) -> None:
        self._reader = reader
        self._writer = writer
        self._lock = threading.Lock()
        """Held while the front writes, and to take the channel over."""
        self._lines: queue.SimpleQueue[bytes | None] = queue.SimpleQueue()
        """Lines for the SDK (None at the end of input)."""
        self._caps: frozenset[str] | None = None
        self._caps_known = threading.Event()
        self._tasks: list[dict[str, Any]] | None = None
        self._tasks_known = threading.Event()
        if not tasks_pending:
            self._tasks_known.set()
        self._taken = False
        """Whether the front answers no more (the SDK took over, or serves the client's era whole, or input ended)."""
        self._handed = False
        """Whether the SDK took the channel over."""
        self._opened = False
        """Whether the client's first request came."""
        self._ready: Callable[[], None] = lambda: None
        self._ended: Callable[[], None] = lambda: None
        self.initialize_id: int | str | None = None
        """The id of the ``initialize`` the front answered, replayed to the SDK (None until then)."""
        self._elicits = False
        """Whether the client declared elicitation (its calls may prompt: the SDK's)."""
        self._start: Callable[[dict[str, Any]], None] | None = None
        self._cancel: Callable[[object], None] = lambda request_id: None
        self._wanted: Callable[[], None] = lambda: None
        self._asked = False
        """Whether a line left for the SDK needs its answer."""
        self._serving = threading.Event()
        if not calls:
            self._serving.set()

    @classmethod
    def on_stdio(cls, *, tasks_pending: bool = False, calls: bool = False) -> Front:
        """A front on the process's stdin and stdout, which it claims: file descriptors 0 and 1 then
        point at the null device and standard error, so that nothing else reads or writes the channel."""
        return cls(os.fdopen(_claimed(0, os.open(os.devnull, os.O_RDONLY)), "rb", closefd=False),
                   os.fdopen(_claimed(1, os.dup(2)), "wb", closefd=False), tasks_pending=tasks_pending,
                   calls=calls)

    def start(self) -> None:
        """Read the channel in a thread, answering what the front can."""
        threading.Thread(target=self._read, name="kitsune-mcp-in", daemon=True).start()

    def know_caps(self, caps: frozenset[str]) -> None:
        """The groups ``tools/list`` lists (those of the gateway that the bridge enables)."""
        self._caps = caps
        self._caps_known.set()

    def know_tasks(self, tasks: list[dict[str, Any]] | None) -> None:
        """The agent's tasks, for ``initialize``'s instructions (None: the bridge did not say)."""
        self._tasks = tasks
        self._tasks_known.set()

    def serve_calls(self, start: Callable[[dict[str, Any]], None], cancel: Callable[[object], None],
                    wanted: Callable[[], None]) -> None:
        """Have ``start`` called (on the reading thread) with each ``tools/call`` the front takes, ``cancel`` with the
        id of each request a ``notifications/cancelled`` names (which is also queued for the SDK), and ``wanted``
        when a line left for the SDK needs an answer (a request, or a line that is no notification)."""
        with self._lock:
            self._start, self._cancel, self._wanted = start, cancel, wanted
            asked = self._asked
        self._serving.set()
        if asked:  # before the gateway's loop ran
            wanted()

    def take_over(self) -> None:
        """The SDK answers from here on: the front writes no more (once a write in progress ended)."""
        with self._lock:
            self._taken = self._handed = True
        self._serving.set()

    def answer_call(self, line: bytes) -> bool:
        """Write the answer to a call the front took, unless the SDK took the channel over (then it is the SDK's
        writer's to write); whether it did."""
        with self._lock:
            if self._handed:
                return False
            self.write(line)
            return True

    def next_line(self, *, block: bool = True) -> bytes | None:
        """The next line for the SDK (waiting for one, or ``queue.Empty`` when there is none and not ``block``);
        None at the end of input."""
        return self._lines.get(block)

    def on_line(self, ready: Callable[[], None]) -> None:
        """Have ``ready`` called (on the reading thread) after each line queued for the SDK from now on."""
        self._ready = ready

    def on_early_end(self, ended: Callable[[], None]) -> None:
        """Have ``ended`` called (on the reading thread) if the input ends before the SDK took the channel over:
        the client left before anything but the front could answer it (the front answers nothing more)."""
        self._ended = ended

    @property
    def output(self) -> BinaryIO:
        """The channel the front writes (the SDK's, once it took over)."""
        return self._writer

    def write(self, line: bytes) -> None:
        """Write one message (a line of JSON, newline included) and flush it."""
        self._writer.write(line)
        self._writer.flush()

    def _read(self) -> None:
        try:
            for line in self._reader:
                if not self._answered(line):
                    self._lines.put(line)
                    self._ready()
                    if not self._handed and _needs_answer(line):
                        with self._lock:
                            self._asked, wanted = True, self._wanted
                        wanted()
        finally:
            with self._lock:
                early, self._taken = not self._handed, True
            if early:
                self._ended()
            self._lines.put(None)
            self._ready()

    def _answered(self, line: bytes) -> bool:
        """Answer ``line`` if the front may; whether it did (an ``initialize`` is also queued, to replay)."""
        if self._taken:
            return False
        try:
            message = json.loads(line, parse_constant=_no_constant)
        except ValueError:
            return False
        if not self._opened and _is_request(message):
            self._opened = True
            if _opens_modern(message):  # the SDK serves the era this request opens: everything is the SDK's
                self._taken = True
                return False
        if self.initialize_id is None and _answerable(message, "initialize"):
            self._elicits = "elicitation" in message["params"]["capabilities"]
            self._lines.put(line)
            self._tasks_known.wait(_TASKS_TIMEOUT)
            return self._answer(message, initialize_result(message["params"]["protocolVersion"], self._tasks),
                                initialize=True)
        if self.initialize_id is not None and _answerable(message, "tools/list"):
            self._caps_known.wait()
            assert self._caps is not None
            return self._answer(message, tools_result(self._caps))
        if self.initialize_id is not None and not self._elicits and servable_call(message):
            return self._took(message)
        if (request_id := _cancelled(message)) is not None:
            self._cancel(request_id)
        return False

    def _took(self, call: dict[str, Any]) -> bool:
        """Have the gateway serve ``call``, unless the SDK serves it (there is no gateway loop to serve it)."""
        self._serving.wait()
        with self._lock:
            if self._taken or self._start is None:
                return False
            self._start(call)
            return True

    def _answer(self, request: dict[str, Any], result: dict[str, Any], *, initialize: bool = False) -> bool:
        with self._lock:
            if self._taken:
                return initialize  # the SDK answers (an initialize is queued already: it answers there)
            self.write(json.dumps({"jsonrpc": "2.0", "id": request["id"], "result": result}).encode() + b"\n")
            if initialize:
                self.initialize_id = request["id"]
            return True


def _claimed(fd: int, diversion: int) -> int:
    """A private duplicate of ``fd``, which then points at ``diversion`` (closed here)."""
    private = fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, 3)
    os.dup2(diversion, fd)
    os.close(diversion)
    return private
