"""The HTTP edge: the app, its gate and the routes, a module per group, each over the services it
uses (``bridge.services``), which :func:`~bridge.routes.app.create_app` alone makes of the node.

:mod:`~bridge.routes.calls` container calls and resume, :mod:`~bridge.routes.actions` direct actions,
:mod:`~bridge.routes.tabs` tabs and their hints, :mod:`~bridge.routes.sessions` sessions,
:mod:`~bridge.routes.tasks` tasks, :mod:`~bridge.routes.live` Live View's page and socket,
:mod:`~bridge.routes.console` the operator console (its page, sign-in and limits beside it),
:mod:`~bridge.routes.about` the schema, capability groups, fleet and health.
:mod:`~bridge.routes.gate` lets a request in (tokens, sessions, capability groups declared beside
each route: :mod:`~bridge.routes.groups`), :mod:`~bridge.routes.requests` reads what every route
reads of a request, :mod:`~bridge.routes.responses` and :mod:`~bridge.routes.edges` answer.
"""
