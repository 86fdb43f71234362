"""A node's configuration: agents and their tokens, capability groups, policy, limits.

From a YAML or JSON file (``kitsune serve --config FILE``) and the environment::

    agents:                        # each API client is an agent with its own bearer token
      - {name: planner, token_env: PLANNER_TOKEN}
      - {name: crawler, token: "..."}
    fleet: kitsune                 # KITSUNE_FLEET: nodes of one fleet share tabs over NATS
    caps: [core, automation]       # KITSUNE_CAPS=core,automation
    read_only: false               # KITSUNE_READ_ONLY=1
    ask_before_act: false          # KITSUNE_ASK_BEFORE_ACT=1
    urls: {allow: [shop.test, "*.shop.test"], deny: [10.0.0.0/8]}
    user_tabs_writable: false
    workflows: ./workflows
    audit_file: ./kitsune-audit.jsonl
    max_body_bytes: 1048576
    metrics: {token_env: SCRAPE_TOKEN}   # KITSUNE_METRICS_TOKEN: reads /metrics only

``KITSUNE_AGENTS=planner=TOKEN,crawler=TOKEN`` adds agents from the environment. With no agent
configured, the node makes one (``default``) with a fresh token written to a file only its
owner can read.
"""

from __future__ import annotations

import hashlib
import os
import re
import secrets
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from messages.errors import KitsuneError

__all__ = ["CAPABILITY_GROUPS", "Agent", "BridgeConfig", "load_config", "write_token_file"]

CAPABILITY_GROUPS = frozenset({"core", "automation"})


@dataclass(frozen=True, slots=True)
class Agent:
    """An API client."""

    name: str
    token_sha256: bytes = field(repr=False)
    """SHA-256 of its bearer token; the token itself is not kept."""


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """Everything a node's bridge is told."""

    agents: tuple[Agent, ...] = ()
    fleet: str = "kitsune"
    """Nodes of one fleet share tabs over NATS; the first token of their subjects."""
    caps: frozenset[str] = frozenset({"core"})
    read_only: bool = False
    ask_before_act: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    user_tabs_writable: bool = False
    workflows: Path | None = None
    audit_file: Path = Path("kitsune-audit.jsonl")
    max_body_bytes: int = 1_048_576
    generated_token: str | None = field(default=None, repr=False)
    """The token made for the default agent when none was configured (to be written to a file)."""
    metrics_token_sha256: bytes | None = field(default=None, repr=False)
    """SHA-256 of the scrape token, which reads ``/metrics`` and nothing else (agents' tokens read it too)."""


def _bad(message: str) -> KitsuneError:
    return KitsuneError("invalid_config", message)


def _token_hash(token: str) -> bytes:
    return hashlib.sha256(token.encode()).digest()


def _flag(value: Any, name: str) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.lower() in ("1", "true", "yes", "on", "0", "false", "no", "off", ""):
        return value.lower() in ("1", "true", "yes", "on")
    raise _bad(f"{name} must be true or false")


def _agents(raw: Any, env: Mapping[str, str]) -> list[Agent]:
    if raw is None:
        raw = []
    if not isinstance(raw, list):
        raise _bad("agents must be a list of {name, token | token_env}")
    agents = []
    for item in raw:
        if not isinstance(item, dict) or not isinstance(item.get("name"), str):
            raise _bad("each agent needs a name")
        token = item.get("token")
        if "token_env" in item:
            token = env.get(str(item["token_env"]))
            if not token:
                raise _bad(f"agent {item['name']}: environment variable {item['token_env']} is not set")
        if not isinstance(token, str) or len(token) < 16:
            raise _bad(f"agent {item['name']}: a token of at least 16 characters is needed")
        agents.append(Agent(item["name"], _token_hash(token)))
    for pair in filter(None, (p.strip() for p in env.get("KITSUNE_AGENTS", "").split(","))):
        name, _, token = pair.partition("=")
        if not name or len(token) < 16:
            raise _bad("KITSUNE_AGENTS is name=token,... with tokens of at least 16 characters")
        agents.append(Agent(name.strip(), _token_hash(token.strip())))
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise _bad("agent names must be unique")
    return agents


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> BridgeConfig:
    """Read the configuration file (if any) and the environment; ``invalid_config`` says what is wrong."""
    env = os.environ if env is None else env
    document: Any = {}
    if path is not None:
        try:
            document = yaml.safe_load(path.read_bytes()) or {}
        except (OSError, yaml.YAMLError) as e:
            raise _bad(f"cannot read {path} ({type(e).__name__})") from None
        if not isinstance(document, dict):
            raise _bad(f"{path} must hold an object")
    caps_raw = env.get("KITSUNE_CAPS") or document.get("caps") or ["core"]
    caps = frozenset(c.strip() for c in (caps_raw.split(",") if isinstance(caps_raw, str) else caps_raw) if c.strip())
    if not caps <= CAPABILITY_GROUPS:
        raise _bad(f"unknown capability group(s): {', '.join(sorted(caps - CAPABILITY_GROUPS))}")
    urls = document.get("urls") or {}
    agents = _agents(document.get("agents"), env)
    generated = None
    if not agents:
        generated = secrets.token_urlsafe(32)
        agents = [Agent("default", _token_hash(generated))]
    workflows = document.get("workflows") or env.get("KITSUNE_WORKFLOWS")
    fleet = str(env.get("KITSUNE_FLEET") or document.get("fleet") or "kitsune")
    if not re.fullmatch(r"[A-Za-z0-9_-]+", fleet):
        raise _bad("fleet is letters, digits, '_' and '-'")
    return BridgeConfig(
        agents=tuple(agents),
        fleet=fleet,
        caps=caps,
        read_only=_flag(env.get("KITSUNE_READ_ONLY", document.get("read_only", False)), "read_only"),
        ask_before_act=_flag(env.get("KITSUNE_ASK_BEFORE_ACT", document.get("ask_before_act", False)),
                             "ask_before_act"),
        allow=tuple(urls.get("allow") or ()),
        deny=tuple(urls.get("deny") or ()),
        user_tabs_writable=_flag(document.get("user_tabs_writable", False), "user_tabs_writable"),
        workflows=Path(workflows) if workflows else None,
        audit_file=Path(document.get("audit_file") or env.get("KITSUNE_AUDIT_FILE") or "kitsune-audit.jsonl"),
        max_body_bytes=int(document.get("max_body_bytes", 1_048_576)),
        generated_token=generated,
        metrics_token_sha256=_metrics_token(document.get("metrics"), env),
    )


def _metrics_token(raw: Any, env: Mapping[str, str]) -> bytes | None:
    """The scrape token's hash: ``KITSUNE_METRICS_TOKEN``, or ``metrics: {token | token_env}``."""
    if raw is not None and not isinstance(raw, dict):
        raise _bad("metrics must be {token | token_env}")
    raw = raw or {}
    token = env.get("KITSUNE_METRICS_TOKEN") or raw.get("token")
    if not token and "token_env" in raw:
        token = env.get(str(raw["token_env"]))
        if not token:
            raise _bad(f"metrics: environment variable {raw['token_env']} is not set")
    if token is None:
        return None
    if not isinstance(token, str) or len(token) < 16:
        raise _bad("metrics: a scrape token of at least 16 characters is needed")
    return _token_hash(token)


def write_token_file(token: str, directory: Path) -> Path:
    """Write a generated token to a file only its owner can read; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "token"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    os.chmod(path, 0o600)
    return path
