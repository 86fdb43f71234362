"""A real 3-server NATS cluster for the tests that ask for it (fixture ``nats_cluster``, started once).

It runs ``deploy/nats/nats-server.conf``, as ``kitsune fleet`` does, whose node user may use the
subjects of fleet ``kitsune`` only: the nodes of these tests are of that fleet (one at a time per
test). A test that kills a server brings it back with :meth:`ClusterAccess.killed`, so that the
next test finds the cluster whole.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import nats
import pytest
from nats.aio.client import Client

from actors.nats_connection import connect_options
from core.settings import NodeConfig
from kitsune.fleet import FLEET, FleetError, NatsCluster, NatsMember
from tests.nats_access import NatsAccess

__all__ = ["ClusterAccess", "nats_cluster"]


@dataclass(frozen=True)
class ClusterAccess(NatsAccess):
    """The cluster's URLs and node user, and its servers."""

    cluster: NatsCluster = field(repr=False, kw_only=True)

    def node_config(self, **fields: Any) -> NodeConfig:
        """A node configuration of fleet ``kitsune`` joining the cluster."""
        return super().node_config(**{"fleet": FLEET, **fields})

    async def client(self) -> Client:
        """A raw nats-py client of the cluster (nats-py takes its servers as a list)."""
        return await nats.connect(self.url.split(","), **connect_options(self.auth))

    def member_of(self, client: Client) -> NatsMember:
        """The server ``client`` is connected to."""
        assert client.connected_url is not None and client.connected_url.port is not None
        return self.cluster.member_at(client.connected_url.port)

    @contextlib.contextmanager
    def killed(self, member: NatsMember) -> Iterator[None]:
        """``member``'s server killed with SIGKILL, then started again once the block ends, which waits
        until the cluster is whole."""
        self.cluster.kill(member)
        try:
            yield
        finally:
            self.cluster.restart(member)


@pytest.fixture(scope="session")
def nats_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterAccess]:
    """A 3-server NATS cluster with JetStream shared by the session's tests that ask for it."""
    cluster = NatsCluster(tmp_path_factory.mktemp("nats-cluster"))
    try:
        cluster.start()
    except FleetError as e:
        pytest.fail(f"the NATS cluster did not start: {e}", pytrace=False)
    try:
        yield ClusterAccess(cluster.url, cluster.auth, cluster.admin, cluster=cluster)
    finally:
        cluster.stop()
