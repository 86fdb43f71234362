"""A task's checkpoint: the context a session taking the task over receives, never authority.

Pure. :func:`build_checkpoint` keeps only whitelisted fields, each of a shape the node makes:

- free text (the goal, titles, headings, the agent's summary, URLs' paths): control characters
  become spaces, then every token-shaped string (``[A-Za-z0-9_-]{24,}``) and every secret given
  (the values typed through this node in the task's calls) becomes ``[redacted]``. Secrets
  shorter than :data:`MIN_SECRET` characters are not searched for: they would blank out words.
  A string in which a secret survives that (one overlapping the replacement) is dropped whole.
- URLs: scheme, host, port and path only (no user, query or fragment); for a scheme other than
  http(s), file and about, only the scheme (a ``data:`` URL's body is content).
- the agent's recent messages: ``{"role", "content"}``, ``role`` one of :data:`ROLES`, ``content``
  free text cut to :data:`MESSAGE_BYTES` (the newest :data:`MESSAGES` kept);
- the page's ``version``: a digest of its scrubbed URL, title and headings (:func:`page_version`),
  so that what resumes on a page can tell whether it is still the page the checkpoint was taken on;
- named values: ``action`` a command of the language, ``code`` a code of the contract,
  ``status`` a step's or a task's status, ``kind`` one of :data:`EVENT_KINDS`, numbers finite;
  any other value drops its field (or its step or event, when the field is required).

The whole is at most :data:`MAX_BYTES` of JSON: the oldest steps, events and messages go first,
then the summary is cut. The field limits keep the rest within it, whatever the text (4 bytes a
character at most, once control characters are gone).
"""

from __future__ import annotations

import hashlib
import math
import re
from collections.abc import Iterable, Mapping
from typing import Any
from urllib.parse import urlsplit

import orjson

from core.tasks import MAX_GOAL
from core.tasks import STATUSES as TASK_STATUSES
from messages.commands import ACTIONS
from messages.errors import ERROR_CODES, KitsuneError
from messages.results import STATUSES as STEP_STATUSES

__all__ = ["EVENT_FIELDS", "EVENT_KINDS", "MAX_BYTES", "MESSAGES", "MESSAGE_BYTES", "MIN_SECRET", "REDACTED", "ROLES",
           "STEP_FIELDS", "TOKEN", "build_checkpoint", "checked_messages", "clean_url", "page_version", "scrub"]

MAX_BYTES = 16 * 1024
"""The checkpoint's JSON, at most."""
SUMMARY_BYTES = 4 * 1024
"""The agent's summary, at most (UTF-8)."""
GOAL_CHARS, TITLE_CHARS, URL_CHARS, HEADING_CHARS = MAX_GOAL, 200, 400, 200
HEADINGS, STEPS, EVENTS = 10, 20, 20
MESSAGES = 20
"""The agent's recent messages a checkpoint keeps (the newest), and a request records, at most."""
MESSAGE_BYTES = 1024
"""A message's content, at most (UTF-8; a longer one is cut)."""
ROLES = ("user", "assistant", "tool")
"""Who a recorded message is from."""
OUTLINE, OUTLINE_CHARS = 40, 160
"""The page's outline (its interactive snapshot, refs left out): lines, and characters a line, at most."""
MIN_SECRET = 4
"""Secrets shorter than this are not searched for."""
REDACTED = "[redacted]"
TOKEN = re.compile(r"[A-Za-z0-9_-]{24,}")
"""A token-shaped string."""
EVENT_KINDS = frozenset({"created", "forked", "call_started", "call_ended", "navigated", "tab_opened", "tab_closed",
                         "checkpointed", "expired", "taken_over", "resumed", "completed", "revoked"})
"""The kinds of event a checkpoint keeps."""
STEP_FIELDS = ("call", "path", "action", "tabId", "status", "code")
EVENT_FIELDS = ("time", "kind", "call", "tabId", "code", "status", "url")

_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")
_PATH = re.compile(r"\d{1,4}(?:\.\d{1,4}){0,15}")
_MAX_INT = 2**53 - 1
_KEPT_PATH_SCHEMES = ("http", "https", "file", "about")


class _Scrubber:
    """Blanks token-shaped strings and the given secrets out of text."""

    def __init__(self, secrets: Iterable[str]) -> None:
        self._secrets = sorted({s for s in secrets if isinstance(s, str) and len(s) >= MIN_SECRET},
                               key=len, reverse=True)  # the longest first, where one holds another
        self._pattern = re.compile("|".join([*map(re.escape, self._secrets), TOKEN.pattern]))

    def __call__(self, text: str) -> str:
        out = self._pattern.sub(REDACTED, _CONTROL.sub(" ", text))
        return "" if self._leaks(out) else out

    def _leaks(self, text: str) -> bool:
        return TOKEN.search(text) is not None or any(s in text for s in self._secrets)


def scrub(text: str, secrets: Iterable[str] = ()) -> str:
    """``text`` without token-shaped strings or ``secrets`` (see the module's rules)."""
    return _Scrubber(secrets)(text)


def clean_url(url: object, secrets: Iterable[str] = ()) -> str:
    """``url`` without user, query or fragment, its path scrubbed; ``""`` for what is no URL."""
    return _url(url, _Scrubber(secrets))


def checked_messages(value: object) -> list[dict[str, str]]:
    """The messages a request records, as given: a list of at most :data:`MESSAGES` ``{"role", "content"}``
    (``invalid_parameter`` otherwise, naming the bound in ``state.max``; scrubbed when the checkpoint is built)."""
    if value is None:
        return []
    if not isinstance(value, list) or len(value) > MESSAGES or not all(
            isinstance(m, Mapping) and set(m) == {"role", "content"} and _named(m["role"], ROLES)
            and isinstance(m["content"], str) for m in value):
        raise KitsuneError("invalid_parameter", f"messages must be a list of at most {MESSAGES} objects "
                           '{"role": "user"|"assistant"|"tool", "content": string}',
                           state={"param": "messages", "max": MESSAGES})
    return [{"role": m["role"], "content": m["content"]} for m in value]


def page_version(page: Mapping[str, Any]) -> str:
    """The version of a page as a checkpoint describes it: 16 hex digits of a digest of its URL, title and
    headings (the checkpoint's own, already scrubbed: the same page reads the same version)."""
    text = orjson.dumps([page.get("url", ""), page.get("title", ""), page.get("headings", [])])
    return hashlib.sha256(text).hexdigest()[:16]


def build_checkpoint(goal: object, began: object, page: object, steps: object, events: object,
                     summary: object, status: object, secrets: Iterable[str], messages: object = ()) -> dict[str, Any]:
    """The checkpoint of a task, from what the node knows of it (any value: the shapes are checked here).

    ``began`` and ``page`` are ``{"url", "title"}`` and ``{"url", "title", "headings", "outline"}``; ``steps``,
    ``events`` and ``messages`` are oldest first (the newest :data:`STEPS`, :data:`EVENTS` and :data:`MESSAGES`
    are kept)."""
    clean = _Scrubber(secrets)
    begun, seen = _mapping(began), _mapping(page)
    headings = seen.get("headings")
    described: dict[str, Any] = {
        "url": _url(seen.get("url"), clean), "title": _text(seen.get("title"), clean, TITLE_CHARS),
        "headings": [h for h in (_text(h, clean, HEADING_CHARS) for h in _items(headings)) if h][:HEADINGS],
        "outline": [o for o in (_text(o, clean, OUTLINE_CHARS) for o in _items(seen.get("outline"))) if o][:OUTLINE]}
    out: dict[str, Any] = {
        "goal": _text(goal, clean, GOAL_CHARS),
        "began": {"url": _url(begun.get("url"), clean), "title": _text(begun.get("title"), clean, TITLE_CHARS)},
        "page": {**described, "version": page_version(described)},
        "steps": [s for s in map(_step, _items(steps)) if s is not None][-STEPS:],
        "events": [e for e in (_event(e, clean) for e in _items(events)) if e is not None][-EVENTS:],
        "messages": [m for m in (_message(m, clean) for m in _items(messages)) if m is not None][-MESSAGES:],
        "summary": _cut_bytes(clean(summary) if isinstance(summary, str) else "", SUMMARY_BYTES),
        "status": status if _named(status, TASK_STATUSES) else None,
    }
    return _bounded(out)


def _bounded(out: dict[str, Any]) -> dict[str, Any]:
    """``out`` within :data:`MAX_BYTES`: the oldest of the longest list of steps, events and messages dropped
    while it is over, then the page's outline from its end, then the summary cut to what fits."""
    lists = ("steps", "events", "messages")
    while _size(out) > MAX_BYTES and any(out[name] for name in lists):
        longest = max(lists, key=lambda name: len(out[name]))
        out[longest] = out[longest][1:]
    while _size(out) > MAX_BYTES and out["page"]["outline"]:
        out["page"]["outline"] = out["page"]["outline"][:-1]
    if _size(out) > MAX_BYTES:
        summary = out["summary"].encode()
        low, high = 0, len(summary)  # the longest prefix that fits: low fits, high + 1 does not
        while low < high:
            middle = (low + high + 1) // 2
            out["summary"] = summary[:middle].decode("utf-8", "ignore")
            low, high = (middle, high) if _size(out) <= MAX_BYTES else (low, middle - 1)
        out["summary"] = summary[:low].decode("utf-8", "ignore")
    return out


def _step(value: object) -> dict[str, Any] | None:
    """A step summary: call, path, action, tab and status (and code), or ``None`` if one is wrong."""
    step = _mapping(value)
    call, path, action, tab = step.get("call"), step.get("path"), step.get("action"), step.get("tabId")
    if _int(call) is None or not isinstance(path, str) or _PATH.fullmatch(path) is None \
            or not _named(action, ACTIONS) or not _named(step.get("status"), STEP_STATUSES) \
            or (tab is not None and _int(tab) is None):
        return None
    out = {"call": call, "path": path, "action": action, "tabId": tab, "status": step["status"]}
    if _named(step.get("code"), ERROR_CODES):
        out["code"] = step["code"]
    return out


def _event(value: object, clean: _Scrubber) -> dict[str, Any] | None:
    """An event: its time and kind, and those of its call, tab, code, status and URL that are right."""
    event = _mapping(value)
    time, kind = event.get("time"), event.get("kind")
    if not (_int(time) is not None or (isinstance(time, float) and math.isfinite(time) and time >= 0)) \
            or not _named(kind, EVENT_KINDS):
        return None
    out: dict[str, Any] = {"time": time, "kind": kind}
    for name in ("call", "tabId"):
        if _int(event.get(name)) is not None:
            out[name] = event[name]
    if _named(event.get("code"), ERROR_CODES):
        out["code"] = event["code"]
    if _named(event.get("status"), (*STEP_STATUSES, *TASK_STATUSES)):
        out["status"] = event["status"]
    if url := _url(event.get("url"), clean):
        out["url"] = url
    return out


def _message(value: object, clean: _Scrubber) -> dict[str, str] | None:
    """A recorded message: its role and its content scrubbed and cut, or ``None`` (a wrong shape, or empty)."""
    message = _mapping(value)
    role, content = message.get("role"), message.get("content")
    if not isinstance(role, str) or role not in ROLES or not isinstance(content, str):
        return None
    kept = _cut_bytes(clean(content), MESSAGE_BYTES)
    return {"role": role, "content": kept} if kept.strip() else None


def _url(value: object, clean: _Scrubber) -> str:
    if not isinstance(value, str):
        return ""
    try:
        parts = urlsplit(_CONTROL.sub("", value).strip())
        port = parts.port
    except ValueError:
        return ""
    scheme = parts.scheme.lower()
    if not scheme or scheme not in _KEPT_PATH_SCHEMES:
        return f"{scheme}:" if re.fullmatch(r"[a-z][a-z0-9+.-]{0,31}", scheme) else ""
    host = parts.hostname or ""
    host = f"[{host}]" if ":" in host else host
    where = f"//{host}{f':{port}' if port is not None else ''}" if parts.netloc or scheme == "file" else ""
    return _text(f"{scheme}:{where}{parts.path}", clean, URL_CHARS)


def _text(value: object, clean: _Scrubber, chars: int) -> str:
    return clean(value)[:chars] if isinstance(value, str) else ""


def _cut_bytes(text: str, limit: int) -> str:
    return text.encode()[:limit].decode("utf-8", "ignore")


def _int(value: object) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= _MAX_INT else None


def _named(value: object, names: Iterable[str]) -> bool:
    """``value`` is one of ``names`` (a string: nothing unhashable is looked up)."""
    return isinstance(value, str) and value in names


def _mapping(value: object) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _items(value: object) -> list[Any]:
    return list(value) if isinstance(value, list | tuple) else []


def _size(out: dict[str, Any]) -> int:
    return len(orjson.dumps(out))
