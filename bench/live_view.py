"""Benchmark: Live View's frames per second and input-to-frame latency, beside a plain CDP screencast.

The page is the test site's /form, prepared the same way on every side (through the agent API's
``js`` action on Kitsune's tabs, ``page.evaluate`` on the raw one): the text field ``#name`` has the
focus and no blinking caret (so a frame comes only when something changes), and F9 starts a
counter that repaints on every animation frame for a few seconds.

- **Live View**: a whole Kitsune node (embedded nats-server, Chromium, the actors) with the app over
  it (uvicorn, as ``kitsune serve``); the agent asks ``POST /api/tabs {"op": "live_view"}`` for a link
  and the bench is the person: it connects to ``/live/{tab}/ws`` with a WebSocket client
  (``websockets``) and sends input messages (the node acknowledges each frame once it sent it).
- **relayed**: the same, but the person reaches a second node of the fleet, which relays the
  WebSocket over NATS to the tab's node.
- **raw CDP**: a second ``ChromiumBrowser`` launched the same way, its page driven directly with raw
  Playwright: ``page.context.new_cdp_session(page)``, ``Page.startScreencast`` with Live View's
  parameters (JPEG, quality 70, at most 1600x1200), each frame acknowledged as it arrives, and
  ``Input.dispatchKeyEvent`` with the very parameters Live View sends for the same input message.

Each round, each side connects, then measures:

- **latency**: a key press (a letter, then Backspace, in turn: each changes the field) sent once the
  screen has been still for a while; the time from sending it to the arrival of the next frame,
  which is the first that shows it (the page paints nothing else meanwhile);
- **fps**: F9 starts the counter; frames arriving over the next seconds (after a short ramp-up),
  counted on the viewer's clock, and the intervals between them.

Then it checks that every key press reached the field (the page counts the field's changes in its
title, which an agent's read sees while a person holds the tab) and disconnects. Every side is
warmed up once, then rounds are interleaved (live relayed raw, raw relayed live, ...) so that noise
from other work on the machine hits them all. The ratios are Live View's over raw CDP's.

    .venv/bin/python bench/live_view.py [--rounds N] [--keys N]
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import itertools
import os
import statistics
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import Any, Protocol

import httpx
import orjson
from playwright.async_api import CDPSession, Page
from websockets.asyncio.client import ClientConnection, connect

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the repo root, for tests and bench

from bench.shared import load_line, p95, start_node
from driver import ChromiumBrowser
from driver.screencast import input_event
from kitsune.config import load_config
from tests.integration.serving import app_over
from tests.site import TestSite

ROUNDS = 5
WARMUP = 1
KEYS = 20
"""Key presses timed per round and side."""
STILL = 0.15
"""Seconds without a frame after which the screen counts as still."""
RAMP_UP = 0.3
FPS_SECONDS = 3.0
SCREENCAST = {"format": "jpeg", "quality": 70, "maxWidth": 1600, "maxHeight": 1200}
"""Live View's screencast parameters (driver/screencast.py), for the raw side."""
AGENT, TOKEN = "bench", "live-view-bench-token-0123456789"
SIDES = ("live", "relayed", "raw")

PREPARE = f"""(() => {{
  const style = document.createElement("style");
  style.textContent = "input, textarea {{ caret-color: transparent; }} #bench-counter {{ font: 48px monospace; }}";
  document.head.append(style);
  const counter = document.createElement("p");
  counter.id = "bench-counter";
  counter.textContent = "0";
  document.body.prepend(counter);
  let until = 0, shown = 0;
  const tick = () => {{
    if (performance.now() > until) return;
    counter.textContent = String(++shown);
    requestAnimationFrame(tick);
  }};
  document.addEventListener("keydown", (event) => {{
    if (event.key !== "F9") return;
    const running = performance.now() < until;
    until = performance.now() + {(RAMP_UP + FPS_SECONDS + 0.1) * 1000:.0f};
    if (!running) requestAnimationFrame(tick);
  }});
  let inputs = 0;
  document.addEventListener("input", () => {{ document.title = `inputs ${{++inputs}}`; }});
  document.getElementById("name").focus();
  return document.activeElement.id;
}})()"""
"""Hides the caret, focuses #name, makes F9 start the counter, and counts the field's changes in the title
(which a read sees while a person holds the tab)."""

Message = dict[str, Any]


def key(event: str, name: str, code: str, key_code: int, text: str | None = None) -> Message:
    """A Live View key message (as the page sends it)."""
    return {"type": "key", "event": event, "key": name, "code": code, "keyCode": key_code,
            **({"text": text} if text else {})}


def press(name: str) -> tuple[Message, Message]:
    """The key down and key up messages of a letter, Backspace or F9."""
    if len(name) == 1:
        return (key("keyDown", name, f"Key{name.upper()}", ord(name.upper()), name),
                key("keyUp", name, f"Key{name.upper()}", ord(name.upper())))
    code = {"Backspace": 8, "F9": 120}[name]
    return key("rawKeyDown", name, name, code), key("keyUp", name, name, code)


class Screen(Protocol):
    """A screencast as its viewer sees it: frames arriving, input going."""

    frames: asyncio.Queue[tuple[float, int]]
    """(``time.perf_counter()`` at arrival, JPEG bytes) of each frame, acknowledged already."""

    async def send(self, message: Message) -> None: ...

    async def close(self) -> None: ...


class LiveScreen:
    """A person's Live View connection: frames from the WebSocket, input to it."""

    def __init__(self, ws: ClientConnection) -> None:
        self.frames: asyncio.Queue[tuple[float, int]] = asyncio.Queue()
        self._ws = ws
        self._reading = asyncio.create_task(self._read())

    @classmethod
    async def open(cls, url: str) -> LiveScreen:
        base, token = url.split("#t=", 1)
        ws = await connect(base.replace("http://", "ws://") + "/ws", max_size=None, open_timeout=15)
        await ws.send(orjson.dumps({"type": "hello", "token": token}).decode())
        ready = orjson.loads(await asyncio.wait_for(ws.recv(), 15))
        assert ready["type"] == "ready", ready
        return cls(ws)

    async def _read(self) -> None:
        async for data in self._ws:
            arrived = time.perf_counter()
            message = orjson.loads(data)
            if message["type"] == "frame":  # the node acknowledges it to the screencast once sent
                self.frames.put_nowait((arrived, len(message["data"]) * 3 // 4))
            elif message["type"] in ("ended", "error"):
                raise RuntimeError(f"Live View: {message}")

    async def send(self, message: Message) -> None:
        await self._ws.send(orjson.dumps(message).decode())

    async def close(self) -> None:
        await self._ws.close()
        with contextlib.suppress(asyncio.CancelledError):
            self._reading.cancel()
            await self._reading


class RawScreen:
    """A plain CDP screencast of a page, on a CDP session of its own."""

    def __init__(self, cdp: CDPSession) -> None:
        self.frames: asyncio.Queue[tuple[float, int]] = asyncio.Queue()
        self._cdp = cdp
        cdp.on("Page.screencastFrame", self._frame)

    @classmethod
    async def open(cls, page: Page) -> RawScreen:
        screen = cls(await page.context.new_cdp_session(page))
        await screen._cdp.send("Page.startScreencast", SCREENCAST)
        return screen

    async def _frame(self, event: Message) -> None:
        arrived = time.perf_counter()
        await self._cdp.send("Page.screencastFrameAck", {"sessionId": event["sessionId"]})
        self.frames.put_nowait((arrived, len(event["data"]) * 3 // 4))

    async def send(self, message: Message) -> None:
        method, params = input_event(message)
        await self._cdp.send(method, params)

    async def close(self) -> None:
        await self._cdp.send("Page.stopScreencast")
        await self._cdp.detach()


@dataclass
class Round:
    """One side's figures of one round."""

    latencies: list[float] = field(default_factory=list)
    """Milliseconds from each key press to the frame that shows it."""
    intervals: list[float] = field(default_factory=list)
    """Milliseconds between the frames of the animation."""
    fps: float = 0.0
    frame_bytes: list[int] = field(default_factory=list)
    more_frames: int = 0
    """Frames after the first that key presses brought (0: each key press painted once)."""


async def still(screen: Screen) -> int:
    """Wait until no frame came for ``STILL`` seconds; how many came meanwhile."""
    came = 0
    with contextlib.suppress(TimeoutError):
        while True:
            await asyncio.wait_for(screen.frames.get(), STILL)
            came += 1
    return came


async def measure(screen: Screen, keys: int) -> Round:
    """The latency of ``keys`` key presses, then the frames of the animation."""
    result = Round()
    await still(screen)
    for i in range(keys):
        down, up = press("Backspace" if i % 2 else chr(ord("a") + i // 2 % 26))
        sent = time.perf_counter()
        await screen.send(down)
        arrived, size = await asyncio.wait_for(screen.frames.get(), 10)
        result.latencies.append((arrived - sent) * 1000)
        result.frame_bytes.append(size)
        await screen.send(up)
        result.more_frames += await still(screen)
    down, up = press("F9")
    started = time.perf_counter() + RAMP_UP
    await screen.send(down)
    await screen.send(up)
    arrivals = []
    while (left := started + FPS_SECONDS - time.perf_counter()) > 0:
        try:
            arrived, size = await asyncio.wait_for(screen.frames.get(), left)
        except TimeoutError:
            break
        if arrived >= started:
            arrivals.append(arrived)
            result.frame_bytes.append(size)
    assert len(arrivals) > 1, "the animation showed no frames"
    result.fps = (len(arrivals) - 1) / (arrivals[-1] - arrivals[0])
    result.intervals = [(b - a) * 1000 for a, b in itertools.pairwise(arrivals)]
    await still(screen)  # the animation is over before the next side runs
    return result


@contextlib.contextmanager
def kitsune() -> Iterator[tuple[str, str]]:
    """A node with the app over it, a second node of its fleet with its app: their base URLs."""
    config = load_config(None, {"KITSUNE_AGENTS": f"{AGENT}={TOKEN}", "KITSUNE_CAPS": "core,automation"})
    with tempfile.TemporaryDirectory(prefix="kitsune-bench-") as audit, contextlib.ExitStack() as stack:
        first = start_node(ChromiumBrowser(), Path(audit))
        stack.callback(first.stop)
        second = start_node(ChromiumBrowser(), Path(audit), joining=first)
        stack.callback(second.stop)
        yield stack.enter_context(app_over(first, config)), stack.enter_context(app_over(second, config))


async def agent_tab(agent: httpx.AsyncClient, url: str) -> int:
    """A tab the agent opens at ``url`` and prepares through the ``js`` action."""
    opened = (await agent.post("/api/tabs", json={"op": "open", "url": url})).json()
    assert opened["status"] == "ok", opened
    tab: int = opened["tabId"]
    prepared = (await agent.post("/api/act", json={"command": {"action": "js", "code": PREPARE, "tabId": tab}})).json()
    assert prepared.get("value") == "name", prepared
    return tab


@dataclass
class Side:
    """How a side connects, and the title of its page (which counts the field's changes)."""

    open: Callable[[], Awaitable[Screen]]
    title: Callable[[], Awaitable[str]]
    sessions: int = 0


async def run(site: TestSite, live_base: str, relay_base: str, rounds: int, keys: int) -> list[dict[str, Round]]:
    """Warm-up, then ``rounds`` interleaved rounds of the three sides."""
    raw_browser = ChromiumBrowser()
    await raw_browser.start()
    try:
        raw_page = raw_browser.page(await raw_browser.new_tab(site.url("/form")))
        assert await raw_page.evaluate(PREPARE) == "name"
        async with httpx.AsyncClient(base_url=live_base, headers={"Authorization": f"Bearer {TOKEN}"},
                                     timeout=60) as agent:
            tabs = {side: await agent_tab(agent, site.url("/form")) for side in ("live", "relayed")}

            async def live_view(side: str) -> Screen:
                answer = (await agent.post("/api/tabs", json={"op": "live_view", "tabId": tabs[side]})).json()
                url: str = answer["url"]
                return await LiveScreen.open(url if side == "live" else url.replace(live_base, relay_base))

            async def title(side: str) -> str:
                read = (await agent.post("/api/act", json={"command": {"action": "title", "tabId": tabs[side]}}))
                assert read.json()["status"] == "ok", read.text
                value: str = read.json()["title"]
                return value

            sides = {name: Side(partial(live_view, name), partial(title, name)) for name in ("live", "relayed")}
            sides["raw"] = Side(lambda: RawScreen.open(raw_page), raw_page.title)
            measured: list[dict[str, Round]] = []
            for r in range(-WARMUP, rounds):
                order = SIDES if r % 2 == 0 else tuple(reversed(SIDES))
                figures = {name: await session(sides[name], keys) for name in order}
                if r >= 0:
                    measured.append(figures)
            return measured
    finally:
        await raw_browser.stop()


async def session(side: Side, keys: int) -> Round:
    """Connect, wait for the first frame, measure (checking every key press changed the field), disconnect."""
    screen = await side.open()
    try:
        await asyncio.wait_for(screen.frames.get(), 15)
        figures = await measure(screen, keys)
        side.sessions += 1
        assert await side.title() == f"inputs {keys * side.sessions}", "a key press did not reach the field"
        return figures
    finally:
        await screen.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--rounds", type=int, default=ROUNDS, help="measured rounds of each side")
    parser.add_argument("--keys", type=int, default=KEYS, help="key presses timed per round and side")
    args = parser.parse_args()
    load_before = os.getloadavg()
    with TestSite() as site, kitsune() as (live_base, relay_base):
        rounds = asyncio.run(run(site, live_base, relay_base, args.rounds, args.keys))
    report(rounds, args.keys, load_before, os.getloadavg())


def report(rounds: list[dict[str, Round]], keys: int, load_before: tuple[float, ...],
           load_after: tuple[float, ...]) -> None:
    med = statistics.median

    def pooled(side: str, series: str) -> list[float]:
        return [value for sides in rounds for value in getattr(sides[side], series)]

    print(f"Live View: fps and input-to-frame latency on the test site's /form, {len(rounds)} interleaved rounds "
          f"per side after {WARMUP} warm-up ({keys} keys and {FPS_SECONDS:g} s of animation each), "
          f"{os.cpu_count()} CPUs")
    print(load_line(load_before, load_after))
    print("  round | fps:    live relayed     raw | key to frame, median ms:    live relayed     raw")
    for i, sides in enumerate(rounds, 1):
        fps_line = " ".join(f"{sides[side].fps:7.1f}" for side in SIDES)
        latency_line = " ".join(f"{med(sides[side].latencies):7.1f}" for side in SIDES)
        print(f"  {i:5d} | {fps_line:>28s} | {latency_line:>47s}")
    print("over all rounds: fps (median of rounds) | frame interval ms: median  p95 | key to frame ms: median"
          "   p95 | frame kB")
    figures: dict[str, tuple[float, float, float]] = {}
    for side in SIDES:
        fps = med([sides[side].fps for sides in rounds])
        intervals, latencies = pooled(side, "intervals"), pooled(side, "latencies")
        figures[side] = (fps, med(latencies), p95(latencies))
        frame_kb = statistics.mean(pooled(side, "frame_bytes")) / 1000
        print(f"  {side:8s} {fps:29.1f} | {med(intervals):26.1f} {p95(intervals):5.1f} | "
              f"{med(latencies):23.1f} {p95(latencies):5.1f} | {frame_kb:8.1f}")
    more = {side: sum(sides[side].more_frames for sides in rounds) for side in SIDES}
    print(f"frames after the first one a key press brought, over {keys * len(rounds)} key presses per side: "
          + ", ".join(f"{side} {count}" for side, count in more.items()))
    raw_fps, raw_median, raw_p95 = figures["raw"]
    for side in ("live", "relayed"):
        fps, median, tail = figures[side]
        print(f"{side} / raw CDP: fps {fps / raw_fps:.3f}, latency median {median / raw_median:.3f} "
              f"({median - raw_median:+.1f} ms), p95 {tail / raw_p95:.3f} ({tail - raw_p95:+.1f} ms)")

if __name__ == "__main__":
    main()
