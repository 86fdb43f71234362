"""The node's policy, applied to every action before it is sent: read-only mode, tab ownership,
URL lists and ask-before-act (DESIGN: Policy and identity).

:class:`PolicyDriver` wraps the engine's driver port for one agent, so container calls, their
resumes and direct calls all pass through the same checks, with the policy as it is now.
"""

from __future__ import annotations

import collections
import dataclasses
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import orjson

from core.log_context import CALL, STEP
from core.ports import Driver, Recorded
from core.session_names import ONE_SHOT, one_shot_name
from core.url_policy import UrlPolicy
from messages.cdp_methods import rule_of
from messages.commands import CallSiteTool, Cdp, Command, Navigate, NewTab, command_to_json, is_write
from messages.contract import CHECKPOINT_CAPACITY, CONFIRM_PER_AGENT, CONFIRM_TTL, QUOTA_SESSIONS, QUOTA_TABS
from messages.errors import KitsuneError
from messages.results import Done, Failed, Failure, HeldForApproval, Outcome
from messages.tokens import digest, digests_equal, new_token, token_hash

__all__ = ["CAPABILITY_GROUPS", "CLOSED", "ELSEWHERE", "JAVASCRIPT_GROUPS", "SITE_TOOL_WRITES", "USER", "ConfirmTokens",
           "HeldStep", "Policy", "PolicyDriver", "TabOwners", "TakeoverPolicy", "TaskLeases", "owned_by_another"]

SITE_TOOL_WRITES = "site_tool_writes"
"""What a tab's node answers a ``callSiteTool`` tried as a read whose tool its page does not declare read-only."""

USER = "user"
"""The owner of tabs the bridge did not open for an agent."""

CAPABILITY_GROUPS = frozenset({"core", "automation"})
"""The capability groups routes and tools belong to (the spec's)."""
JAVASCRIPT_GROUPS = frozenset({"automation"})
"""The groups that allow an agent JavaScript through CDP (``Runtime.evaluate``...): the group whose containers carry
the ``js`` action to MCP clients."""

TakeoverPolicy = Literal["ask", "allow"]
"""Whether a ``force`` takeover of a task is held for a person (``ask``) or made at once (``allow``)."""


@dataclass(frozen=True, slots=True)
class Policy:
    """What the node allows an agent (the node's own policy, or one agent's: ``Node.policy_of``)."""

    read_only: bool = False
    ask_before_act: bool = False
    urls: UrlPolicy = UrlPolicy()
    user_tabs_writable: bool = False
    caps: frozenset[str] = CAPABILITY_GROUPS
    """The capability groups whose routes and tools it may use (every group unless told: the
    configuration's default, ``core``, is the configuration's)."""
    max_checkpoints: int = CHECKPOINT_CAPACITY
    """How many of its calls' checkpoints are kept, oldest pushed out first."""
    live_view: bool = True
    """Whether it may open Live Views of its tabs (a person sees and acts in them)."""
    tab_quota: int = QUOTA_TABS
    """Its tabs on a node at most (``quotas.tabs``)."""
    session_quota: int = QUOTA_SESSIONS
    """Its sessions on a node at most (``quotas.sessions``)."""
    task_takeover: TakeoverPolicy = "allow"
    """``ask``: every ``force`` takeover of its tasks is held for a person's approval (``tasks.takeover``)."""
    persist_sessions: bool = False
    """Whether its reuse sessions are persistent unless it opens one with ``persist: false`` (``sessions.persist``)."""


CLOSED = "closed"
"""The owner of a tab that has closed (ids are never reused: a write to it is ``tab_closed``)."""
ELSEWHERE = "elsewhere"
"""The owner of another node's tab, as this node sees it: that node admits each write to it against
its owner, at the moment the write arrives (``bridge.fleet.member``)."""


class TabOwners:
    """Which agent each tab belongs to; a takeover is one atomic change.

    A closed tab is remembered as closed (the last ``closed_capacity`` of them), so that a write
    to it answers ``tab_closed``, not that it belongs to nobody.
    """

    def __init__(self, closed_capacity: int = 10_000) -> None:
        self._owners: dict[int, str] = {}
        self._closed: collections.OrderedDict[int, KitsuneError | None] = collections.OrderedDict()
        """Closed tabs, each with the ``session_expired`` of the session whose end closed it, if one did."""
        self._closed_capacity = closed_capacity
        self._lock = threading.Lock()

    def owner(self, tab: int) -> str:
        """The agent that owns ``tab``, ``USER`` for a tab the bridge did not open for one, or ``CLOSED``."""
        with self._lock:
            return CLOSED if tab in self._closed else self._owners.get(tab, USER)

    def holds(self, tab: int) -> bool:
        """Whether this table knows ``tab``: an owner given, or closed."""
        with self._lock:
            return tab in self._owners or tab in self._closed

    def closed_error(self, tab: int) -> KitsuneError | None:
        """Why ``tab`` closed when it was more than a close: its session ended, its node left the fleet."""
        with self._lock:
            return self._closed.get(tab)

    def give(self, tab: int, agent: str) -> None:
        """Record a tab the bridge opened for ``agent``."""
        with self._lock:
            self._owners[tab] = agent

    def take_over(self, tab: int, agent: str) -> str:
        """Make ``agent`` the owner of ``tab``; the previous owner."""
        with self._lock:
            previous = self._owners.get(tab, USER)
            self._owners[tab] = agent
            return previous

    def closed_why(self, tab: int) -> Failure:
        """The failure of a write to a closed tab: ``session_expired`` when its session's end closed it."""
        with self._lock:
            expired = self._closed.get(tab)
        return Failure.of(expired) if expired is not None else Failure(f"Tab {tab} is closed", "tab_closed", False,
                                                                        {"tabId": tab})

    def closed(self, tab: int, expired: KitsuneError | None = None) -> None:
        """Record that ``tab`` closed: it has no owner any more."""
        with self._lock:
            self._owners.pop(tab, None)
            self._closed[tab] = expired
            while len(self._closed) > self._closed_capacity:
                self._closed.popitem(last=False)


def normalized(command: Command) -> bytes:
    """A command's parameters as a confirm token binds them (no tab, timeout or label)."""
    params = {k: v for k, v in command_to_json(command).items() if k not in ("tabId", "timeout", "label")}
    return orjson.dumps(params, option=orjson.OPT_SORT_KEYS)


@dataclass(frozen=True, slots=True)
class HeldStep:
    """The step of a container call a confirm token was issued for, when its approval needs it: a held
    one-shot ``newTab`` is approved by opening the tab in that call's session (``bridge.approvals``)."""

    agent: str
    call: int
    path: str


class ConfirmTokens:
    """Confirm tokens of ask-before-act: bound to agent, session, action, tab and parameters; 120 s; once.

    An approval given to one session never authorizes a call of another, even of the same agent. An agent
    holds at most ``CONFIRM_PER_AGENT`` unredeemed: past it, its own oldest goes, never another agent's.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._issued: dict[bytes, tuple[bytes, float, HeldStep | None, str]] = {}  # in order of expiry
        self._per_agent: dict[str, dict[bytes, None]] = {}  # each agent's tokens, oldest first
        self._lock = threading.Lock()

    @staticmethod
    def _binding(agent: str, session: str | None, action: str, tab: int | None, params: bytes) -> bytes:
        return digest(orjson.dumps([agent, session, action, tab]) + params)

    def issue(self, agent: str, session: str | None, command: Command, tab: int | None) -> str:
        """A token approving ``command`` on ``tab`` once, for ``agent``'s ``session``."""
        return self.issue_for(agent, session, command.action, tab, normalized(command))

    def redeem(self, token: str, agent: str, session: str | None, command: Command, tab: int | None) -> bool:
        """True once for a valid token issued for exactly this agent, session, action, tab and parameters."""
        return self.redeem_for(token, agent, session, command.action, tab, normalized(command))

    def issue_for(self, agent: str, session: str | None, action: str, tab: int | None, params: bytes,
                  held: HeldStep | None = None) -> str:
        """A token approving ``action`` (a command's, or another write's: a task's takeover) with ``params``
        (for the container call's step ``held``, when its approval needs to know it)."""
        token = new_token()
        key = token_hash(token)
        with self._lock:
            now = self._clock()
            self._drop_expired(now)
            mine = self._per_agent.setdefault(agent, {})
            if len(mine) >= CONFIRM_PER_AGENT:
                self._drop(next(iter(mine)))
            mine[key] = None
            self._issued[key] = (self._binding(agent, session, action, tab, params), now + CONFIRM_TTL, held, agent)
        return token

    def _drop_expired(self, now: float) -> None:
        """Forget the tokens expired at ``now``: the oldest first, all with the same lifetime."""
        while self._issued:
            key, (_, expires, _, _) = next(iter(self._issued.items()))
            if expires > now:
                return
            self._drop(key)

    def _drop(self, key: bytes) -> None:
        """Forget one token (the lock held)."""
        agent = self._issued.pop(key)[3]
        mine = self._per_agent[agent]
        del mine[key]
        if not mine:
            del self._per_agent[agent]

    def held_step(self, token: str, agent: str) -> HeldStep | None:
        """The container call's step a valid token of ``agent`` was issued for (it is not used up), or None."""
        with self._lock:
            found = self._issued.get(token_hash(token))
        if found is None or found[1] <= self._clock() or found[2] is None or found[2].agent != agent:
            return None
        return found[2]

    def hold(self, given: str | None, agent: str, session: str | None, action: str, tab: int | None,
             params: bytes, /, held: HeldStep | None = None, **state: Any) -> HeldForApproval | None:
        """None when ``given`` approves this action (it is used up), else the hold asking approval: a new
        confirm token in its state (``confirm_token_invalid`` when ``given`` was a token, but not this one)."""
        if given and self.redeem_for(given, agent, session, action, tab, params):
            return None
        token = self.issue_for(agent, session, action, tab, params, held)
        if not given:
            message, code = "The action needs approval; nothing was done", "needs_user"
        else:  # told apart from a first ask: the token given was wrong, used, expired or for another action
            message, code = ("The confirm token is not valid (wrong, used, expired or for another action); "
                             "the action needs approval again; nothing was done", "confirm_token_invalid")
        return HeldForApproval(Failure(message, code, False, {
            "reason": "approval", "detail": "confirmation_required" if code == "needs_user" else code,
            "action": action, "tabId": tab, **state, "confirm_token": token, "expires_in": CONFIRM_TTL}))

    def redeem_for(self, token: str, agent: str, session: str | None, action: str, tab: int | None,
                   params: bytes) -> bool:
        """True once for a valid token of :meth:`issue_for` with exactly these arguments."""
        key = token_hash(token)
        with self._lock:
            found = self._issued.get(key)
            if found is None or found[1] <= self._clock():
                return False
            if not digests_equal(found[0], self._binding(agent, session, action, tab, params)):
                return False
            self._drop(key)
        return True


def _url_of(command: Command) -> str | None:
    if isinstance(command, Navigate) and isinstance(command.url, str):
        return command.url
    if isinstance(command, NewTab) and isinstance(command.url, str):
        return command.url
    if isinstance(command, Cdp) and command.method == "Page.navigate":  # a URL that is not a string: refused too
        url = (command.params or {}).get("url")
        return url if isinstance(url, str) else ""
    return None


def _cdp_refusal(command: Command, policy: Policy) -> Failure | None:
    """``cdp_method_refused`` for a method that runs script, when ``policy`` allows the agent no JavaScript."""
    if not isinstance(command, Cdp) or policy.caps & JAVASCRIPT_GROUPS:
        return None
    rule = rule_of(command.method)
    if rule is None or rule.kind != "javascript":
        return None
    return Failure(f"{command.method} is refused: it {rule.why}, and JavaScript needs the "
                   f"{'/'.join(sorted(JAVASCRIPT_GROUPS))} capability group; nothing was sent", "cdp_method_refused",
                   False, {"method": command.method})


def owned_by_another(tab: int, owner: str, agent: str, policy: Policy) -> Failure | None:
    """``tab_owned`` when ``agent``, under ``policy``, may not write ``tab`` owned by ``owner`` (a closed tab,
    or another node's, is judged elsewhere); None when it may."""
    if owner in (agent, ELSEWHERE, CLOSED) or (owner == USER and policy.user_tabs_writable):
        return None
    whose = "a user tab" if owner == USER else "owned by another agent"
    return Failure(f"Tab {tab} is {whose}; take it over to write to it", "tab_owned", False,
                   {"tabId": tab, "owner": "user" if owner == USER else "agent"})


class TaskLeases(Protocol):
    """The tasks' hold on tabs (``bridge.tasks``): only a task's lease holder writes its tabs."""

    def refusal(self, tab: int, agent: str, session: str | None) -> Failure | None:
        """Why ``session`` of ``agent`` may not write ``tab`` now (a task leases it), or None (from any thread)."""
        ...

    def looks_up(self, tab: int) -> bool:
        """Whether :meth:`refusal` of ``tab`` reads the tasks' store (a task holds it): never from the loop then."""
        ...


class _NoTasks:
    def refusal(self, tab: int, agent: str, session: str | None) -> Failure | None:
        return None

    def looks_up(self, tab: int) -> bool:
        return False


NO_TASKS = _NoTasks()
"""No task leases any tab (a node without tasks, the unit tests)."""


class PolicyDriver:
    """The engine's driver for one agent's session: every action passes the policy first."""

    def __init__(self, inner: Driver, agent: str, policy: Callable[[], Policy], owners: TabOwners,
                 confirms: ConfirmTokens, *, confirm_token: str | None = None, session: str | None = None,
                 leases: TaskLeases = NO_TASKS, on_refusal: Callable[[Outcome], None] = lambda outcome: None) -> None:
        self._inner = inner
        self._session = session
        """The agent's session the calls are for (``X-Kitsune-Session``): its tasks, its approvals."""
        self._leases = leases
        self._on_refusal = on_refusal
        """Told of every refusal and hold (metrics)."""
        self._agent = agent
        self._policy = policy
        self._owners = owners
        self._confirms = confirms
        self._confirm_token = confirm_token
        """A direct call's confirm token; container calls and resumes never carry one."""

    def refusal(self, command: Command, tab: int | None, *, as_read: bool = False) -> Outcome | None:
        """Why the policy stops ``command`` now (nothing sent), or None (``as_read``: run as a read)."""
        policy = self._policy()
        if tab is not None and command.acts_on_tab and self._owners.owner(tab) == CLOSED:
            return Failed(self._owners.closed_why(tab))
        if as_read or not is_write(command):
            return None
        refused = self._write_refusal(command, tab, policy)
        if refused is None and policy.ask_before_act:
            return self._ask(command, tab)
        return refused

    def judges_here(self, tab: int) -> bool:
        """Whether its judgement of a write to ``tab`` reads memory alone (no task's lease in the store to read): it
        may be made on the loop."""
        return not self._leases.looks_up(tab)

    def refused(self, command: Command, tab: int | None, *, as_read: bool = False) -> Outcome | None:
        """:meth:`refusal`, told to ``on_refusal`` (a command about to be run, or not)."""
        refused = self.refusal(command, tab, as_read=as_read)
        if refused is not None:
            self._on_refusal(refused)
        return refused

    def _write_refusal(self, command: Command, tab: int | None, policy: Policy) -> Failed | None:
        """Why the policy refuses ``command`` as a write (read-only mode, owners, leases, URL lists), or None."""
        if (cdp := _cdp_refusal(command, policy)) is not None:
            return Failed(cdp)
        if policy.read_only:
            return Failed(Failure("Read-only mode: writes are refused; nothing was sent", "read_only", False))
        if tab is not None and command.acts_on_tab and (
                owned := owned_by_another(tab, self._owners.owner(tab), self._agent, policy)) is not None:
            return Failed(owned)
        if tab is not None and command.acts_on_tab and (
                leased := self._leases.refusal(tab, self._agent, self._session)) is not None:
            return Failed(leased)
        url = _url_of(command)
        if url is not None and (denial := policy.urls.check(url)) is not None:
            return Failed(Failure(f"URL refused by policy: {denial.message}", "url_denied", False,
                                  {"reason": denial.reason, "host": denial.host}))
        return None

    def tries_as_read(self, command: Command, tab: int | None) -> bool:
        """Whether :meth:`execute` tries ``command`` as a read first: a ``callSiteTool`` the policy refuses or holds as
        a write but would let run as a read."""
        if not isinstance(command, CallSiteTool):
            return False
        policy = self._policy()
        return self.refusal(command, tab, as_read=True) is None and (
            policy.ask_before_act or self._write_refusal(command, tab, policy) is not None)

    def _ask(self, command: Command, tab: int | None) -> HeldForApproval | None:
        """Hold ``command`` for approval (None: ``confirm_token`` approves it). A one-shot ``newTab`` of a
        container call is bound to that call's session ``call:<id>`` and step, which its hold names."""
        call = CALL.get()
        if not isinstance(command, NewTab) or command.session != ONE_SHOT or call is None:
            return self._confirms.hold(self._confirm_token, self._agent, self._session, command.action, tab,
                                       normalized(command))
        name = one_shot_name(call)
        return self._confirms.hold(self._confirm_token, self._agent, self._session, command.action, tab,
                                   normalized(dataclasses.replace(command, session=name)),
                                   held=HeldStep(self._agent, call, STEP.get() or ""), session=name, call=call)

    def execute(self, command: Command, tab_id: int | None, timeout: float,
                recorded: Sequence[Recorded] = (), *, as_read: bool = False) -> Outcome:
        """Run ``command`` if the policy lets it. A ``callSiteTool`` the policy would refuse or hold as a write is
        tried as a read first: the tab's node runs it if its page declares the tool ``readOnlyHint`` (the
        page's declaration decides, never the caller), else it answers ``site_tool_writes`` with nothing sent,
        and the policy refuses or holds it as the write it is."""
        if not as_read and self.tries_as_read(command, tab_id):
            tried = self._inner.execute(command, tab_id, timeout, recorded, as_read=True)
            if not (isinstance(tried, Failed) and tried.failure.code == SITE_TOOL_WRITES):
                return tried
        refused = self.refused(command, tab_id, as_read=as_read)
        if refused is not None:
            return refused
        outcome = self._inner.execute(command, tab_id, timeout, recorded, as_read=as_read)
        if isinstance(outcome, Done) and isinstance(command, NewTab) and isinstance(outcome.value.get("tabId"), int):
            self._owners.give(outcome.value["tabId"], self._agent)
        return outcome

    def list_tabs(self) -> frozenset[int]:
        return self._inner.list_tabs()
