"""The configuration document's schema: every key, its type and bounds, checked with its path.

The YAML or JSON file and the ``KITSUNE_*`` environment (:class:`Environment`) are merged and
validated against :class:`Document`; ``kitsune.config`` loads them and builds the settings
(``core.settings.Settings``).
"""

from __future__ import annotations

import ipaddress
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any, Literal
from urllib.parse import urlsplit

from pydantic import AfterValidator, BaseModel, ConfigDict, Field, model_validator
from pydantic.fields import FieldInfo
from pydantic_settings import BaseSettings, EnvSettingsSource, PydanticBaseSettingsSource, SettingsConfigDict
from pydantic_settings.sources.utils import parse_env_vars

from core.policy import CAPABILITY_GROUPS
from core.tasks import MAX_GOAL, MAX_PER_AGENT
from core.tasks import MAX_TABS as MAX_TABS_PER_TASK
from messages.commands import NODE_NAME
from messages.contract import (
    CHECKPOINT_CAPACITY,
    CHECKPOINT_TOTAL_CAPACITY,
    CONTINUATION_TTL,
    DRAIN_DEADLINE,
    LIVE_VIEW_LINKS,
    LIVE_VIEW_LINKS_PER_AGENT,
    LIVE_VIEW_TTL,
    MAX_DRAIN_DEADLINE,
    MAX_SESSIONS,
    MAX_TABS,
    QUOTA_SESSIONS,
    QUOTA_TABS,
    SESSION_MAX_EXEC_IDLE,
    SESSION_MAX_IDLE,
    SESSION_PERSIST_INTERVAL,
    SESSION_SWEEP_INTERVAL,
    TASK_LEASE_TTL,
)

__all__ = ["AgentEntry", "Document", "Environment", "OperatorEntry", "StringPath", "Token"]

Token = Annotated[str, Field(min_length=16)]
StringPath = Annotated[Path, Field(strict=False)]
"""A path, written as a string."""


class Section(BaseModel):
    """A section of the document: every key known, every value of its type."""

    model_config = ConfigDict(extra="forbid", strict=True)


def known_groups(caps: list[str]) -> list[str]:
    unknown = set(caps) - CAPABILITY_GROUPS
    if unknown:
        raise ValueError(f"unknown capability group(s): {', '.join(sorted(unknown))}")
    return caps


Caps = Annotated[list[str], AfterValidator(known_groups)]
Count = Annotated[int, Field(gt=0)]
Seconds = Annotated[float, Field(gt=0, allow_inf_nan=False)]


class AgentUrls(Section):
    allow: list[str] | None = None
    deny: list[str] | None = None


class AgentQuotas(Section):
    tabs: Count | None = None
    sessions: Count | None = None


class Quotas(Section):
    """Each agent's tabs and sessions on a node at most (issue 29)."""

    tabs: Count = QUOTA_TABS
    sessions: Count = QUOTA_SESSIONS


class AgentTasks(Section):
    takeover: Literal["ask", "allow"] | None = None


class AgentEntry(Section):
    name: Annotated[str, Field(min_length=1)]
    token: Token | None = Field(default=None, repr=False)
    token_env: str | None = None
    read_only: bool | None = None
    ask_before_act: bool | None = None
    urls: AgentUrls = AgentUrls()
    caps: Caps | None = None
    user_tabs_writable: bool | None = None
    max_checkpoints: Count | None = None
    live_view: bool | None = None
    persist_sessions: bool | None = None
    quotas: AgentQuotas = AgentQuotas()
    tasks: AgentTasks = AgentTasks()

    @model_validator(mode="after")
    def _one_token(self) -> AgentEntry:
        if (self.token is None) == (self.token_env is None):
            raise ValueError("one of token or token_env is needed")
        return self


class Urls(Section):
    allow: list[str] = []
    deny: list[str] = []


class Sessions(Section):
    max_idle: Seconds = SESSION_MAX_IDLE
    max_exec_idle: Seconds = SESSION_MAX_EXEC_IDLE
    sweep_interval: Seconds = SESSION_SWEEP_INTERVAL
    persist: bool = False
    persist_interval: Seconds = SESSION_PERSIST_INTERVAL
    persist_key: Annotated[str, Field(min_length=16)] | None = Field(default=None, repr=False)
    persist_key_env: str | None = None
    persist_key_file: StringPath | None = None

    @model_validator(mode="after")
    def _one_key(self) -> Sessions:
        if sum(way is not None for way in (self.persist_key, self.persist_key_env, self.persist_key_file)) > 1:
            raise ValueError("one of persist_key, persist_key_env or persist_key_file, not more")
        return self


class Metrics(Section):
    token: Token | None = Field(default=None, repr=False)
    token_env: str | None = None


def public_base(url: str) -> str:
    """An http(s) origin, with a path at most: what Live View links start with."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.netloc or parts.query or parts.fragment:
        raise ValueError("must be an http(s) URL with no query or fragment, e.g. https://kitsune.example.com")
    return url.rstrip("/")


def networks(entries: list[str]) -> list[str]:
    """Addresses or networks (``10.0.0.5``, ``10.0.0.0/8``), or ``*`` for any: what uvicorn takes."""
    for entry in entries:
        if entry != "*":
            try:
                ipaddress.ip_network(entry, strict=False)
            except ValueError:
                raise ValueError(f"{entry!r} is no address or network") from None
    return entries


class LiveView(Section):
    enabled: bool = True
    ttl: Seconds = LIVE_VIEW_TTL
    public_url: Annotated[str, AfterValidator(public_base)] | None = None
    max_links_per_agent: Count = LIVE_VIEW_LINKS_PER_AGENT
    max_links: Count = LIVE_VIEW_LINKS


class SiteTools(Section):
    continuation_ttl: Seconds = CONTINUATION_TTL


def authority_base(url: str) -> str:
    """An http(s) URL with no query, fragment or userinfo: where a ``remote`` task's authority answers."""
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment \
            or parts.username is not None:
        raise ValueError("must be an http(s) URL with no credentials, query or fragment (the token goes in "
                         "token_env)")
    return url.rstrip("/")


class TaskAuthoritySection(Section):
    url: Annotated[str, AfterValidator(authority_base)]
    token_env: str
    timeout: Annotated[float, Field(gt=0, le=30, allow_inf_nan=False)] = 2.0


class Tasks(Section):
    lease_ttl: Seconds = TASK_LEASE_TTL
    max_per_agent: Count = MAX_PER_AGENT
    max_goal: Annotated[int, Field(gt=0, le=MAX_GOAL)] = MAX_GOAL  # a checkpoint carries 500 characters of it
    max_tabs: Count = MAX_TABS_PER_TASK
    takeover: Literal["ask", "allow"] = "allow"  # ask: a force takeover is held for a person's approval
    authority: TaskAuthoritySection | None = None  # the host's authority of remote tasks; none: refused


class OperatorEntry(Section):
    name: Annotated[str, Field(min_length=1)]
    token: Token | None = Field(default=None, repr=False)
    token_env: str | None = None
    password_env: str | None = None

    @model_validator(mode="after")
    def _one_secret(self) -> OperatorEntry:
        if sum(way is not None for way in (self.token, self.token_env, self.password_env)) != 1:
            raise ValueError("one of token, token_env or password_env is needed")
        return self


class Nats(Section):
    url: str | None = None
    creds_file: StringPath | None = None
    nkey_seed_file: StringPath | None = None
    user: str | None = None
    password_env: str | None = None
    tls_ca_file: StringPath | None = None
    tls_cert_file: StringPath | None = None
    tls_key_file: StringPath | None = None

    @model_validator(mode="after")
    def _one_way(self) -> Nats:
        ways = [w for w in ("creds_file", "nkey_seed_file", "user") if getattr(self, w) is not None]
        if len(ways) > 1:
            raise ValueError(f"one of creds_file, nkey_seed_file or user, not {' and '.join(ways)}")
        if (self.password_env is None) != (self.user is None):
            raise ValueError("user and password_env go together")
        if self.tls_key_file is not None and self.tls_cert_file is None:
            raise ValueError("tls_key_file needs tls_cert_file")
        for name in ("creds_file", "nkey_seed_file", "tls_ca_file", "tls_cert_file", "tls_key_file"):
            path = getattr(self, name)
            if path is not None and not path.is_file():
                raise ValueError(f"{name}: no file {path}")
        return self


class Document(BaseSettings):
    """The whole document; the environment's values are merged in before it is checked."""

    model_config = SettingsConfigDict(extra="forbid", strict=True, env_prefix="KITSUNE_",
                                      env_nested_delimiter="__", env_ignore_empty=True)

    agents: list[AgentEntry] = []
    fleet: Annotated[str, Field(pattern=r"^[A-Za-z0-9_-]+$")] = "kitsune"
    node_name: Annotated[str, Field(pattern=f"^{NODE_NAME}$")] | None = None
    max_tabs: Count = MAX_TABS
    max_sessions: Count = MAX_SESSIONS
    quotas: Quotas = Quotas()
    caps: Caps = ["core"]
    read_only: bool = False
    ask_before_act: bool = False
    urls: Urls = Urls()
    user_tabs_writable: bool = False
    workflows: StringPath | None = None
    audit_file: StringPath = Path("kitsune-audit.jsonl")
    drain_deadline: Annotated[float, Field(ge=0, le=MAX_DRAIN_DEADLINE, allow_inf_nan=False)] = DRAIN_DEADLINE
    max_body_bytes: Count = 1_048_576
    max_checkpoints: Count = CHECKPOINT_CAPACITY
    max_checkpoints_total: Count = CHECKPOINT_TOTAL_CAPACITY
    sessions: Sessions = Sessions()
    metrics: Metrics = Metrics()
    nats: Nats = Nats()
    live_view: LiveView = LiveView()
    site_tools: SiteTools = SiteTools()
    tasks: Tasks = Tasks()
    operators: list[OperatorEntry] = []
    forwarded_allow_ips: Annotated[list[str], AfterValidator(networks)] = []

    @classmethod
    def settings_customise_sources(cls, settings_cls: type[BaseSettings], *sources: PydanticBaseSettingsSource,
                                   **named: PydanticBaseSettingsSource) -> tuple[PydanticBaseSettingsSource, ...]:
        """Only what it is given: :class:`Environment` reads the mapping ``load_config`` is passed."""
        return (named.get("init_settings") or sources[0],)


class Environment(EnvSettingsSource):
    """pydantic-settings' reading of ``KITSUNE_*`` variables, from a given mapping; lists comma-separated or JSON."""

    def __init__(self, env: Mapping[str, str]) -> None:
        self._given = env
        super().__init__(Document)

    def _load_env_vars(self) -> Mapping[str, str | None]:
        return parse_env_vars(self._given, self.case_sensitive, self.env_ignore_empty, self.env_parse_none_str)

    def decode_complex_value(self, field_name: str, field: FieldInfo, value: Any) -> Any:
        if isinstance(value, str) and not value.lstrip().startswith(("[", "{")):
            return [item.strip() for item in value.split(",") if item.strip()]
        return json.loads(value)
