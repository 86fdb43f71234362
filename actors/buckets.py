"""The fleet's key-value buckets in JetStream, as a node makes them and ``actors.nats_admin`` provisions them, and the
names of its streams (the embedded server's permissions name them before the actors that write them load)."""

from __future__ import annotations

from nats.js.api import KeyValueConfig, StorageType

__all__ = ["AUDIT_STREAM", "AUDIT_SUBJECT", "EVENTS_STREAM", "EVENTS_SUBJECTS", "FLEET_BUCKET", "NODES_BUCKET",
           "NODE_TTL", "SESSIONS_BUCKET", "TABS_BUCKET", "TASKS_BUCKET", "fleet_bucket", "nodes_bucket",
           "sessions_bucket", "tabs_bucket", "tasks_bucket"]

FLEET_BUCKET = "KITSUNE_FLEET"
"""The fleet's counters (the next block of tab ids)."""
TABS_BUCKET = "KITSUNE_TABS"
"""The fleet's tabs: each tab's node, owner and session."""
NODES_BUCKET = "KITSUNE_NODES"
"""The nodes' heartbeats."""
TASKS_BUCKET = "KITSUNE_TASKS"
"""The agents' tasks and their leases."""
SESSIONS_BUCKET = "KITSUNE_SESSIONS"
"""The persistent sessions' states, sealed (``actors.session_vault``)."""
NODE_TTL = 30.0
"""Seconds a heartbeat stays in its bucket (a lost node's vanishes by itself)."""
AUDIT_STREAM = "KITSUNE_AUDIT"
AUDIT_SUBJECT = "kitsune.audit.entries"
"""The audit trail's stream and subject (``actors.audit_actor``)."""
EVENTS_STREAM = "KITSUNE_EVENTS"
EVENTS_SUBJECTS = "kitsune.events.>"
"""The step events' stream and subjects (``actors.event_store``)."""


def fleet_bucket() -> KeyValueConfig:
    return KeyValueConfig(bucket=FLEET_BUCKET, storage=StorageType.FILE)


def tabs_bucket() -> KeyValueConfig:
    return KeyValueConfig(bucket=TABS_BUCKET, storage=StorageType.FILE)


def nodes_bucket() -> KeyValueConfig:
    return KeyValueConfig(bucket=NODES_BUCKET, storage=StorageType.MEMORY, ttl=NODE_TTL)


def tasks_bucket() -> KeyValueConfig:
    return KeyValueConfig(bucket=TASKS_BUCKET, history=1, storage=StorageType.FILE)


def sessions_bucket() -> KeyValueConfig:
    return KeyValueConfig(bucket=SESSIONS_BUCKET, history=1, storage=StorageType.FILE)
