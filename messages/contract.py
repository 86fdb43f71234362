"""The contract's numbers, in one place: each names the spec rule it comes from."""

from __future__ import annotations

__all__ = ["APPROVAL_PROMPT_MAX", "CALL_TIMEOUT", "CHECKPOINT_CAPACITY", "CHECKPOINT_TOTAL_CAPACITY",
           "CHECKPOINT_TTL", "CONFIRM_PER_AGENT", "CONFIRM_TTL", "DRAIN_DEADLINE", "LIVE_VIEW_LINKS",
           "LIVE_VIEW_LINKS_PER_AGENT",
           "LIVE_VIEW_TTL", "MAX_CALL_TIMEOUT", "MAX_DRAIN_DEADLINE", "MAX_STEP_TIMEOUT", "RESUME_DEADLINE",
           "RESUME_WAIT", "RESUME_WAIT_MAX", "SESSION_MAX_EXEC_IDLE", "SESSION_MAX_IDLE", "SESSION_PERSIST_INTERVAL",
           "SESSION_SAVE_TIMEOUT", "SESSION_STATE_MAX",
           "SESSION_SWEEP_INTERVAL", "SETTLE", "STEP_TIMEOUT", "TASK_LEASE_TTL"]

CALL_TIMEOUT = 120.0
"""A container call's default deadline in seconds (spec: ``container_timeout``, default 120)."""
MAX_CALL_TIMEOUT = 3600.0
"""The largest container call ``timeout`` in seconds (spec: Limits)."""
STEP_TIMEOUT = 30.0
"""Seconds a command may take when it gives no ``timeout`` (spec: Commands, default step timeout)."""
MAX_STEP_TIMEOUT = 300.0
"""The largest command ``timeout`` in seconds: a resume's fixed deadline (spec: browser_resume)."""
SETTLE = 2.0
"""Seconds a tab may answer after a command's own timeout before the asker gives up (spec: deadlines)."""
RESUME_DEADLINE = 300.0
"""A resume's container deadline in seconds, whatever the original call allowed (spec: browser_resume)."""
RESUME_WAIT = 120.0
"""Seconds a direct call's resume waits for the user or the page by default (spec: browser_resume, wait)."""
RESUME_WAIT_MAX = 300.0
"""The largest ``wait`` of browser_resume; larger values are capped (spec: browser_resume)."""
CONFIRM_TTL = 120.0
"""Seconds a confirm token of ask-before-act stays valid (spec: Policy, confirm tokens)."""
CONFIRM_PER_AGENT = 64
"""Confirm tokens one agent holds unredeemed at most on a node: past it, its own oldest goes (never another's)."""
APPROVAL_PROMPT_MAX = CONFIRM_TTL - 5.0
"""Seconds an approval prompt stays open at most (115): its token must still be valid (spec: Direct calls)."""
CHECKPOINT_CAPACITY = 20
"""Each agent's checkpoints kept at most, the oldest pushed out first (spec: Checkpoints; per agent: issue 13)."""
CHECKPOINT_TOTAL_CAPACITY = 500
"""A node's checkpoints at most, of all its agents: past it, the oldest of the agent holding the most goes."""
CHECKPOINT_TTL = 1800.0
"""Seconds a checkpoint lives after its call or its last resume (spec: Checkpoints, 30 minutes)."""
SESSION_MAX_IDLE = 600.0
"""Seconds a reuse session may stay unused before the sweep closes it (issue 13: ``sessions.max_idle``)."""
SESSION_MAX_EXEC_IDLE = 86_400.0
"""Seconds a held call's one-shot session may stay unused (``sessions.max_exec_idle``; at least the checkpoint TTL)."""
SESSION_SWEEP_INTERVAL = 30.0
"""Seconds between two sweeps of idle sessions (``sessions.sweep_interval``)."""
SESSION_PERSIST_INTERVAL = 60.0
"""Seconds between two saves of a persistent session in use (``sessions.persist_interval``)."""
SESSION_STATE_MAX = 768 * 1024
"""Bytes a persistent session's state may take, sealed: a page that stores more leaves it unsaved (a NATS
message carries 1 MiB by default; ``session_state_too_large``)."""
SESSION_SAVE_TIMEOUT = 10.0
"""Seconds a persistent session's save may take (reading its state from Chromium, storing it): past them it is
left unsaved, and a node's stop or drain goes on."""

# The fleet
MAX_TABS = 256
"""Tabs one node takes at most, unless configured otherwise (``max_tabs``): past it, a ``newTab``
goes to another node of the fleet with room, or answers ``fleet_full``."""
MAX_SESSIONS = 64
"""Sessions (browser contexts) one node holds at most, of all agents, unless configured otherwise (``max_sessions``)."""
QUOTA_TABS = 32
"""Each agent's tabs at most, unless configured otherwise (``quotas.tabs``; issue 29)."""
QUOTA_SESSIONS = 8
"""Each agent's sessions at most, unless configured otherwise (``quotas.sessions``; issue 29)."""

# Live View
LIVE_VIEW_TTL = 300.0
"""Seconds a Live View link may be opened after it was made, unless configured otherwise (``live_view.ttl``)."""
LIVE_VIEW_LINKS_PER_AGENT = 8
"""Live View links one agent (or operator) may hold at once on a node (``live_view.max_links_per_agent``): a new
one revokes its oldest that no one has open, else answers ``live_view_quota``."""
LIVE_VIEW_LINKS = 256
"""Live View links a node keeps at once, every agent's (``live_view.max_links``): past it, ``live_view_quota``."""

# Site tools
CONTINUATION_TTL = 60.0
"""Seconds a site tool's continuation token may be redeemed after it was issued, unless configured otherwise
(``site_tools.continuation_ttl``; spec: continuation tokens, "around 60 seconds")."""

# Tasks
DRAIN_DEADLINE = 30.0
"""Seconds a draining node's calls in flight get to finish before they are interrupted, unless configured
otherwise (``drain_deadline``) or the drain names its own (issue 34)."""
MAX_DRAIN_DEADLINE = 86400.0
"""A drain's deadline at most."""

TASK_LEASE_TTL = 30.0
"""Seconds a task's lease lasts after its owner session was last heard from, unless configured otherwise
(``tasks.lease_ttl``; issue 17); a renewal writes only when less than half of it is left."""
