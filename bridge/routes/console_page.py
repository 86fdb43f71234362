"""The console's HTML, rendered on the server: a table per section, every value escaped.

:data:`SECTIONS` says each table's columns once: the server renders the rows from them, and
``console.js`` renders the same rows from ``/console/state`` by the ``data-key`` and ``data-kind``
of each heading. A cell's kind says how its value shows: ``text``, ``flag`` (yes or blank),
``secs`` (a duration), ``list`` (comma-separated), ``thumb`` (the tab's thumbnail) and
``live`` (its Live View link).
"""

from __future__ import annotations

from html import escape
from importlib import resources
from typing import Any

__all__ = ["SECTIONS", "console_page", "login_page", "message_page"]

_SHELL = resources.files("bridge.console").joinpath("page.html").read_text(encoding="utf-8")

Column = tuple[str, str, str]
"""A column: the key of the row's value, its heading, its kind."""

SECTIONS: tuple[tuple[str, str, tuple[Column, ...]], ...] = (
    ("nodes", "Nodes", (("name", "Node", "text"), ("tabs", "Tabs", "text"), ("max_tabs", "Max tabs", "text"),
                        ("self", "This node", "flag"))),
    ("tabs", "Tabs", (("tabId", "Thumbnail", "thumb"), ("tabId", "Tab", "text"), ("node", "Node", "text"),
                      ("agent", "Agent", "text"), ("session", "Session", "text"), ("title", "Title", "text"),
                      ("url", "URL", "text"), ("held_by", "Held in Live View by", "text"),
                      ("tabId", "Live View", "live"))),
    ("tasks", "Tasks", (("id", "Task", "text"), ("agent", "Agent", "text"), ("goal", "Goal", "text"),
                        ("status", "Status", "text"), ("lease_live", "Lease live", "flag"),
                        ("lease_expires_in", "Lease ends in", "secs"), ("tabs", "Tabs", "list"),
                        ("age", "Age", "secs"))),
    ("takeovers", "Takeovers waiting for approval (this node)", (
        ("id", "Hold", "text"), ("agent", "Agent", "text"), ("session", "Session", "text"), ("task", "Task", "text"),
        ("force", "Force", "flag"), ("waiting", "Waiting for", "secs"), ("expires_in", "Expires in", "secs"),
        ("decide", "Decision", "decide"))),
    ("calls", "Calls in flight", (("node", "Node", "text"), ("call", "Call", "text"), ("kind", "Kind", "text"),
                                  ("agent", "Agent", "text"), ("resumed", "Resume", "flag"),
                                  ("age", "Running for", "secs"), ("steps", "Steps", "text"),
                                  ("running", "Running now", "list"))),
    ("checkpoints", "Checkpoints", (("node", "Node", "text"), ("call", "Call", "text"), ("agent", "Agent", "text"),
                                    ("status", "Status", "text"), ("code", "Code", "text"),
                                    ("attempts", "Resumes", "text"), ("age", "Kept for", "secs"),
                                    ("expires_in", "Expires in", "secs"), ("resuming", "Resuming", "flag"))),
    ("sessions", "Sessions", (("node", "Node", "text"), ("agent", "Agent", "text"), ("name", "Session", "text"),
                              ("mode", "Mode", "text"), ("tabs", "Tabs", "list"), ("age", "Age", "secs"),
                              ("idle", "Idle for", "secs"))),
    ("tombstones", "Closed sessions (tombstones)", (
        ("node", "Node", "text"), ("agent", "Agent", "text"), ("name", "Session", "text"), ("mode", "Mode", "text"),
        ("reason", "Reason", "text"), ("closed", "Closed for", "secs"))),
)


def _shown(kind: str, value: Any) -> str:
    """A value as its cell shows it (``console.js``'s ``shown`` says the same)."""
    if value is None:
        return "—"
    if kind == "flag":
        return "yes" if value else ""
    if kind == "secs":  # seconds, then minutes past 2 min, hours past 2 h
        seconds = round(value)
        return f"{seconds} s" if seconds < 120 else f"{seconds // 60} min" if seconds < 7200 else f"{seconds // 3600} h"
    if kind == "list":
        return ", ".join(str(item) for item in value)
    return str(value)


def _cell(kind: str, value: Any) -> str:
    if kind == "thumb":
        return f'<td><img class="thumb" alt="" data-tab="{int(value)}" src="/console/thumb/{int(value)}?r=0"></td>'
    if kind == "live":
        return f'<td><a href="/console/live/{int(value)}" target="_blank" rel="noopener">Live View</a></td>'
    if kind == "decide":
        hold = escape(str(value))
        return (f'<td><button type="button" data-hold="{hold}" data-approve="true">Approve</button> '
                f'<button type="button" data-hold="{hold}" data-approve="false">Deny</button></td>')
    return f"<td>{escape(_shown(kind, value))}</td>"


def _table(key: str, heading: str, columns: tuple[Column, ...], rows: list[dict[str, Any]]) -> str:
    heads = "".join(f'<th data-key="{k}" data-kind="{kind}">{escape(label)}</th>' for k, label, kind in columns)
    body = "".join("<tr>" + "".join(_cell(kind, row.get(k)) for k, _, kind in columns) + "</tr>" for row in rows)
    body = body or f'<tr><td class="none" colspan="{len(columns)}">none</td></tr>'
    return (f'<section><h2>{escape(heading)}</h2><table data-section="{key}"><thead><tr>{heads}</tr></thead>'
            f"<tbody>{body}</tbody></table></section>")


def _document(body: str) -> str:
    return _SHELL.replace("__BODY__", body)


def console_page(state: dict[str, Any], operator: str) -> str:
    """The console: who is signed in, and a table per section of ``state`` (``console.js`` refreshes it)."""
    missing = ", ".join(state["missing"])
    tables = "\n".join(_table(key, heading, columns, state[key]) for key, heading, columns in SECTIONS)
    return _document(
        f'<header><h1>Kitsune console</h1><p>Node <b>{escape(state["node"])}</b> · signed in as '
        f'<b id="operator">{escape(operator)}</b> · <span id="updated">as loaded</span> '
        f'<span id="missing">{escape(f"Not answering: {missing}" if missing else "")}</span></p>'
        '<form method="post" action="/console/logout"><button type="submit">Sign out</button></form></header>\n'
        f'<main>\n{tables}\n</main>\n<script src="/console/console.js"></script>')


def login_page() -> str:
    """The sign-in form: one field, a token or a password."""
    return _document(
        '<main class="narrow"><h1>Kitsune console</h1><form method="post" action="/console/login">'
        '<label>Token or password <input type="password" name="secret" autocomplete="current-password" '
        'required autofocus></label> <button type="submit">Sign in</button></form></main>')


def message_page(message: str, code: str | None = None) -> str:
    """A page that says one thing (a refusal, its error ``code`` in ``data-code``), with a way back."""
    marked = f' data-code="{escape(code)}"' if code else ""
    return _document(f'<main class="narrow"><h1>Kitsune console</h1><p id="message"{marked}>{escape(message)}</p>'
                     '<p><a href="/console">Back to the console</a></p></main>')
