"""A node's tenant quotas set from its configuration, and their refusals counted (``driver.quotas``)."""

from __future__ import annotations

from collections.abc import Callable

from prometheus_client import CollectorRegistry, Counter

from core.policy import Policy
from core.quotas import Quota
from core.settings import NodeConfig
from driver.quotas import Quotas

__all__ = ["set_quotas"]


def set_quotas(quotas: Quotas, config: NodeConfig, policy_of: Callable[[str | None], Policy],
               registry: CollectorRegistry) -> None:
    """Give ``quotas`` the node's caps and each agent's own quotas (its policy's, as it is now), and count
    its refusals (``kitsune_tab_quota_refusals_total``: by quota, scope and what opened the tab)."""
    quotas.max_tabs = config.max_tabs
    quotas.max_sessions = config.max_sessions
    quotas.agents = config.agents

    def limit_of(agent: str, quota: Quota) -> int:
        policy = policy_of(agent)
        return policy.tab_quota if quota == "tabs" else policy.session_quota

    quotas.limit_of = limit_of
    refusals = Counter("kitsune_tab_quota_refusals", "Tabs and sessions refused past a quota (quota_exceeded), by "
                       "quota (tabs, sessions), scope (agent, node) and opener (newTab, popup)",
                       ["quota", "scope", "opener"], registry=registry)
    quotas.on_refused = lambda quota, scope, opener: refusals.labels(quota, scope, opener).inc()
