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
    #   persistent sessions: {persist: true, persist_interval: 60, persist_key_env: KITSUNE_PERSIST_KEY}
    #   (or persist_key, persist_key_file; an agent entry may set persist_sessions)
    workflows: ./workflows
    audit_file: ./kitsune-audit.jsonl  # the default: in the directory the node runs in (a relative path too)
    drain_deadline: 30             # seconds a drain (SIGTERM, kitsune drain) gives the calls in flight
    max_body_bytes: 1048576
    metrics: {token_env: SCRAPE_TOKEN}   # a scrape token: reads /metrics only
    live_view: {enabled: true, ttl: 300}  # links a person opens to see and act in a tab (seconds to open one;
                                          # public_url: https://... where people reach the node, for the links;
                                          # max_links_per_agent: 8, max_links: 256, links held at once)
    site_tools: {continuation_ttl: 60}    # seconds a page's continuation token may be redeemed (WebMCP)
    tasks: {lease_ttl: 30}                # seconds a task's lease lasts unless its owner is heard from; and
                                          # max_per_agent: 100 (active or expired), max_goal: 500, max_tabs: 32;
                                          # takeover: allow, or ask (a force takeover waits for a person);
                                          # authority: {url: https://..., token_env: VAR, timeout: 2} keeps
                                          # remote tasks (its URL must pass the node's urls.deny)
    operators: [{name: sre, token_env: CONSOLE_TOKEN}]  # the console's (GET /console); or password_env
    forwarded_allow_ips: [10.0.0.5]       # proxies whose X-Forwarded-For is believed; none by default
    nats:                          # joining a server or cluster (``--nats-url`` wins over url)
      url: nats://a:4222,nats://b:4222
      creds_file: /etc/kitsune/node.creds      # or nkey_seed_file, or user + password_env
      tls_ca_file: /etc/kitsune/ca.pem         # tls_cert_file + tls_key_file for client certificates

An agent entry may set ``read_only``, ``ask_before_act``, ``urls`` (``allow`` and ``deny``),
``caps``, ``user_tabs_writable``, ``max_checkpoints``, ``live_view`` (whether it may open Live
Views), ``quotas`` (``tabs``, ``sessions``) and ``tasks`` (``takeover``); the node's value stands for each
one it does not set.
Every key is checked: an unknown key
or a value of the wrong type is refused with its path (``agents.1.read_only``). The environment
overrides the file, key by key: ``KITSUNE_<KEY>``, with ``__`` between nested keys
(``KITSUNE_URLS__DENY``, ``KITSUNE_NATS__CREDS_FILE``); a list is comma-separated or JSON; a flag is
1/0, true/false, yes/no or on/off; an empty variable counts as unset. Other ``KITSUNE_*`` variables
are not configuration: one close to a setting that guards the node (``KITSUNE_READONLY``) is refused
(``kitsune.config_env``), and ``kitsune serve`` warns of the rest. Two variables keep their own meaning:
``KITSUNE_AGENTS=planner=TOKEN,crawler=TOKEN`` adds agents to the file's, and
``KITSUNE_METRICS_TOKEN`` is ``metrics.token``. With no agent configured, the node makes one
(``default``) with a fresh token written to a file only its owner can read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from core.policy import Policy
from core.settings import (
    Agent,
    CheckpointConfig,
    HttpConfig,
    LiveViewConfig,
    NatsAuth,
    NatsConfig,
    NodeConfig,
    Operator,
    SessionTimes,
    Settings,
    SiteToolConfig,
    TaskAuthority,
    TaskConfig,
    generated_name,
)
from core.tasks import TaskLimits
from core.url_policy import UrlPolicy
from kitsune.config_document import AgentEntry, Document, Environment, OperatorEntry
from kitsune.config_env import closest_key, refused_variables
from messages.contract import CHECKPOINT_TTL
from messages.errors import KitsuneError
from messages.tokens import new_token, token_hash

__all__ = ["load_config"]


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
    import yaml  # noqa: PLC0415 (a file's reader: the configuration of the environment alone, kitsune mcp's, needs none)
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


def load_config(path: Path | None = None, env: Mapping[str, str] | None = None) -> Settings:
    """Read the configuration file (if any) and the environment; ``invalid_config`` says what is wrong."""
    env = os.environ if env is None else env
    refused = refused_variables(env)  # a misspelt guard must not leave the node unguarded
    if refused is not None:
        raise _bad(refused)
    variables = {k: v for k, v in env.items() if k.upper() not in ("KITSUNE_AGENTS", "KITSUNE_METRICS_TOKEN")}
    if env.get("KITSUNE_METRICS_TOKEN"):
        variables["KITSUNE_METRICS__TOKEN"] = env["KITSUNE_METRICS_TOKEN"]
    try:
        document = Document.model_validate(_merge(_document(path), Environment(variables)()))
        return _built(document, env)
    except ValidationError as e:
        raise _bad(_explain(e)) from None
    except ValueError as e:  # the environment's JSON, or a secret's variable
        raise _bad(str(e)) from None


def _built(document: Document, env: Mapping[str, str]) -> Settings:
    """The settings the document says; ValueError naming the path of a value that cannot work."""
    if document.max_checkpoints > document.max_checkpoints_total:
        raise ValueError(f"max_checkpoints: more than max_checkpoints_total ({document.max_checkpoints_total})")
    policy = Policy(read_only=document.read_only, ask_before_act=document.ask_before_act,
                    urls=_url_policy(document.urls.allow, document.urls.deny, "urls"),
                    user_tabs_writable=document.user_tabs_writable, caps=frozenset(document.caps),
                    max_checkpoints=document.max_checkpoints, live_view=document.live_view.enabled,
                    tab_quota=document.quotas.tabs, session_quota=document.quotas.sessions,
                    task_takeover=document.tasks.takeover, persist_sessions=document.sessions.persist)
    agents = tuple(_agents(document, env, policy))
    if _persist_key(document, env) is None and any(p.persist_sessions for p in (policy, *(a.policy for a in agents
                                                                                        if a.policy is not None))):
        raise ValueError("sessions.persist: persistent sessions need sessions.persist_key, persist_key_env or "
                         "persist_key_file (nothing is stored in clear)")
    generated = None
    if not agents:
        generated = new_token(32)
        agents = (Agent("default", token_hash(generated)),)
    scrape = document.metrics.token or _secret(document.metrics.token_env, env, "metrics")
    http = HttpConfig(max_body_bytes=document.max_body_bytes, forwarded_allow_ips=tuple(document.forwarded_allow_ips),
                      metrics_token_sha256=token_hash(_long(scrape, "metrics")) if scrape is not None else None)
    return Settings(node=_node(document, env, len(agents)), http=http, policy=policy, agents=agents,
                    operators=_operators(document.operators, env), workflows=document.workflows,
                    generated_token=generated)


def _node(document: Document, env: Mapping[str, str], agents: int) -> NodeConfig:
    """The node's section: its place in the fleet, and the sections of its parts (by their keys' names)."""
    nats = document.nats
    auth = NatsAuth(**nats.model_dump(exclude={"url", "password_env"}),
                    password=_secret(nats.password_env, env, "nats"))
    sessions = SessionTimes(**document.sessions.model_dump(include={"max_idle", "max_exec_idle", "sweep_interval",
                                                                    "persist_interval"}),
                            persist_key=_persist_key(document, env))
    tasks = document.tasks
    return NodeConfig(
        name=document.node_name or generated_name(), fleet=document.fleet, max_tabs=document.max_tabs,
        max_sessions=document.max_sessions, agents=agents, audit_file=document.audit_file,
        drain_deadline=document.drain_deadline,
        nats=NatsConfig(nats.url, auth),
        checkpoints=CheckpointConfig(per_agent=document.max_checkpoints, total=document.max_checkpoints_total),
        sessions=replace(sessions, max_exec_idle=max(sessions.max_exec_idle, CHECKPOINT_TTL)),
        live_view=LiveViewConfig(**document.live_view.model_dump(exclude={"enabled"})),
        site_tools=SiteToolConfig(**document.site_tools.model_dump()),
        tasks=TaskConfig(tasks.lease_ttl, TaskLimits(tasks.max_per_agent, tasks.max_goal, tasks.max_tabs),
                         _authority(document, env)))


def _persist_key(document: Document, env: Mapping[str, str]) -> str | None:
    """The key persistent sessions are sealed with: given, from the environment, or a file's first line."""
    section = document.sessions
    if section.persist_key_file is not None:
        try:
            key = section.persist_key_file.read_text().strip()
        except OSError as e:
            raise ValueError(f"sessions.persist_key_file: cannot be read ({type(e).__name__})") from None
    else:
        key = section.persist_key or _secret(section.persist_key_env, env, "sessions.persist_key_env") or ""
    if key and len(key) < 16:
        raise ValueError("sessions.persist_key: a key of at least 16 characters is needed")
    return key or None


def _authority(document: Document, env: Mapping[str, str]) -> TaskAuthority | None:
    """The authority of ``remote`` tasks, if one is configured: its URL passes the node's URL deny rules (the node's
    own egress rules: an authority on a host the node denies is refused, not called)."""
    section = document.tasks.authority
    if section is None:
        return None
    denial = _url_policy((), document.urls.deny, "urls").check(section.url)
    if denial is not None:
        raise ValueError(f"tasks.authority.url: {denial.message}")
    token = _secret(section.token_env, env, "tasks.authority")
    assert token is not None  # token_env is required
    return TaskAuthority(section.url, token, section.timeout)


def _agents(document: Document, env: Mapping[str, str], node: Policy) -> list[Agent]:
    """The file's agents, each with its own policy if its entry sets one, then ``KITSUNE_AGENTS``'."""
    agents = [Agent(entry.name, token_hash(_long(entry.token or _secret(entry.token_env, env, f"agent {entry.name}"),
                                                 f"agent {entry.name}")),
                    _agent_policy(entry, f"agents.{index}", node, document.max_checkpoints_total))
              for index, entry in enumerate(document.agents)]
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
                           ("read_only", "ask_before_act", "user_tabs_writable", "max_checkpoints", "live_view",
                            "persist_sessions")
                           if getattr(entry, name) is not None}
    if entry.caps is not None:
        own["caps"] = frozenset(entry.caps)
    if entry.tasks.takeover is not None:
        own["task_takeover"] = entry.tasks.takeover
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
