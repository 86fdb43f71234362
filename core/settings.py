"""The validated configuration: one frozen model, a section for each part that takes it.

``kitsune.config.load_config`` builds :class:`Settings` from the file and the environment. ``kitsune
serve`` hands each part its own section, whole: the node :class:`NodeConfig` (with the sections of its
own parts: NATS, checkpoints, sessions, Live View, site tools, tasks), the HTTP edge :class:`HttpConfig`,
the gate the agents and the operators, every agent with no policy of its own :attr:`Settings.policy`.
"""

from __future__ import annotations

import secrets
from dataclasses import dataclass, field
from pathlib import Path

from core.policy import Policy
from core.tasks import TaskLimits
from messages.contract import (
    CHECKPOINT_CAPACITY,
    CHECKPOINT_TOTAL_CAPACITY,
    CHECKPOINT_TTL,
    CONTINUATION_TTL,
    DRAIN_DEADLINE,
    LIVE_VIEW_LINKS,
    LIVE_VIEW_LINKS_PER_AGENT,
    LIVE_VIEW_TTL,
    MAX_SESSIONS,
    MAX_TABS,
    SESSION_MAX_EXEC_IDLE,
    SESSION_MAX_IDLE,
    SESSION_PERSIST_INTERVAL,
    SESSION_SWEEP_INTERVAL,
    STEP_TIMEOUT,
    TASK_LEASE_TTL,
)

__all__ = ["Agent", "CheckpointConfig", "HttpConfig", "LiveViewConfig", "NatsAuth", "NatsConfig", "NodeConfig",
           "Operator", "SessionTimes", "Settings", "SiteToolConfig", "TaskAuthority", "TaskConfig", "generated_name"]


@dataclass(frozen=True, slots=True)
class NatsAuth:
    """How a client proves who it is to NATS (one way at most) and checks the server's TLS
    (``actors.nats_connection.connect_options`` turns it into nats-py's options)."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds_file: Path | None = None
    """A NATS JWT ``.creds`` file (user JWT and nkey seed)."""
    nkey_seed_file: Path | None = None
    """A file holding a user nkey seed (``SU...``)."""
    tls_ca_file: Path | None = None
    """CA bundle the server's certificate must chain to (the system's when None)."""
    tls_cert_file: Path | None = None
    """Client certificate, for servers that verify clients."""
    tls_key_file: Path | None = None


@dataclass(frozen=True, slots=True)
class NatsConfig:
    """The NATS server or cluster a node joins (``nats``; ``--nats-url`` wins over ``url``)."""

    url: str | None = None
    """Comma-separated server URLs; None starts an embedded server."""
    auth: NatsAuth = NatsAuth()
    """Credentials and TLS options for ``url`` (an embedded server makes its own)."""


@dataclass(frozen=True, slots=True)
class CheckpointConfig:
    """The checkpoints of calls a node keeps."""

    ttl: float = CHECKPOINT_TTL
    """Seconds a checkpoint is kept after its call (or last resume) ended."""
    per_agent: int = CHECKPOINT_CAPACITY
    """Each agent's at most, oldest pushed out first, unless its policy says its own (``max_checkpoints``)."""
    total: int = CHECKPOINT_TOTAL_CAPACITY
    """The node's at most, of all agents (``max_checkpoints_total``)."""


@dataclass(frozen=True, slots=True)
class SessionTimes:
    """When idle sessions are swept and persistent ones saved (seconds), and their key (``sessions``)."""

    max_idle: float = SESSION_MAX_IDLE
    """A reuse (or promoted) session unused this long is closed."""
    max_exec_idle: float = SESSION_MAX_EXEC_IDLE
    """The one-shot session of a held call unused this long is closed; never less than the checkpoint
    TTL (the configuration and the node raise a smaller value to it)."""
    sweep_interval: float = SESSION_SWEEP_INTERVAL
    """Seconds between two sweeps."""
    persist_interval: float = SESSION_PERSIST_INTERVAL
    """Seconds between two saves of a persistent session that was used since its last one."""
    persist_key: str | None = field(default=None, repr=False)
    """The secret persistent sessions' states are sealed with (None: persistence is refused)."""


@dataclass(frozen=True, slots=True)
class LiveViewConfig:
    """The Live View links of a node's tabs (``live_view``; whether an agent may open one is its policy's)."""

    ttl: float = LIVE_VIEW_TTL
    """Seconds a link may be opened after it was made."""
    public_url: str | None = None
    """Where people reach the node (behind a proxy): links start with it; with the asking request's host when None."""
    max_links_per_agent: int = LIVE_VIEW_LINKS_PER_AGENT
    """Links one agent holds at once on the node (its oldest unopened one is revoked past it)."""
    max_links: int = LIVE_VIEW_LINKS
    """Links the node holds at once, every agent's (``live_view_quota`` past it)."""


@dataclass(frozen=True, slots=True)
class SiteToolConfig:
    """The tools pages declare (``site_tools``)."""

    continuation_ttl: float = CONTINUATION_TTL
    """Seconds a site tool's continuation token may be redeemed after it was issued."""


@dataclass(frozen=True, slots=True)
class TaskAuthority:
    """The host's authority that keeps ``remote`` tasks (``tasks.authority``; the interface: docs/guides/tasks.md)."""

    url: str
    """Its base URL (http or https), judged against the node's URL deny rules when the configuration is read."""
    token: str = field(repr=False)
    """The credential the node sends it (``Authorization: Bearer``): never in a log line or an error."""
    timeout: float = 2.0
    """Seconds a request may take: past them the node gives up, and the authority must not apply it."""


@dataclass(frozen=True, slots=True)
class TaskConfig:
    """The agents' tasks (``tasks``)."""

    lease_ttl: float = TASK_LEASE_TTL
    """Seconds a task's lease lasts unless its owner's session is heard from."""
    limits: TaskLimits = TaskLimits()
    """An agent's tasks at most, a goal's characters, a task's tabs."""
    authority: TaskAuthority | None = None
    """Where ``remote`` tasks are kept; None: the node refuses them (``task_authority_not_configured``)."""


def generated_name() -> str:
    """A node name for a node that was given none: ``node-`` and 8 random hex digits."""
    return "node-" + secrets.token_hex(4)


@dataclass(frozen=True, slots=True)
class NodeConfig:
    """How a node runs: what it is in its fleet, and the sections of its parts."""

    name: str = field(default_factory=generated_name)
    """The node's name in its fleet (unique in it; ``node_name``)."""
    fleet: str = "kitsune"
    """The fleet this node serves tabs in (the first token of its NATS subjects)."""
    max_tabs: int = MAX_TABS
    """Tabs this node takes at most: past it, a ``newTab`` goes to another node with room."""
    max_sessions: int = MAX_SESSIONS
    """Sessions (browser contexts) this node holds at most, of all agents."""
    agents: int | None = None
    """How many agents are configured (None: any may come); the fair share keeps room for one that holds nothing."""
    step_timeout: float = STEP_TIMEOUT
    """A step's timeout when its command sets none."""
    audit_file: Path | None = None
    """The audit log's JSON-lines file (the stream alone when None)."""
    drain_deadline: float = DRAIN_DEADLINE
    """Seconds a drain (SIGTERM, ``kitsune drain``) gives the calls in flight before it interrupts them."""
    nats: NatsConfig = NatsConfig()
    checkpoints: CheckpointConfig = CheckpointConfig()
    sessions: SessionTimes = SessionTimes()
    live_view: LiveViewConfig = LiveViewConfig()
    site_tools: SiteToolConfig = SiteToolConfig()
    tasks: TaskConfig = TaskConfig()


@dataclass(frozen=True, slots=True)
class HttpConfig:
    """The HTTP API's edge."""

    max_body_bytes: int = 1_048_576
    """A request body's bytes at most."""
    forwarded_allow_ips: tuple[str, ...] = ()
    """The proxies whose ``X-Forwarded-For`` and ``X-Forwarded-Proto`` are believed (uvicorn's
    ``forwarded_allow_ips``); none by default: a client's address is the connection's."""
    metrics_token_sha256: bytes | None = field(default=None, repr=False)
    """SHA-256 of the scrape token, which reads ``/metrics`` and nothing else (agents' tokens read it too)."""


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
class Settings:
    """The whole configuration: the node's, its HTTP edge's, and who may use them."""

    node: NodeConfig = NodeConfig()
    http: HttpConfig = HttpConfig()
    policy: Policy = Policy(caps=frozenset({"core"}))
    """The node's policy: that of every agent whose entry sets no value of its own."""
    agents: tuple[Agent, ...] = ()
    operators: tuple[Operator, ...] = ()
    """Who may open the operator console; nobody when empty."""
    workflows: Path | None = None
    """The directory of the stored workflows, if any."""
    generated_token: str | None = field(default=None, repr=False)
    """The token made for the default agent when none was configured (to be written to a file)."""

    def agent_policies(self) -> dict[str, Policy]:
        """The policies of the agents whose entries set values of their own, by agent name."""
        return {agent.name: agent.policy for agent in self.agents if agent.policy is not None}
