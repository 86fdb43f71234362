"""The Playwright driver: runs actions on real Chromium tabs and says truthfully what happened.

- :mod:`.chromium`: :class:`ChromiumBrowser`, what the node and the tab actors use;
- :mod:`.process`: the Chromium binary, its flags and its first launch (Playwright alone: no action table);
- :mod:`.launch`: the Chromium process, launched and restarted;
- :mod:`.tabs`: the tab registry (ids, pages, windows, CDP targets);
- :mod:`.guard`: the URL guard (the node's forward proxy and the context's hooks);
- :mod:`.errors`: Playwright's errors as outcomes (``Failed``: nothing sent; ``Unknown``);
- :mod:`.actions`: the action table, over :mod:`.navigation`, :mod:`.elements`, :mod:`.reads`
  and :mod:`.scripts`, each action a plain function of a :class:`~.run.Run`;
- :mod:`.page_js`: the driver's own in-page JavaScript, from ``js/*.js``.

Its names load as they are first asked for: ``kitsune serve`` begins Chromium's launch from
:mod:`.process` before the action table and the command language have loaded.
"""

from importlib import import_module
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from driver.chromium import ChromiumBrowser
    from driver.process import CHROMIUM_FLAGS, find_chromium

__all__ = ["CHROMIUM_FLAGS", "ChromiumBrowser", "find_chromium"]

_HOMES = {"ChromiumBrowser": "driver.chromium", "CHROMIUM_FLAGS": "driver.process", "find_chromium": "driver.process"}


def __getattr__(name: str) -> Any:
    """``ChromiumBrowser``, ``CHROMIUM_FLAGS`` or ``find_chromium``, from the module that defines it."""
    if name not in _HOMES:
        raise AttributeError(f"module 'driver' has no attribute {name!r}")
    return getattr(import_module(_HOMES[name]), name)
