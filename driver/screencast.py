"""A tab's screencast and a person's input, over the Chrome DevTools Protocol.

``Page.startScreencast`` sends a JPEG frame each time the page paints, and no more frames until
the last one is acknowledged (``Page.screencastFrameAck``). A frame is acknowledged once it went out
(its ``on_frame`` returned: a send waits while the connection's buffer is full): a slow connection gets
fewer frames, never a queue, and a fast one never waits for a round trip to the person. Mouse, wheel and keys go to
the page through ``Input.dispatch*Event``, typed text through ``Input.insertText``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Awaitable, Callable, Mapping
from typing import Any

from playwright.async_api import CDPSession, Page
from playwright.async_api import Error as PlaywrightError

__all__ = ["Frame", "Screencast", "input_event"]

Frame = dict[str, Any]
"""A frame as the viewer gets it: ``{"type": "frame", "data": base64 JPEG, "width", "height", "frame"}``."""

_MOUSE_EVENTS = frozenset({"mousePressed", "mouseReleased", "mouseMoved"})
_KEY_EVENTS = frozenset({"keyDown", "keyUp", "rawKeyDown", "char"})
_BUTTONS = frozenset({"none", "left", "middle", "right", "back", "forward"})
_MAX_TEXT = 10_000


class Screencast:
    """The screencast of one page, and the input sent to it, on a CDP session of its own."""

    def __init__(self, page: Page, on_frame: Callable[[Frame], Awaitable[None]], *, quality: int = 70,
                 max_width: int = 1600, max_height: int = 1200) -> None:
        self._page = page
        self._on_frame = on_frame
        self._params = {"format": "jpeg", "quality": quality, "maxWidth": max_width, "maxHeight": max_height}
        self._cdp: CDPSession | None = None
        self.frames = 0

    async def start(self) -> None:
        """Attach to the page and start the screencast; the first frame follows at once."""
        self._cdp = await self._page.context.new_cdp_session(self._page)
        self._cdp.on("Page.screencastFrame", self._frame)
        await self._cdp.send("Page.startScreencast", self._params)

    async def _frame(self, event: Mapping[str, Any]) -> None:
        meta = event.get("metadata", {})
        self.frames += 1
        await self._on_frame({"type": "frame", "data": event["data"], "frame": self.frames,
                              "width": meta.get("deviceWidth"), "height": meta.get("deviceHeight")})
        if self._cdp is not None:  # it went out: the next may come
            with contextlib.suppress(PlaywrightError):  # the page or the screencast may be gone meanwhile
                await self._cdp.send("Page.screencastFrameAck", {"sessionId": int(event["sessionId"])})

    async def send_input(self, message: Mapping[str, Any]) -> None:
        """Send one input message of the viewer to the page (see :func:`input_event`)."""
        if self._cdp is None:
            return
        method, params = input_event(message)
        await self._cdp.send(method, params)

    async def stop(self) -> None:
        """Stop the screencast and detach (the page may be gone already)."""
        cdp, self._cdp = self._cdp, None
        if cdp is not None:
            with contextlib.suppress(PlaywrightError):
                await cdp.send("Page.stopScreencast")
                await cdp.detach()


def _number(message: Mapping[str, Any], key: str, default: float = 0.0) -> float:
    value = message.get(key, default)
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise ValueError(f"{key} must be a number")
    return float(value)


def _modifiers(message: Mapping[str, Any]) -> int:
    value = message.get("modifiers", 0)
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 15:
        raise ValueError("modifiers must be an integer from 0 to 15")
    return value


def input_event(message: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The CDP method and parameters of a viewer's input message; ValueError naming what is wrong.

    ``{"type": "mouse", "event": "mousePressed"|"mouseReleased"|"mouseMoved", "x", "y", "button", "buttons",
    "clickCount", "modifiers"}``, ``{"type": "wheel", "x", "y", "deltaX", "deltaY"}``,
    ``{"type": "key", "event": "keyDown"|"keyUp"|..., "key", "code", "text", "keyCode", "modifiers"}``,
    ``{"type": "text", "text"}``. Coordinates are CSS pixels of the page's viewport.
    """
    kind = message.get("type")
    if kind == "mouse":
        event, button = message.get("event"), message.get("button", "none")
        if event not in _MOUSE_EVENTS or button not in _BUTTONS:
            raise ValueError("mouse: event or button is not one CDP knows")
        return "Input.dispatchMouseEvent", {
            "type": event, "x": _number(message, "x"), "y": _number(message, "y"), "button": button,
            "buttons": int(_number(message, "buttons")), "clickCount": int(_number(message, "clickCount")),
            "modifiers": _modifiers(message)}
    if kind == "wheel":
        return "Input.dispatchMouseEvent", {
            "type": "mouseWheel", "x": _number(message, "x"), "y": _number(message, "y"),
            "deltaX": _number(message, "deltaX"), "deltaY": _number(message, "deltaY"),
            "modifiers": _modifiers(message)}
    if kind == "key":
        event = message.get("event")
        if event not in _KEY_EVENTS:
            raise ValueError("key: event must be keyDown, keyUp, rawKeyDown or char")
        params: dict[str, Any] = {"type": event, "modifiers": _modifiers(message)}
        for name in ("key", "code", "text"):
            value = message.get(name)
            if isinstance(value, str) and len(value) <= 32:
                params[name] = value
        if "text" in params:
            params["unmodifiedText"] = params["text"]
        code = message.get("keyCode")
        if isinstance(code, int) and not isinstance(code, bool) and 0 < code < 256:
            params["windowsVirtualKeyCode"] = params["nativeVirtualKeyCode"] = code
        return "Input.dispatchKeyEvent", params
    if kind == "text":
        text = message.get("text")
        if not isinstance(text, str) or len(text) > _MAX_TEXT:
            raise ValueError(f"text must be a string of at most {_MAX_TEXT} characters")
        return "Input.insertText", {"text": text}
    raise ValueError("an input message is a mouse, wheel, key or text message")
