"""One configuration model: every key of the file reaches the settings, and ``kitsune serve`` starts the
node with the loaded settings' sections whole (no copy of a field that a new setting could miss)."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any, cast

import pytest
import yaml
from pydantic import BaseModel

from bridge.browser import Browser
from bridge.node import Node
from core.settings import NodeConfig, Settings
from driver import ChromiumBrowser
from kitsune import node_server
from kitsune.config import load_config
from kitsune.config_document import Document
from messages.errors import KitsuneError

AGENT = {"name": "a", "token": "a" * 16}
BASE: dict[str, Any] = {"node_name": "kitsune-0", "agents": [AGENT]}
"""A document whose settings are the same at each load (a node name and an agent given: nothing generated)."""


def _keys(model: type[BaseModel], prefix: str = "") -> Iterator[str]:
    """The dotted path of every key of ``model`` (into its sections; a list of entries is one key)."""
    for name, info in model.model_fields.items():
        section = info.annotation
        if isinstance(section, type) and issubclass(section, BaseModel):
            yield from _keys(section, f"{prefix}{name}.")
        else:
            yield prefix + name


def _changes(files: Path) -> dict[str, dict[str, Any]]:
    """For every key of the file, a document (over BASE) that sets it to a value other than its default."""
    for name in ("creds", "seed", "ca.pem", "cert.pem", "key.pem"):
        (files / name).write_text("x")
    (files / "persist.key").write_text("a persistence key of a file\n")
    user = {"nats": {"user": "node", "password_env": "NATS_PW"}}
    cert = {"nats": {"tls_cert_file": str(files / "cert.pem")}}
    return {
        "fleet": {"fleet": "other"}, "node_name": {"node_name": "kitsune-1"}, "max_tabs": {"max_tabs": 7},
        "max_sessions": {"max_sessions": 7}, "quotas.tabs": {"quotas": {"tabs": 3}},
        "quotas.sessions": {"quotas": {"sessions": 3}}, "caps": {"caps": ["core", "automation"]},
        "read_only": {"read_only": True}, "ask_before_act": {"ask_before_act": True},
        "urls.allow": {"urls": {"allow": ["a.test"]}}, "urls.deny": {"urls": {"deny": ["a.test"]}},
        "user_tabs_writable": {"user_tabs_writable": True}, "workflows": {"workflows": "./flows"},
        "audit_file": {"audit_file": "other.jsonl"}, "max_body_bytes": {"max_body_bytes": 64},
        "drain_deadline": {"drain_deadline": 5},
        "max_checkpoints": {"max_checkpoints": 3}, "max_checkpoints_total": {"max_checkpoints_total": 30},
        "sessions.max_idle": {"sessions": {"max_idle": 5}},
        "sessions.max_exec_idle": {"sessions": {"max_exec_idle": 1e6}},
        "sessions.sweep_interval": {"sessions": {"sweep_interval": 5}},
        "sessions.persist": {"sessions": {"persist": True, "persist_key": "k" * 16}},
        "sessions.persist_interval": {"sessions": {"persist_interval": 5}},
        "sessions.persist_key": {"sessions": {"persist_key": "k" * 16}},
        "sessions.persist_key_env": {"sessions": {"persist_key_env": "SCRAPE"}},
        "sessions.persist_key_file": {"sessions": {"persist_key_file": str(files / "persist.key")}},
        "metrics.token": {"metrics": {"token": "m" * 16}}, "metrics.token_env": {"metrics": {"token_env": "SCRAPE"}},
        "nats.url": {"nats": {"url": "nats://a:4222"}},
        "nats.creds_file": {"nats": {"creds_file": str(files / "creds")}},
        "nats.nkey_seed_file": {"nats": {"nkey_seed_file": str(files / "seed")}},
        "nats.user": user, "nats.password_env": user,
        "nats.tls_ca_file": {"nats": {"tls_ca_file": str(files / "ca.pem")}}, "nats.tls_cert_file": cert,
        "nats.tls_key_file": {"nats": {**cert["nats"], "tls_key_file": str(files / "key.pem")}},
        "live_view.enabled": {"live_view": {"enabled": False}}, "live_view.ttl": {"live_view": {"ttl": 5}},
        "live_view.public_url": {"live_view": {"public_url": "https://k.test"}},
        "live_view.max_links_per_agent": {"live_view": {"max_links_per_agent": 2}},
        "live_view.max_links": {"live_view": {"max_links": 3}},
        "site_tools.continuation_ttl": {"site_tools": {"continuation_ttl": 5}},
        "tasks.lease_ttl": {"tasks": {"lease_ttl": 5}}, "tasks.max_per_agent": {"tasks": {"max_per_agent": 5}},
        "tasks.max_goal": {"tasks": {"max_goal": 50}}, "tasks.max_tabs": {"tasks": {"max_tabs": 3}},
        "tasks.takeover": {"tasks": {"takeover": "ask"}},
        "tasks.authority": {"tasks": {"authority": {"url": "https://authority.test", "token_env": "SCRAPE"}}},
        "forwarded_allow_ips": {"forwarded_allow_ips": ["10.0.0.5"]},
        "agents": {"agents": [AGENT, {"name": "b", "token": "b" * 16}]},
        "operators": {"operators": [{"name": "sre", "token": "s" * 16}]},
    }


def _loaded(path: Path, document: dict[str, Any]) -> Settings:
    path.write_text(yaml.safe_dump({**BASE, **document}))
    return load_config(path, {"NATS_PW": "p" * 16, "SCRAPE": "s" * 16})


def test_every_key_of_the_file_reaches_the_settings(tmp_path: Path) -> None:
    changes, path = _changes(tmp_path), tmp_path / "k.yaml"
    assert sorted(changes) == sorted(_keys(Document))  # a new key needs a value here, and must reach the settings
    unchanged = _loaded(path, {})
    assert _loaded(path, {}) == unchanged
    assert [key for key, document in changes.items() if _loaded(path, document) == unchanged] == []


def test_kitsune_serve_gives_the_node_the_loaded_sections_whole(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    settings = _loaded(tmp_path / "k.yaml", {"nats": {"url": "nats://a:4222"}, "workflows": str(tmp_path),
                                             "agents": [{**AGENT, "read_only": True}]})
    (tmp_path / "look.yaml").write_text("commands: [{action: url}]\n")
    started: list[tuple[NodeConfig, dict[str, Any]]] = []
    browser = cast(ChromiumBrowser, object())

    async def start_node(given: Browser, config: NodeConfig, **parts: Any) -> Node:
        assert given is browser  # the one launched early
        started.append((config, parts))
        return cast(Node, None)

    monkeypatch.setattr(node_server, "start_node", start_node)
    asyncio.run(node_server.start_configured(settings, None, browser))
    asyncio.run(node_server.start_configured(settings, "nats://b:4222", browser))  # --nats-url
    [(config, parts), (joined, _)] = started
    assert config is settings.node
    assert parts["policy"] is settings.policy and parts["agent_policies"] == settings.agent_policies()
    assert parts["workflows"].load("look").name == "look"  # the library of the configured directory
    assert joined == replace(settings.node, nats=replace(settings.node.nats, url="nats://b:4222"))


def test_persistent_sessions_need_a_key_and_an_agent_may_make_them_its_default(tmp_path: Path) -> None:
    for persisting in ({"sessions": {"persist": True}}, {"agents": [{**AGENT, "persist_sessions": True}]}):
        with pytest.raises(KitsuneError) as refused:
            _loaded(tmp_path / "k.yaml", persisting)
        assert refused.value.code == "invalid_config" and "persist_key" in refused.value.message
    keyed = _loaded(tmp_path / "k.yaml", {"sessions": {"persist_key_env": "SCRAPE"},
                                          "agents": [{**AGENT, "persist_sessions": True}]})
    assert keyed.node.sessions.persist_key == "s" * 16 and not keyed.policy.persist_sessions
    assert keyed.agent_policies()[AGENT["name"]].persist_sessions
    assert "s" * 16 not in repr(keyed.node.sessions)


def test_a_takeover_policy_is_the_node_s_unless_the_agent_sets_its_own(tmp_path: Path) -> None:
    asks = {**AGENT, "name": "asks", "token": "q" * 16, "tasks": {"takeover": "ask"}}
    settings = _loaded(tmp_path / "k.yaml", {"agents": [AGENT, asks]})
    assert settings.policy.task_takeover == "allow" and settings.agent_policies()["asks"].task_takeover == "ask"
    node_asks = _loaded(tmp_path / "k.yaml", {"tasks": {"takeover": "ask"},
                                               "agents": [AGENT, {**asks, "tasks": {"takeover": "allow"}}]})
    assert node_asks.policy.task_takeover == "ask" and node_asks.agent_policies()["asks"].task_takeover == "allow"
