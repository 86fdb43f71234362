"""Live View: a person sees a tab live and acts in it, then hands it back (``spec/browser-tools.md``).

:mod:`~bridge.live.links` keeps the links and controls, :mod:`~driver.screencast` speaks CDP,
:mod:`~bridge.live.viewer` is one connection (on the tab's node, or relayed to it over NATS),
:mod:`~bridge.live.views` the node's Live Views, :mod:`~bridge.routes.live` the page and WebSocket.
"""

from bridge.live.links import LiveRefusal
from bridge.live.views import OPERATOR, LiveViews

__all__ = ["OPERATOR", "LiveRefusal", "LiveViews"]
