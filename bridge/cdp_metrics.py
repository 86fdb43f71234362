"""``kitsune_cdp_methods``: the CDP methods a node's ``cdp`` and ``cdpEvents`` steps sent, by domain.

The domain label is one of a fixed set (``messages.cdp_methods.METRIC_DOMAINS``), any other ``other``; never a
method's parameters, a tab or an agent. Read from the driver's tally at each scrape.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client.core import CounterMetricFamily, Metric
from prometheus_client.registry import Collector

from messages.cdp_methods import METRIC_DOMAINS

__all__ = ["CdpMethods"]

DOMAINS = (*sorted(METRIC_DOMAINS), "other")


class CdpMethods(Collector):
    """The methods sent, read from ``node.browser.cdp.sent`` (a browser without CDP steps: none)."""

    def __init__(self, node: Any) -> None:
        self._node = node

    def describe(self) -> list[Metric]:
        return []  # nothing read at registration: the node is not started yet

    def collect(self) -> Iterator[Metric]:
        sent: Mapping[str, int] = getattr(getattr(self._node.browser, "cdp", None), "sent", {})
        family = CounterMetricFamily("kitsune_cdp_methods", "CDP methods sent by cdp steps, by domain (other: a "
                                     "domain outside the fixed set)", labels=["domain"])
        for domain in DOMAINS:
            family.add_metric([domain], sent.get(domain, 0))
        yield family
