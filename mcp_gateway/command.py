"""``kitsune mcp``: the embedded bridge launched first (if any), then the front answers (``_handshake``),
then the bridge's groups are resolved, then the MCP SDK's gateway serves stdio (``stdio``). A client that
closes its input before the gateway took the channel over ends the process at once (the embedded bridge
stopped): nothing waits for a bridge that does not answer, nor for the SDK to load."""

from __future__ import annotations

import gc
import signal
import sys
from collections.abc import Callable

from mcp_gateway._embedded import EmbeddedBridge, leave

__all__ = ["run"]


def run(*, bridge: str | None, token_file: str | None, config: str | None, nats_url: str | None,
        configured_caps: Callable[[str | None], frozenset[str]]) -> int:
    """``kitsune mcp``: the embedded bridge launched, the front, then the bridge's groups, then the gateway; the
    exit status. ``configured_caps`` reads the embedded bridge's groups from its configuration file
    (``kitsune.config``)."""
    embedded = None if bridge else EmbeddedBridge(config=config, nats_url=nats_url)
    try:
        if embedded is not None:  # before anything else: NATS and Chromium start while the front and the SDK load
            embedded.launch()
        return _serve(bridge=bridge, token_file=token_file, config=config, configured_caps=configured_caps,
                      embedded=embedded)
    finally:
        if embedded is not None:
            signal.signal(signal.SIGTERM, signal.SIG_IGN)  # stopping the bridge is not to be cut short
            embedded.stop()


def _serve(*, bridge: str | None, token_file: str | None, config: str | None,
           configured_caps: Callable[[str | None], frozenset[str]], embedded: EmbeddedBridge | None) -> int:
    """The front, the bridge's groups, then the gateway over ``bridge`` or ``embedded``; the exit status."""
    from mcp_gateway._handshake import (  # noqa: PLC0415 (the tool table: loaded once the bridge was launched)
        GROUPS,
        Front,
        TokenRefused,
        bridge_caps,
        bridge_tasks,
        caps_from_env,
        new_session,
        read_token,
    )
    try:
        caps = caps_from_env(GROUPS)
        token = read_token(token_file) if bridge else ""
    except (OSError, ValueError) as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
        return 1
    session = new_session()
    # an embedded bridge has not started: no tasks to name; the gateway's loop serves calls before the SDK loaded
    front = Front.on_stdio(tasks_pending=bool(bridge), calls=True)
    front.on_early_end(lambda: leave(embedded))  # not waiting for the bridge's groups nor the SDK: nobody is left
    front.start()
    listed = None
    if bridge:
        front.know_tasks(bridge_tasks(bridge, token, session))
        try:
            listed, problem = bridge_caps(bridge, token, session)
        except TokenRefused as refused:  # no call of this process could ever pass: said, and it ends
            print(f"kitsune mcp: {refused}", file=sys.stderr, flush=True)
            return 1
        if problem is not None:  # said at start (MCP clients show standard error); calls answer bridge_unavailable
            print(f"kitsune mcp: {problem}; tools answer bridge_unavailable until it does", file=sys.stderr,
                  flush=True)
        front.know_caps(caps if listed is None else caps & listed)
        known = None  # the gateway asks the bridge again once what it heard here is 30 s old
    else:
        known = _configured_caps(configured_caps, config)
        if known is None:
            return 1
        front.know_caps(caps & known)
    from mcp_gateway.stdio import serve  # noqa: PLC0415 (the SDK: loaded while the front answers)
    if not gc.isenabled():  # off for the start (kitsune.cli): on, what the start made kept out of its passes
        gc.freeze()
        gc.enable()
    return serve(front, caps=caps, known=known, bridge=bridge, token=token, embedded=embedded, listed=listed,
                 session=session)


def _configured_caps(read: Callable[[str | None], frozenset[str]], config: str | None) -> frozenset[str] | None:
    """The embedded bridge's groups from its configuration; None (said on standard error) when it is invalid."""
    from messages.errors import KitsuneError  # noqa: PLC0415 (after the front started)
    try:
        return read(config)
    except (OSError, ValueError) as e:
        print(f"kitsune mcp: {e}", file=sys.stderr)
    except KitsuneError as e:
        print(f"kitsune mcp: {e.message}", file=sys.stderr)
    return None
