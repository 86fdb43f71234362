"""Benchmark: what Kitsune adds to each step, against raw Playwright on the same kind of Chromium.

The same 200-step batch (clicks on #b0..#b9 of the test site's /clicks page alternating with
reads: ``title`` and ``pageText #local-count``) runs through a whole Kitsune node (embedded
nats-server with JetStream, Chromium, the actors: the call actor's engine, every step event to
JetStream, every step's audit entry to the audit stream, a write's dispatch and audit entry
stored before it is sent, the tab actor's mailbox -> Playwright driver -> back; the tab is the
node's own, so the request does not cross NATS) and through raw Playwright (async API, the same system
Chromium launched with the same flags by a second ``ChromiumBrowser``, its own page in its own
window, ``page.click``/``page.title``/``page.inner_text`` awaited directly). Both Chromiums reach
the site through their node's forward proxy (``driver/proxy.py``), as every Kitsune Chromium does;
the batch's steps send no request (the clicks only count in the page), so the proxy carries the
page load alone, and the Kitsune side's pages also pass the URL hook (``context.route``).

Per-step durations: for Kitsune, the interval from the step before's outcome event to the step's own
(``time.perf_counter()`` in a node event listener, ``bench/shared.py``'s ``StepClock``; the first step has none
before it and is left out): all the node does for the step; for raw Playwright, each awaited action. The added
cost of a step is its Kitsune duration minus the raw duration of the same step (same index) in the raw round run
next to it.
Every side is warmed up, then their rounds are interleaved (K R N, N R K, ...: N is the tab of
another node, below) so that noise from other work on the machine hits them all.

Kitsune's step is also split in two: the time inside ``ChromiumBrowser.execute`` (the driver,
timed by a subclass) and the rest (engine, events, NATS, actors: the infrastructure).

Clicks are quantized by the renderer's frames: Playwright waits for animation frames (the
element must be stable), so a click takes about two 60 Hz frames, and how long exactly depends
on when it starts relative to the frame clock. The gap before a click (the read step between
two clicks, plus Kitsune's own overhead) shifts that phase, so a click step can measure shorter
through Kitsune than raw, or a whole frame longer. The "frame-neutral" click ratio (raw click +
Kitsune's infrastructure time on clicks, over raw click) tells what Kitsune adds without that.

The same batch also runs on a tab of a second node that joins the first node's NATS, after one
read of a tab of the first node (a call on tabs of two nodes runs on the node it came to), so
that every request of it crosses NATS (a call reaches its own node's tabs through their actors'
mailboxes): its added cost is printed too.

The same node and raw page also run a batch of reads alone (``title`` and ``pageText #local-count`` alternating,
200 steps), interleaved with the others: in the mixed batch a read is also when the next click's records are made
ahead (its ``StepDispatched`` and audit entry: a write's records before it is sent, off its own path), so the reads'
batch is where a read step's own added cost shows.

Targets: a read step (the reads' batch) <= +0.15 ms; a click <= +0.5 ms; click ratio Kitsune/raw (medians) <= 1.05.

    .venv/bin/python bench/overhead.py [--rounds N]
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests.site

from actors.loop import IoLoop
from bench.shared import StepClock, TimedBrowser, alternating, commands, kind, load_line, start_node
from driver import ChromiumBrowser
from messages.commands import parse_body
from tests.nodes import open_user_tab, run_call
from tests.site import TestSite

STEPS = 200
ROUNDS = 6
WARMUP = 1
CLICK_RATIO_TARGET = 1.05

Round = dict[str, list[float]]
"""Per-step milliseconds of one round, in step order: "step" (and for Kitsune "driver")."""


READS = [("title", None), ("pageText", "#local-count")]
PLAN = alternating(STEPS, READS)
"""The batch: a click, a read, a click, a read..."""
READ_PLAN = READS * (STEPS // 2)
"""The reads' batch: ``title``, ``pageText``, ``title``... (no write: no step records a write ahead)."""
PLANS = {"mixed": PLAN, "reads": READ_PLAN}
READ_TARGET_MS = 0.15
CLICK_TARGET_MS = 0.5


class KitsuneSide:
    """A node with embedded NATS and its own Chromium, timing steps from its event listener.

    With ``remote``, the tab is on a second node that joins the first one's NATS, and the call also
    reads a tab of the first node first (a call on tabs of two nodes runs where it came in): every
    request of the batch to the other tab crosses NATS to reach it.
    """

    def __init__(self, site: TestSite, *, remote: bool = False, browser: TimedBrowser | None = None) -> None:
        self.browser = browser or TimedBrowser()
        self._audit = tempfile.TemporaryDirectory(prefix="kitsune-bench-")
        audit_dir = Path(self._audit.name)
        self.node = start_node(ChromiumBrowser() if remote else self.browser, audit_dir)
        self.tabs_node = start_node(self.browser, audit_dir, joining=self.node) if remote else None
        self.tab = open_user_tab((self.tabs_node or self.node), site.url("/clicks"))
        self._clock = StepClock(self.node)
        self._anchor = open_user_tab(self.node, site.url("/clicks")) if remote else None

    def round(self, plan: str = "mixed") -> Round:
        """One batch of ``PLANS[plan]``."""
        steps_of = PLANS[plan]
        sent = [("title", None), *steps_of] if self._anchor is not None else steps_of
        sent_commands = commands(sent)
        if self._anchor is not None:  # a first read on a tab of this node: the call runs here, the rest over NATS
            sent_commands[0]["tabId"] = self._anchor
        body = {"commands": sent_commands, "tabId": self.tab}
        self._clock.clear()
        self.browser.timings.clear()
        answer = run_call(self.node, parse_body("batch", body)).body
        assert answer.get("status") == "ok", answer.get("summary")
        assert len(self.browser.timings) == STEPS
        steps = self._clock.durations(sent)[len(sent) - len(steps_of):]  # the plan's steps only (from its second)
        return {"step": steps, "driver": self.browser.timings[1:]}

    def stop(self) -> None:
        if self.tabs_node is not None:
            self.tabs_node.stop()
        self.node.stop()
        self._audit.cleanup()


class RawSide:
    """Raw Playwright: a second Chromium launched the same way, driven directly on its own loop."""

    def __init__(self, site: TestSite) -> None:
        self.io = IoLoop()
        self.browser = ChromiumBrowser()
        self.io.run(self.browser.start(), timeout=60)
        tab = self.io.run(self.browser.new_tab(site.url("/clicks")), timeout=60)
        self.page = self.browser.page(tab)

    async def _round(self, plan: str) -> Round:
        page = self.page
        durations: list[float] = []
        for action, selector in PLANS[plan]:
            started = time.perf_counter()
            if action == "click":
                assert selector is not None
                await page.click(selector)
            elif action == "title":
                await page.title()
            else:
                assert selector is not None
                await page.inner_text(selector)
            durations.append((time.perf_counter() - started) * 1000)
        return {"step": durations[1:]}  # the steps Kitsune's intervals cover

    def round(self, plan: str = "mixed") -> Round:
        return self.io.run(self._round(plan), timeout=120)

    def stop(self) -> None:
        self.io.run(self.browser.stop(), timeout=60)
        self.io.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each side")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with TestSite() as site:
        kitsune, remote, raw = KitsuneSide(site), KitsuneSide(site, remote=True), RawSide(site)
        try:
            sides: dict[str, Callable[[], Round]] = {
                "kitsune": kitsune.round, "raw": raw.round, "remote": remote.round,
                "raw reads": lambda: raw.round("reads"), "kitsune reads": lambda: kitsune.round("reads")}
            for _ in range(WARMUP):
                for side in sides.values():
                    side()
            rounds: list[dict[str, Round]] = []
            for r in range(args.rounds):
                order = list(sides) if r % 2 == 0 else list(reversed(sides))
                rounds.append({side: sides[side]() for side in order})
        finally:
            for stopping in (kitsune, remote, raw):
                stopping.stop()
    report(rounds, load_before, os.getloadavg())
    report_reads(rounds)


def report(rounds: list[dict[str, Round]], load_before: tuple[float, ...], load_after: tuple[float, ...]) -> None:
    kinds = [kind(action) for action, _ in PLAN[1:]]

    def of(durations: list[float], k: str | None) -> list[float]:
        return [d for d, dk in zip(durations, kinds, strict=True) if k is None or dk == k]

    def pooled(side: str, series: str, k: str | None) -> list[float]:
        return [d for sides in rounds for d in of(sides[side][series], k)]

    def infra(k: str | None, side: str = "kitsune") -> list[float]:
        return [s - d for sides in rounds
                for s, d in zip(of(sides[side]["step"], k), of(sides[side]["driver"], k), strict=True)]

    def added(k: str | None, side: str = "kitsune") -> list[float]:
        return [a - b for sides in rounds
                for a, b in zip(of(sides[side]["step"], k), of(sides["raw"]["step"], k), strict=True)]

    med = statistics.median
    print(f"per-step overhead: {STEPS}-step batch (clicks alternating with title/pageText), {len(rounds)} "
          f"interleaved rounds per side after {WARMUP} warm-up, {os.cpu_count()} CPUs")
    print(load_line(load_before, load_after))
    print("  round | click: kitsune     raw   ratio | read: kitsune     raw | added/step")
    ratios = []
    for i, sides in enumerate(rounds, 1):
        mine, theirs = sides["kitsune"]["step"], sides["raw"]["step"]
        kc, rc = med(of(mine, "click")), med(of(theirs, "click"))
        ratios.append(kc / rc)
        print(f"  {i:5d} | {kc:12.2f} {rc:7.2f} {kc / rc:7.3f} | {med(of(mine, 'read')):11.2f} "
              f"{med(of(theirs, 'read')):7.2f} | {med([a - b for a, b in zip(mine, theirs, strict=True)]):+7.2f} ms")
    print("medians over all rounds (ms):")
    print("         kitsune step = driver + infrastructure |    raw | added per step")
    for k in ("click", "read"):
        print(f"  {k:5s} {med(pooled('kitsune', 'step', k)):13.2f}   {med(pooled('kitsune', 'driver', k)):8.2f} "
              f"  {med(infra(k)):14.2f} | {med(pooled('raw', 'step', k)):6.2f} | {med(added(k)):+8.2f}")
    step_added = med(added(None))
    raw_click = med(pooled("raw", "step", "click"))
    ratio = med(pooled("kitsune", "step", "click")) / raw_click
    neutral = (raw_click + med(infra("click"))) / raw_click
    click_added = med(added("click"))
    print(f"median added cost per step: {step_added:+.2f} ms; infrastructure alone {med(infra(None)):.2f} ms; "
          f"a click {click_added:+.2f} ms (target <= {CLICK_TARGET_MS} ms: "
          f"{'met' if click_added <= CLICK_TARGET_MS else 'NOT met'}); a read here also records the next click "
          f"ahead (its StepDispatched and audit entry): the reads' batch below has the read's own cost")
    print(f"click ratio kitsune/raw: {ratio:.3f} (rounds {min(ratios):.3f}..{max(ratios):.3f}; target <= "
          f"{CLICK_RATIO_TARGET}: {'met' if ratio <= CLICK_RATIO_TARGET else 'NOT met'}); frame-neutral "
          f"estimate {neutral:.3f} ({'met' if neutral <= CLICK_RATIO_TARGET else 'NOT met'})")
    print(f"tab on another node (every request over NATS): median added cost per step "
          f"{med(added(None, 'remote')):+.2f} ms (clicks {med(added('click', 'remote')):+.2f}, reads "
          f"{med(added('read', 'remote')):+.2f}); infrastructure alone {med(infra(None, 'remote')):.2f} ms "
          f"(clicks {med(infra('click', 'remote')):.2f}, reads {med(infra('read', 'remote')):.2f})")
    total_k = med([sum(sides["kitsune"]["step"]) for sides in rounds])
    total_r = med([sum(sides["raw"]["step"]) for sides in rounds])
    print(f"whole batch (steps 2..{STEPS}): kitsune {total_k:.0f} ms, raw {total_r:.0f} ms, "
          f"ratio {total_k / total_r:.3f}")


def report_reads(rounds: list[dict[str, Round]]) -> None:
    """The reads' batch: the added cost of a read step with no write around it, per action and in all."""
    actions = [action for action, _ in READ_PLAN[1:]]

    def series(side: str, name: str, action: str | None) -> list[float]:
        return [d for sides in rounds for d, a in zip(sides[side][name], actions, strict=True)
                if action is None or a == action]

    def added(action: str | None) -> float:
        return statistics.median(k - r for k, r in zip(series("kitsune reads", "step", action),
                                                       series("raw reads", "step", action), strict=True))

    med = statistics.median
    infra = med(s - d for s, d in zip(series("kitsune reads", "step", None),
                                       series("kitsune reads", "driver", None), strict=True))
    read_added = added(None)
    step, driver = med(series("kitsune reads", "step", None)), med(series("kitsune reads", "driver", None))
    print(f"reads' batch ({STEPS} reads, title and pageText alternating, no write), medians (ms): kitsune "
          f"{step:.2f} = driver {driver:.2f} + infrastructure {infra:.2f} | raw "
          f"{med(series('raw reads', 'step', None)):.2f}")
    print(f"  added per read step {read_added:+.2f} ms (title {added('title'):+.2f}, pageText {added('pageText'):+.2f};"
          f" target <= {READ_TARGET_MS} ms: {'met' if read_added <= READ_TARGET_MS else 'NOT met'})")


if __name__ == "__main__":
    main()
