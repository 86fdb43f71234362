"""A node's configuration: agents and their tokens, capability groups, policy, limits, NATS.

From a YAML or JSON file (``kitsune serve --config FILE``) and the environment::

    agents:                        # each API client is an agent with its own bearer token
      - {name: planner, token_env: PLANNER_TOKEN}
      - name: crawler              # an agent may set its own policy; what it does not set is the node's
        token: "..."
        read_only: true
        caps: [core]
        urls: {allow: [docs.test]} # allow and deny are two values: this one keeps the node's deny
        max_checkpoints: 5
    fleet: kitsune                 # nodes of one fleet share tabs over NATS
    node_name: kitsune-0           # this node's name in the fleet (unique in it); node-<random> when absent
    max_tabs: 256                  # tabs this node takes at most; a newTab past it goes to another node
    max_sessions: 64               # sessions (browser contexts) this node holds at most
    quotas: {tabs: 32, sessions: 8}  # each agent's on a node (an agent entry may set its own), fair share when full
    caps: [core, automation]       # the node's values, of every agent that does not set its own
    read_only: false
    ask_before_act: false
    urls: {allow: [shop.test, "*.shop.test"], deny: [10.0.0.0/8]}
    user_tabs_writable: false
    max_checkpoints: 20            # each agent's checkpoints, oldest pushed out first
    max_checkpoints_total: 500     # the node's: past it, the oldest of the agent holding the most goes
    sessions: {max_idle: 600, max_exec_idle: 86400, sweep_interval: 30}   # seconds
    workflows: ./workflows
    audit_file: ./kitsune-audit.jsonl
    max_body_bytes: 1048576
    metrics: {token_env: SCRAPE_TOKEN}   # a scrape token: reads /metrics only
    live_view: {enabled: true, ttl: 300}  # links a person opens to see and act in a tab (seconds to open one;
                                          # public_url: https://... where people reach the node, for the links;
                                          # max_links_per_agent: 8, max_links: 256, links held at once)
    site_tools: {continuation_ttl: 60}    # seconds a page's continuation token may be redeemed (WebMCP)
    tasks: {lease_ttl: 30}                # seconds a task's lease lasts unless its owner is heard from; and
                                          # max_per_agent: 100 (active or expired), max_goal: 500, max_tabs: 32
    operators: [{name: sre, token_env: CONSOLE_TOKEN}]  # the console's (GET /console); or password_env
    forwarded_allow_ips: [10.0.0.5]       # proxies whose X-Forwarded-For is believed; none by default
    nats:                          # joining a server or cluster (``--nats-url`` wins over url)
      url: nats://a:4222,nats://b:4222
      creds_file: /etc/kitsune/node.creds      # or nkey_seed_file, or user + password_env
      tls_ca_file: /etc/kitsune/ca.pem         # tls_cert_file + tls_key_file for client certificates

An agent entry may set ``read_only``, ``ask_before_act``, ``urls`` (``allow`` and ``deny``),
``caps``, ``user_tabs_writable``, ``max_checkpoints``, ``live_view`` (whether it may open Live
Views) and ``quotas`` (``tabs``, ``sessions``); the node's value stands for each one it does not set.
Every key is checked: an unknown key
or a value of the wrong type is refused with its path (``agents.1.read_only``). The environment
overrides the file, key by key: ``KITSUNE_<KEY>``, with ``__`` between nested keys
(``KITSUNE_URLS__DENY``, ``KITSUNE_NATS__CREDS_FILE``); a list is comma-separated or JSON; a flag is
1/0, true/false, yes/no or on/off; an empty variable counts as unset. Other ``KITSUNE_*`` variables
are not configuration: one close to a setting that guards the node (``KITSUNE_READONLY``) is refused
(``bridge.config_env``), and ``kitsune serve`` warns of the rest. Two variables keep their own meaning:
``KITSUNE_AGENTS=planner=TOKEN,crawler=TOKEN`` adds agents to the file's, and
``KITSUNE_METRICS_TOKEN`` is ``metrics.token``. With no agent configured, the node makes one
(``default``) with a fresh token written to a file only its owner can read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import yaml
from pydantic import ValidationError

from actors.nats_connection import NatsAuth
from bridge.config_document import AgentEntry, Environment, OperatorEntry, Settings, StringPath
from bridge.config_env import closest_key, refused_variables
from core.policy import CAPABILITY_GROUPS, Policy
from core.tasks import TaskLimits
from core.url_policy import UrlPolicy
from messages.contract import (
    CHECKPOINT_CAPACITY,
    CHECKPOINT_TOTAL_CAPACITY,
    CHECKPOINT_TTL,
    CONTINUATION_TTL,
    LIVE_VIEW_LINKS,
    LIVE_VIEW_LINKS_PER_AGENT,
    LIVE_VIEW_TTL,
    MAX_SESSIONS,
    MAX_TABS,
    QUOTA_SESSIONS,
    QUOTA_TABS,
    SESSION_MAX_EXEC_IDLE,
    SESSION_MAX_IDLE,
    SESSION_SWEEP_INTERVAL,
    TASK_LEASE_TTL,
)
from messages.errors import KitsuneError
from messages.tokens import new_token, token_hash

__all__ = ["CAPABILITY_GROUPS", "Agent", "BridgeConfig", "Operator", "SessionTimes", "load_config",
           "write_token_file"]



@dataclass(frozen=True, slots=True)
class Agent:
    """An API client."""

    name: str
    token_sha256: bytes = field(repr=False)
    """SHA-256 of its bearer token; the token itself is not kept."""
    policy: Policy | None = None
    """Its own policy (its entry's values, the node's where it sets none); None: the node's."""


@dataclass(frozen=True, slots=True)
class Operator:
    """A person who may open the operator console: by a token, or by a password from the environment."""

    name: str
    secret_sha256: bytes = field(repr=False)
    """SHA-256 of its token or password; the secret itself is not kept."""


@dataclass(frozen=True, slots=True)
class SessionTimes:
    """When idle sessions are swept (seconds)."""

    max_idle: float = SESSION_MAX_IDLE
    """A reuse (or promoted) session unused this long is closed."""
    max_exec_idle: float = SESSION_MAX_EXEC_IDLE
    """The one-shot session of a held call unused this long is closed; never less than the checkpoint
    TTL (the configuration raises a smaller value to it)."""
    sweep_interval: float = SESSION_SWEEP_INTERVAL
    """Seconds between two sweeps."""


@dataclass(frozen=True, slots=True)
class BridgeConfig:
    """Everything a node's bridge is told."""

    agents: tuple[Agent, ...] = ()
    fleet: str = "kitsune"
    """Nodes of one fleet share tabs over NATS; the first token of their subjects."""
    node_name: str | None = None
    """This node's name in the fleet; a generated one when None."""
    max_tabs: int = MAX_TABS
    """Tabs this node takes at most."""
    max_sessions: int = MAX_SESSIONS
    """Sessions (browser contexts) this node holds at most."""
    tab_quota: int = QUOTA_TABS
    """Each agent's tabs on a node at most, unless its entry sets its own."""
    session_quota: int = QUOTA_SESSIONS
    """Each agent's sessions on a node at most, unless its entry sets its own."""
    caps: frozenset[str] = frozenset({"core"})
    read_only: bool = False
    ask_before_act: bool = False
    allow: tuple[str, ...] = ()
    deny: tuple[str, ...] = ()
    user_tabs_writable: bool = False
    workflows: StringPath | None = None
    audit_file: Path = Path("kitsune-audit.jsonl")
    max_body_bytes: int = 1_048_576
    max_checkpoints: int = CHECKPOINT_CAPACITY
    """Each agent's checkpoints at most, unless its entry sets its own."""
    max_checkpoints_total: int = CHECKPOINT_TOTAL_CAPACITY
    """The node's checkpoints at most, of all agents."""
    sessions: SessionTimes = SessionTimes()
    """When idle sessions are swept."""
    generated_token: str | None = field(default=None, repr=False)
    """The token made for the default agent when none was configured (to be written to a file)."""
    metrics_token_sha256: bytes | None = field(default=None, repr=False)
    """SHA-256 of the scrape token, which reads ``/metrics`` and nothing else (agents' tokens read it too)."""
    nats_url: str | None = None
    """The NATS server or cluster to join (``--nats-url`` wins); an embedded one when None."""
    nats_auth: NatsAuth = NatsAuth()
    """Credentials and TLS options for ``nats_url``."""
    live_view: bool = True
    """Whether agents may open Live Views of their tabs (unless their entry says otherwise)."""
    live_view_ttl: float = LIVE_VIEW_TTL
    """Seconds a Live View link may be opened after it was made."""
    live_view_public_url: str | None = None
    """Where people reach the node (behind a proxy): Live View links start with it, not with the request's host."""
    live_view_max_links_per_agent: int = LIVE_VIEW_LINKS_PER_AGENT
    """Live View links one agent holds at once on a node (its oldest unopened one is revoked past it)."""
    live_view_max_links: int = LIVE_VIEW_LINKS
    """Live View links a node holds at once, every agent's (``live_view_quota`` past it)."""
    continuation_ttl: float = CONTINUATION_TTL
    """Seconds a site tool's continuation token may be redeemed after it was issued."""
    task_lease_ttl: float = TASK_LEASE_TTL
    """Seconds a task's lease lasts unless its owner's session is heard from."""
    task_limits: TaskLimits = TaskLimits()
    """An agent's tasks at most, a goal's characters, a task's tabs."""
    operators: tuple[Operator, ...] = ()
    """Who may open the operator console; nobody when empty."""
    forwarded_allow_ips: tuple[str, ...] = ()
    """The proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed (uvicorn's
    ``forwarded_allow_ips``); none by default: a client's address is the connection's."""

    def node_policy(self) -> Policy:
        """The node's policy: that of every agent whose entry sets no value of its own."""
        return Policy(read_only=self.read_only, ask_before_act=self.ask_before_act,
                      urls=UrlPolicy.from_config(self.allow, self.deny), user_tabs_writable=self.user_tabs_writable,
                      caps=self.caps, max_checkpoints=self.max_checkpoints, live_view=self.live_view,
                      tab_quota=self.tab_quota, session_quota=self.session_quota)

    def agent_policies(self) -> dict[str, Policy]:
        """The policies of the agents whose entries set values of their own, by agent name."""
        return {agent.name: agent.policy for agent in self.agents if agent.policy is not None}


def _secret(name: str | None, env: Mapping[str, str], what: str) -> str | None:
    """The value of environment variable ``name``; refused when it is named but not set."""
    if name is None:
        return None
    value = env.get(name)
    if not value:
        raise ValueError(f"{what}: environment variable {name} is not set")
    return value


# --- loading -------------------------------------------------------------------------------------

def _bad(message: str) -> KitsuneError:
    return KitsuneError("invalid_config", message)


def _merge(base: dict[str, Any], over: Mapping[str, Any]) -> dict[str, Any]:
    """``base`` with ``over``'s values, nested sections merged key by key."""
    merged = dict(base)
    for key, value in over.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(dict(merged[key]), value)
        else:
            merged[key] = value
    return merged


def _explain(error: ValidationError) -> str:
    """One line naming each bad key's path and what is wrong; never the value (it may be a secret)."""
    parts = []
    for item in error.errors(include_input=False, include_url=False):
        path = ".".join(str(p) for p in item["loc"])
        reason = item["msg"].removeprefix("Value error, ")
        if item["type"] == "extra_forbidden":
            near = closest_key(item["loc"])
            reason = f"unknown key; did you mean {near}?" if near else "unknown key"
        parts.append(f"{path}: {reason}" if path else reason)
    return "; ".join(parts)


def _document(path: Path | None) -> dict[str, Any]:
    if path is None:
        return {}
    try:
        document = yaml.safe_load(path.read_bytes())
    except yaml.MarkedYAMLError as e:  # its problem and where, never the text there (it may be a secret)
        mark = e.problem_mark
        where = f" at line {mark.line + 1}, column {mark.column + 1}" if mark is not None else ""
        raise _bad(f"{path}{where}: {e.problem or type(e).__name__}") from None
    except (OSError, yaml.YAMLError) as e:
        raise _bad(f"cannot read {path} ({type(e).__name__})") from None
    if document is None:
        return {}
    if not isinstance(document, dict):
        raise _bad(f"{path} must hold an object")
    return document


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> BridgeConfig:
    """Read the configuration file (if any) and the environment; ``invalid_config`` says what is wrong."""
    env = os.environ if env is None else env
    refused = refused_variables(env)  # a misspelt guard must not leave the node unguarded
    if refused is not None:
        raise _bad(refused)
    variables = {k: v for k, v in env.items() if k.upper() not in ("KITSUNE_AGENTS", "KITSUNE_METRICS_TOKEN")}
    if env.get("KITSUNE_METRICS_TOKEN"):
        variables["KITSUNE_METRICS__TOKEN"] = env["KITSUNE_METRICS_TOKEN"]
    try:
        settings = Settings.model_validate(_merge(_document(path), Environment(variables)()))
        return _built(settings, env)
    except ValidationError as e:
        raise _bad(_explain(e)) from None
    except ValueError as e:  # the environment's JSON, or a secret's variable
        raise _bad(str(e)) from None


def _built(settings: Settings, env: Mapping[str, str]) -> BridgeConfig:
    """The configuration the settings say; ValueError naming the path of a value that cannot work."""
    if settings.max_checkpoints > settings.max_checkpoints_total:
        raise ValueError(f"max_checkpoints: more than max_checkpoints_total ({settings.max_checkpoints_total})")
    scrape = settings.metrics.token or _secret(settings.metrics.token_env, env, "metrics")
    nats, sessions = settings.nats, settings.sessions
    urls = _url_policy(settings.urls.allow, settings.urls.deny, "urls")
    node = BridgeConfig(
        fleet=settings.fleet,
        node_name=settings.node_name,
        max_tabs=settings.max_tabs,
        max_sessions=settings.max_sessions,
        tab_quota=settings.quotas.tabs,
        session_quota=settings.quotas.sessions,
        caps=frozenset(settings.caps),
        read_only=settings.read_only,
        ask_before_act=settings.ask_before_act,
        allow=urls.allow,
        deny=urls.deny,
        user_tabs_writable=settings.user_tabs_writable,
        workflows=settings.workflows,
        audit_file=settings.audit_file,
        max_body_bytes=settings.max_body_bytes,
        max_checkpoints=settings.max_checkpoints,
        max_checkpoints_total=settings.max_checkpoints_total,
        sessions=SessionTimes(sessions.max_idle, max(sessions.max_exec_idle, CHECKPOINT_TTL), sessions.sweep_interval),
        metrics_token_sha256=token_hash(_long(scrape, "metrics")) if scrape is not None else None,
        nats_url=nats.url,
        nats_auth=NatsAuth(user=nats.user, password=_secret(nats.password_env, env, "nats"),
                           creds_file=nats.creds_file, nkey_seed_file=nats.nkey_seed_file,
                           tls_ca_file=nats.tls_ca_file, tls_cert_file=nats.tls_cert_file,
                           tls_key_file=nats.tls_key_file),
        live_view=settings.live_view.enabled,
        live_view_ttl=settings.live_view.ttl,
        live_view_public_url=settings.live_view.public_url,
        live_view_max_links_per_agent=settings.live_view.max_links_per_agent,
        live_view_max_links=settings.live_view.max_links,
        continuation_ttl=settings.site_tools.continuation_ttl,
        task_lease_ttl=settings.tasks.lease_ttl,
        task_limits=TaskLimits(settings.tasks.max_per_agent, settings.tasks.max_goal, settings.tasks.max_tabs),
        operators=_operators(settings.operators, env),
        forwarded_allow_ips=tuple(settings.forwarded_allow_ips),
    )
    agents = _agents(settings, env, node.node_policy())
    if agents:
        return replace(node, agents=tuple(agents))
    generated = new_token(32)
    return replace(node, agents=(Agent("default", token_hash(generated)),), generated_token=generated)


def _agents(settings: Settings, env: Mapping[str, str], node: Policy) -> list[Agent]:
    """The file's agents, each with its own policy if its entry sets one, then ``KITSUNE_AGENTS``'."""
    agents = [Agent(entry.name, token_hash(_long(entry.token or _secret(entry.token_env, env, f"agent {entry.name}"),
                                                 f"agent {entry.name}")),
                    _agent_policy(entry, f"agents.{index}", node, settings.max_checkpoints_total))
              for index, entry in enumerate(settings.agents)]
    for pair in filter(None, (p.strip() for p in env.get("KITSUNE_AGENTS", "").split(","))):
        name, _, token = pair.partition("=")
        if not name:
            raise ValueError("KITSUNE_AGENTS is name=token,... with tokens of at least 16 characters")
        agents.append(Agent(name.strip(), token_hash(_long(token.strip(), "KITSUNE_AGENTS"))))
    names = [a.name for a in agents]
    if len(set(names)) != len(names):
        raise ValueError("agent names must be unique")
    return agents


def _operators(entries: list[OperatorEntry], env: Mapping[str, str]) -> tuple[Operator, ...]:
    """The console's operators, each with the hash of its token (16 characters at least) or password (8)."""
    def secret(entry: OperatorEntry, what: str) -> str:
        if entry.password_env is None:
            return _long(entry.token or _secret(entry.token_env, env, what), what)
        if len(password := _secret(entry.password_env, env, what) or "") < 8:
            raise ValueError(f"{what}: a password of at least 8 characters is needed")
        return password
    operators = [Operator(e.name, token_hash(secret(e, f"operators.{i}"))) for i, e in enumerate(entries)]
    if len({o.name for o in operators}) != len(operators):
        raise ValueError("operator names must be unique")
    return tuple(operators)


def _agent_policy(entry: AgentEntry, path: str, node: Policy, total: int) -> Policy | None:
    """The policy of the agent of ``entry`` (at ``path``): the node's with the values it sets; None if it sets none."""
    own: dict[str, Any] = {name: getattr(entry, name) for name in
                           ("read_only", "ask_before_act", "user_tabs_writable", "max_checkpoints", "live_view")
                           if getattr(entry, name) is not None}
    if entry.caps is not None:
        own["caps"] = frozenset(entry.caps)
    own.update({f"{q}_quota": n for q, n in (("tab", entry.quotas.tabs), ("session", entry.quotas.sessions))
                if n is not None})
    allow, deny = entry.urls.allow, entry.urls.deny
    if allow is not None or deny is not None:
        own["urls"] = _url_policy(node.urls.allow if allow is None else allow,
                                  node.urls.deny if deny is None else deny, f"{path}.urls")
    if own.get("max_checkpoints", 0) > total:
        raise ValueError(f"{path}.max_checkpoints: more than max_checkpoints_total ({total})")
    return replace(node, **own) if own else None


def _url_policy(allow: Iterable[str], deny: Iterable[str], path: str) -> UrlPolicy:
    """The URL lists at ``path``, checked: a bad rule is refused with the path of its list."""
    try:
        return UrlPolicy.from_config(allow, deny)
    except KitsuneError as e:
        raise ValueError(f"{path}.{(e.state or {}).get('list')}: {e.message}") from None


def _long(token: str | None, what: str) -> str:
    """A token of 16 characters at least (one read from the environment is checked here)."""
    if token is None or len(token) < 16:
        raise ValueError(f"{what}: a token of at least 16 characters is needed")
    return token


def write_token_file(token: str, directory: Path) -> Path:
    """Write a generated token to a file only its owner can read; its path."""
    directory.mkdir(parents=True, exist_ok=True)
    path = directory / "token"
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "w") as file:
        file.write(token + "\n")
    os.chmod(path, 0o600)
    return path
