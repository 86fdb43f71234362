"""The operator console: one page for operators and SREs that shows the whole fleet (``GET /console``).

It shows the fleet's nodes; every tab with its node, agent, session, URL, title, thumbnail and a
Live View link; the calls in flight; the checkpoints held, as metadata only (never a token); the
sessions and their tombstones; every agent's tasks (goal, status, whether the lease is live; never
its session or checkpoint). The page is rendered on the server, and one small script of its own
(no framework, no CDN: it works offline) refreshes it by **polling** ``GET /console/state`` (JSON)
every 2 seconds; thumbnails refresh with it.

:mod:`~bridge.routes.console_auth` checks operators (a session cookie after signing in with a token or a
password, or a bearer token for scripts), :mod:`~bridge.routes.console_limits` counts failed secrets,
:mod:`~bridge.console.fleet` gathers each node's part over NATS, :mod:`~bridge.console.thumbs` takes
thumbnails, :mod:`~bridge.routes.console_page` renders the HTML and :mod:`~bridge.routes.console` serves it
all under ``/console``.
"""

from bridge.console.fleet import console_serving

__all__ = ["console_serving"]
