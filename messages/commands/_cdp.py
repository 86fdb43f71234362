"""The Chrome DevTools Protocol actions: ``cdp`` sends one method to a tab's own target, ``cdpEvents`` collects and
reads a tab's events, ``cdpSpec`` describes the protocol (the table of methods: :mod:`messages.cdp_methods`)."""

from __future__ import annotations

from dataclasses import dataclass

from messages.cdp_methods import CDP_DOMAIN, CDP_METHOD, EventDomain, rule_of
from messages.commands._actions import MAX_NAME, MAX_TEXT, Command, JsonObject, _param
from messages.errors import invalid_call


@dataclass(frozen=True, kw_only=True, slots=True)
class Cdp(Command):
    """Send one Chrome DevTools Protocol method to the tab's own target; its answer is the step's ``result``.

    A read or a write by its method (one table); methods that act outside the tab are refused
    (``cdp_method_refused``), and those that run script need JavaScript in the agent's capability groups.
    """

    action = "cdp"
    method: str = _param("Domain.method, as the protocol names it (cdpSpec lists them).", max_length=MAX_NAME,
                         pattern=CDP_METHOD)
    params: JsonObject | None = _param("The method's parameters (dropped from every log).", None, dropped=True,
                                       max_length=MAX_TEXT)

    def check(self, path: str) -> None:
        rule = rule_of(self.method)
        if rule is not None and rule.kind == "refused":
            raise invalid_call("cdp_method_refused", path, f"{self.method} is refused: it {rule.why}; nothing was sent",
                               param="method", method=self.method)


@dataclass(frozen=True, kw_only=True, slots=True)
class CdpEvents(Command):
    """Read the CDP events the tab collected since the last read, oldest first (bounded: the oldest dropped and
    counted); with ``enable``, start collecting those domains' events."""

    action = "cdpEvents"
    writes = False
    enable: tuple[EventDomain, ...] = _param("Domains to collect from now on (Runtime: console and exceptions; "
                                             "Page: lifecycle); absent: read what was collected.", ())


@dataclass(frozen=True, kw_only=True, slots=True)
class CdpSpec(Command):
    """Describe the protocol the tab's browser speaks: its domains' names, or one domain's types, commands (each
    with its class here: read, write, javascript or refused) and events."""

    action = "cdpSpec"
    writes = False
    domain: str | None = _param("The domain to describe; absent: the list of domain names.", None,
                                max_length=MAX_NAME, pattern=CDP_DOMAIN)


CDP_ACTIONS: tuple[type[Command], ...] = (Cdp, CdpEvents, CdpSpec)
