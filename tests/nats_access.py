"""How tests reach the session's NATS server: its URL and the credentials it asks for.

Every client of the server needs them: nodes (:meth:`NatsAccess.node_config`), buses and raw
nats-py clients, and ``kitsune serve`` processes (:meth:`NatsAccess.serve_settings` for their
configuration file, :meth:`NatsAccess.serve_env` for the password it names).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Any

import nats
from nats.aio.client import Client

from actors.bus import NatsBus
from actors.nats_connection import connect_options
from core.settings import NatsAuth, NatsConfig, NodeConfig

__all__ = ["PASSWORD_ENV", "NatsAccess"]

PASSWORD_ENV = "KITSUNE_TEST_NATS_PASSWORD"
"""The variable holding the password: set by :meth:`NatsAccess.serve_env`, read for an external server."""


@dataclass(frozen=True)
class NatsAccess:
    """A NATS server with JetStream and the node user's credentials."""

    url: str
    auth: NatsAuth
    admin: NatsAuth | None = None
    """The administrator's credentials (streams changed or provisioned: ``actors.nats_admin``), if known."""

    def node_config(self, **fields: Any) -> NodeConfig:
        """A node configuration joining this server."""
        return NodeConfig(nats=NatsConfig(self.url, self.auth), **fields)

    async def bus(self, name: str = "kitsune-test", **options: Any) -> NatsBus:
        """A bus connected to this server."""
        return await NatsBus.connect(self.url, auth=self.auth, name=name, **options)

    async def client(self) -> Client:
        """A raw nats-py client of this server (JetStream, KV)."""
        return await nats.connect(self.url, **connect_options(self.auth))

    def serve_settings(self) -> dict[str, Any]:
        """The ``nats`` section of a ``kitsune serve`` configuration joining this server."""
        if self.auth.user is None:
            return {"url": self.url}
        return {"url": self.url, "user": self.auth.user, "password_env": PASSWORD_ENV}

    def serve_env(self) -> dict[str, str]:
        """The environment of a ``kitsune serve`` child: this one, with the password it is told of."""
        if self.auth.password is None:
            return dict(os.environ)
        return {**os.environ, PASSWORD_ENV: self.auth.password}
