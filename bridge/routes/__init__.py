"""The HTTP API's routes, a module per group, each over the services it uses (``bridge.services``):

:mod:`~bridge.routes.calls` container calls and resume, :mod:`~bridge.routes.actions` direct actions,
:mod:`~bridge.routes.tabs` tabs and their hints, :mod:`~bridge.routes.sessions` sessions,
:mod:`~bridge.routes.about` the schema, capability groups, fleet and health; the tasks' routes are
``bridge.tasks.routes``, Live View's ``bridge.live.routes``, the console's ``bridge.console.routes``.
:mod:`~bridge.routes.requests` reads what every route reads of a request.
"""
