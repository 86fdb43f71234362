"""The driver's own JavaScript (never the agent's), read once from the ``.js`` files in ``js/``.

Each file holds one function expression that Playwright evaluates in the page (or, for the init
script, one script); the names below say what each one does.
"""

from __future__ import annotations

from importlib.resources import files

__all__ = [
    "BODY_TEXT", "CLIPBOARD_READ", "CLIPBOARD_WRITE", "FIND", "HEADINGS", "MODEL_CONTEXT", "NEEDS_USER",
    "NO_SERVICE_WORKERS", "SCRATCH_CLOSE", "SCRATCH_OPEN", "SELECT_OPTIONS", "STORAGE", "SUBMIT_FORM",
]


def _load(name: str) -> str:
    return (files(__package__) / "js" / f"{name}.js").read_text(encoding="utf-8").rstrip("\n")


BODY_TEXT = _load("body_text")
"""The page's visible text (``innerText`` of the body)."""
CLIPBOARD_READ = _load("clipboard_read")
"""Reads the clipboard through the page's API: ``{text}``, or ``{fallback: true}`` where the API is blocked."""
CLIPBOARD_WRITE = _load("clipboard_write")
"""Writes the clipboard through the page's API: ``'ok'``, or ``'fallback'`` where the API is blocked."""
FIND = _load("find")
"""Describes up to ``limit`` matched elements: tag, text (200 characters at most), visibility."""
HEADINGS = _load("headings")
"""The page's first ten headings (h1-h3), as text: what a task's checkpoint describes a page by."""
MODEL_CONTEXT = _load("model_context")
"""The init script of every document: ``navigator.modelContext`` (WebMCP site tools), speaking to the node only
through its binding (``driver.site_tools``)."""
NEEDS_USER = _load("needs_user")
"""Looks for a needs-user hint in a page: an explicit marker, a human check, a sign-in form."""
NO_SERVICE_WORKERS = _load("no_service_workers")
"""An init script: service workers could answer a page's requests where no URL list sees them, so none may
register."""
SCRATCH_OPEN = _load("scratch_open")
"""The clipboard's in-page fallback: a focused, selected scratch textarea for the real copy/paste keys."""
SCRATCH_CLOSE = _load("scratch_close")
"""Removes the scratch textarea, gives the focus back, and answers the text it held."""
SELECT_OPTIONS = _load("select_options")
"""Checks a ``<select>`` before selecting: the wanted values it has no option for, whether it is multiple."""
STORAGE = _load("storage")
"""One local/session storage operation (get, set, remove, clear), its errors as ``{error}``."""
SUBMIT_FORM = _load("submit_form")
"""Submits the form of an element (``requestSubmit``): submitted, prevented, invalid or no_form."""
