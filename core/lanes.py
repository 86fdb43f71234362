"""A call's steps before they start: their outline (``progress``'s shape), and a parallel's sequences (spec:
Parallel): the steps each will run, the tabs they act on and the barriers where they meet, as far as they are
known before anything runs."""

from __future__ import annotations

from collections.abc import Mapping

from core.blocks import Lookup, lookup_in
from core.ports import Ports
from messages.commands import (
    Broadcast,
    Command,
    If,
    Parallel,
    Sequence,
    SyncBarrier,
    While,
    children,
    is_write,
    leaf_paths,
    resolve_command,
)
from messages.errors import KitsuneError
from messages.events import OutlineStep
from messages.paths import StepPath
from messages.references import Ref
from messages.results import Failure, Result

__all__ = ["barriers", "check_sequences", "leaves", "outline_of", "tabs_needed"]


def leaves(steps: tuple[Command, ...], within: StepPath) -> list[tuple[StepPath, Command]]:
    """The steps resumed one by one in a list of steps (at ``within.i``)."""
    return [leaf for i, command in enumerate(steps) for leaf in leaf_paths(command, within.child(i))]


def barriers(steps: tuple[Command, ...], within: StepPath, plan: Mapping[str, str]) -> list[tuple[str, StepPath]]:
    """(name, path) of the barriers a sequence will meet in this run (``plan``: a resume's decisions)."""
    return [(command.barrier, path) for path, command in leaves(steps, within)
            if isinstance(command, SyncBarrier) and plan.get(path, "run") not in ("keep", "applied")]


def tabs_needed(steps: tuple[Command, ...], within: StepPath, tab: int | None, plan: Mapping[str, str],
                kept: Mapping[str, Result]) -> tuple[set[int], set[int]]:
    """Tabs the steps of a sequence that will run act on, known before they run: (read, written).

    ``kept`` holds the results of an earlier run, which the steps a resume keeps give.
    """
    reads: set[int] = set()
    writes: set[int] = set()
    paths = [within.child(i) for i in range(len(steps))]
    scope: list[Result | None] = [kept.get(p) if plan.get(p) == "keep" else None for p in paths]
    for command, path in zip(steps, paths, strict=True):
        if all(plan.get(p, "run") in ("keep", "applied") for p, _ in leaf_paths(command, path)):
            continue
        for target, writing in _targets(command, lookup_in(scope), tab):
            (writes if writing else reads).add(target)
    return reads, writes


def _targets(command: Command, lookup: Lookup, tab: int | None) -> list[tuple[int, bool]]:
    """(tab, writes) for each tab ``command`` and the commands inside it act on, where known now."""
    found: list[tuple[int, bool]] = []
    if isinstance(command, Broadcast):
        inner_writes = is_write(command.command)
        for target in command.tab_ids:
            if isinstance(target, int):
                found.append((target, inner_writes))
        return found
    own: int | None = None
    if isinstance(command.tab_id, int):
        own = command.tab_id
    elif isinstance(command.tab_id, Ref):
        try:
            value = resolve_command(command, lookup).tab_id
        except KitsuneError:
            value = None
        own = value if isinstance(value, int) else None
    elif command.acts_on_tab or isinstance(command, Sequence):
        own = tab
    if own is not None and command.acts_on_tab:
        found.append((own, is_write(command)))
    inner_tab = own if own is not None else tab
    if isinstance(command, If | While) and inner_tab is not None:
        found.append((inner_tab, True))
    for child in children(command):
        found += _targets(child.command, lookup, inner_tab)
    return found


def outline_of(command: Command, tab: int | None) -> OutlineStep:
    """The step's shape for ``progress``, with the tab it acts on when known before it runs."""
    own = command.tab_id if isinstance(command.tab_id, int) else None
    if isinstance(command, Sequence):
        inner = own if own is not None else (None if isinstance(command.tab_id, Ref) else tab)
        return OutlineStep("sequence", own, steps=tuple(outline_of(c, inner) for c in command.steps))
    if isinstance(command, Parallel):
        return OutlineStep("parallel", None, sequences=tuple(
            tuple(outline_of(c, tab) for c in seq) for seq in command.sequences))
    if own is None and command.acts_on_tab and command.tab_id is None:
        own = tab
    return OutlineStep(command.action, own)


def check_sequences(ports: Ports, call: int, lanes: Mapping[StepPath, tuple[Command, ...]], active: list[StepPath],
                    tab: int | None, plan: Mapping[str, str], claims: dict[str, set[int]],
                    prior_results: Mapping[str, Result], prior_claims: Mapping[str, frozenset[int]],
                    ) -> dict[StepPath, Failure]:
    """Refuse sequences before they start: tab_closed, tab_owned, tab_claimed (spec: Parallel). The tabs each
    sequence claims go into ``claims``; ``prior_*``: a resume's checkpoint."""
    if not active:
        return {}
    try:
        open_tabs = ports.driver.list_tabs()
    except KitsuneError as e:
        return {lane: Failure.of(e) for lane in active}
    refusals: dict[StepPath, Failure] = {}
    for lane in active:
        reads, writes = tabs_needed(lanes[lane], lane, tab, plan, prior_results)
        closed = sorted((reads | writes) - open_tabs)
        if closed:
            refusals[lane] = Failure(f"Tab {closed[0]} is closed; a closed tab is never replaced", "tab_closed",
                                     False, {"tabId": closed[0]})
            continue
        for t in sorted(writes | (prior_claims.get(lane, frozenset()) & open_tabs)):
            conflict = ports.claims.claim(call, lane, t)
            if conflict is not None:
                ports.claims.release(call, lane)
                claims.pop(lane, None)
                refusals[lane] = conflict
                break
            claims.setdefault(lane, set()).add(t)
    return refusals
