"""Per-agent policy in the configuration: what an agent entry sets, what it takes from the node,
the checkpoint and session limits, and errors that name their path; the node's policy of each agent."""

from __future__ import annotations

from pathlib import Path

import pytest

from core.policy import Policy
from core.settings import CheckpointConfig, SessionTimes, Settings
from core.url_policy import UrlPolicy
from kitsune.config import load_config
from messages.contract import CHECKPOINT_CAPACITY, CHECKPOINT_TTL
from messages.errors import KitsuneError

NODE = """
caps: [core, automation]
read_only: false
ask_before_act: true
urls: {allow: [shop.test], deny: [10.0.0.0/8]}
user_tabs_writable: true
max_checkpoints: 7
"""

AGENTS = """
agents:
  - {name: plain, token: plain-token-0123456789}
  - name: crawler
    token: crawler-token-0123456789
    read_only: true
    ask_before_act: false
    caps: [core]
    urls: {allow: ["*.docs.test"]}
    user_tabs_writable: false
    max_checkpoints: 3
  - name: narrow
    token: narrow-token-0123456789
    urls: {deny: []}
"""


def _load(tmp_path: Path, text: str, env: dict[str, str] | None = None) -> Settings:
    (tmp_path / "k.yaml").write_text(text)
    return load_config(tmp_path / "k.yaml", env or {})


def test_an_agent_sets_its_own_values_and_takes_the_nodes_for_the_rest(tmp_path: Path) -> None:
    config = _load(tmp_path, NODE + AGENTS)
    node = config.policy
    assert node == Policy(ask_before_act=True, urls=UrlPolicy(("shop.test",), ("10.0.0.0/8",)),
                          user_tabs_writable=True, caps=frozenset({"core", "automation"}), max_checkpoints=7)
    policies = config.agent_policies()
    assert set(policies) == {"crawler", "narrow"}  # plain sets nothing: it follows the node's policy
    assert policies["crawler"] == Policy(read_only=True, urls=UrlPolicy(("*.docs.test",), ("10.0.0.0/8",)),
                                         caps=frozenset({"core"}), max_checkpoints=3)
    assert policies["narrow"] == Policy(ask_before_act=True, urls=UrlPolicy(("shop.test",), ()),
                                        user_tabs_writable=True, caps=frozenset({"core", "automation"}),
                                        max_checkpoints=7)


def test_the_environment_changes_the_nodes_values_and_not_what_an_agent_set(tmp_path: Path) -> None:
    config = _load(tmp_path, AGENTS, {"KITSUNE_CAPS": "automation", "KITSUNE_READ_ONLY": "yes"})
    assert config.policy.caps == {"automation"} and config.policy.read_only
    crawler, narrow = config.agent_policies()["crawler"], config.agent_policies()["narrow"]
    assert (crawler.caps, crawler.read_only) == (frozenset({"core"}), True)
    assert (narrow.caps, narrow.read_only) == (frozenset({"automation"}), True)


def test_limits_and_sessions_have_the_specs_defaults_and_max_exec_idle_is_never_below_the_checkpoint_ttl(
        tmp_path: Path) -> None:
    defaults = load_config(None, {})
    assert defaults.node.checkpoints == CheckpointConfig(CHECKPOINT_TTL, CHECKPOINT_CAPACITY, 500)
    assert defaults.node.sessions == SessionTimes(600.0, 86_400.0, 30.0)
    config = _load(tmp_path, "max_checkpoints_total: 40\nsessions: {max_idle: 2.5, max_exec_idle: 60}\n",
                   {"KITSUNE_SESSIONS__SWEEP_INTERVAL": "0.5", "KITSUNE_MAX_CHECKPOINTS": "4"})
    assert (config.node.checkpoints.per_agent, config.node.checkpoints.total) == (4, 40)
    assert config.node.sessions == SessionTimes(2.5, CHECKPOINT_TTL, 0.5)


@pytest.mark.parametrize(("entry", "wrong"), [
    ("read_only: perhaps", "agents.1.read_only: "),
    ("ask_before_act: 1", "agents.1.ask_before_act: "),
    ("caps: [core, everything]", "agents.1.caps: unknown capability group(s): everything"),
    ("caps: core", "agents.1.caps: "),
    ("urls: {allow: ['a b']}", "agents.1.urls.allow: URL allow rule 'a b' is not a host"),
    ("urls: {deny: ['10.0.0.0/33']}", "agents.1.urls.deny: URL deny rule"),
    ("urls: {denied: [a.test]}", "agents.1.urls.denied: unknown key"),
    ("user_tabs_writable: 'no'", "agents.1.user_tabs_writable: "),
    ("max_checkpoints: 0", "agents.1.max_checkpoints: Input should be greater than 0"),
    ("max_checkpoints: 501", "agents.1.max_checkpoints: more than max_checkpoints_total (500)"),
    ("max_checkpoint: 5", "agents.1.max_checkpoint: unknown key"),
])
def test_a_bad_agent_entry_is_refused_with_its_path(tmp_path: Path, entry: str, wrong: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        _load(tmp_path, "agents:\n  - {name: a, token: aaaaaaaaaaaaaaaa}\n"
                        f"  - {{name: b, token: bbbbbbbbbbbbbbbb, {entry}}}\n")
    assert caught.value.code == "invalid_config"
    assert caught.value.message.startswith(wrong), caught.value.message


@pytest.mark.parametrize(("text", "wrong"), [
    ("sessions: {max_idle: 0}", "sessions.max_idle: Input should be greater than 0"),
    ("sessions: {max_exec_idle: -1}", "sessions.max_exec_idle: Input should be greater than 0"),
    ("sessions: {sweep_interval: .inf}", "sessions.sweep_interval: Input should be a finite number"),
    ("sessions: {max_idle: '60'}", "sessions.max_idle: "),
    ("sessions: {idle: 60}", "sessions.idle: unknown key"),
    ("max_checkpoints: 30\nmax_checkpoints_total: 20", "max_checkpoints: more than max_checkpoints_total (20)"),
    ("max_checkpoints_total: 0", "max_checkpoints_total: Input should be greater than 0"),
    ("urls: {allow: ['a b']}", "urls.allow: URL allow rule 'a b'"),
])
def test_bad_limits_sessions_and_url_rules_of_the_node_are_refused_with_their_path(tmp_path: Path, text: str,
                                                                                 wrong: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        _load(tmp_path, text)
    assert caught.value.message.startswith(wrong), caught.value.message
