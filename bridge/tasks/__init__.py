"""Tasks with leases: an agent's goal on its tabs, owned by one of its sessions.

- :mod:`core.tasks`: the record, the caller's view and state, the pure transitions and refusals;
- :mod:`core.task_checkpoint`: the bounded, whitelisted, scrubbed context a takeover receives;
- :mod:`actors.task_store`: the fleet's KV bucket (or memory), every change a compare-and-set, a sweeper;
- :mod:`actors.task_scopes`: each task where its scope keeps it (a ``tab`` task in its tab's node's memory);
- :mod:`bridge.tasks.fleet`: a request about a ``tab`` task another node keeps, sent to that node.
"""
