"""The Playwright driver: runs actions on real Chromium tabs and says truthfully what happened.

- :mod:`.driver`: :class:`ChromiumBrowser`, what the node and the tab actors use;
- :mod:`.launch`: the Chromium process, launched and restarted;
- :mod:`.tabs`: the tab registry (ids, pages, windows, CDP targets);
- :mod:`.guard`: the URL guard (the node's forward proxy and the context's hooks);
- :mod:`.errors`: Playwright's errors as outcomes (``Failed``: nothing sent; ``Unknown``);
- :mod:`.actions`: the action table, over :mod:`.navigation`, :mod:`.elements`, :mod:`.reads`
  and :mod:`.scripts`, each action a plain function of a :class:`~.run.Run`;
- :mod:`.page_js`: the driver's own in-page JavaScript, from ``js/*.js``.
"""

from driver.chromium import ChromiumBrowser
from driver.launch import CHROMIUM_FLAGS, find_chromium

__all__ = ["CHROMIUM_FLAGS", "ChromiumBrowser", "find_chromium"]
