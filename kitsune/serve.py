"""``kitsune serve``: one node (embedded NATS, local Chromium) and its HTTP API, until it drained or was stopped.

SIGTERM drains the node (``bridge.drain``: its calls in flight get ``drain_deadline`` seconds, then it leaves the
fleet) and the process exits 0 once it left; a drain started otherwise (``kitsune drain``) ends the same way.
SIGINT, or a second SIGTERM, stops at once: what runs on the node's tabs is interrupted.

Chromium starts launching first (``driver.process``: Playwright's API and the URL guard, loaded in a tenth of a
second), while the configuration and the node's modules load in a worker thread (half a second and more of CPU:
:mod:`kitsune.config`, :mod:`kitsune.node_server` with the driver's action table and the command language); its
embedded NATS starts as soon as the configuration is read (beside the node's modules); then the node starts and
serves. The MCP SDK behind ``/mcp`` loads with the first request there (``kitsune.app``), not with the node.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import importlib
import logging
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from bridge.logs import configure_logging
from driver.process import FirstLaunch  # Playwright's API and the URL guard: not the driver's action table

if TYPE_CHECKING:
    from actors.nats_server import EmbeddedNats
    from core.settings import Settings

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """Run the node the arguments describe; the exit status."""
    configure_logging(logging.INFO)  # JSON lines on standard error
    try:
        status = asyncio.run(_launched_first(args))
    except Exception as e:  # a start or stop that failed part-way: its actors' threads would keep the process alive
        logging.getLogger(__name__).critical("node stopped on an error (%s)", type(e).__name__)
        status = 1
    # every part is stopped by now (NATS, Chromium, actors, the audit file), or could not be: exit without the
    # interpreter's teardown, which took another 0.5 s and more here (and waits for every thread left), no Python
    # code running
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


async def _launched_first(args: argparse.Namespace) -> int:
    """Serve with a browser that launches while the configuration and the node's modules (the driver's with
    them) load, and an embedded NATS that starts once the configuration is read."""
    first = FirstLaunch()
    nats: EmbeddedNats | None = None
    try:
        config = await asyncio.to_thread(_configured, args)
        if config is not None:
            nats = await asyncio.to_thread(_embedded_nats, args, config)
            if nats is not None:
                nats.start_soon()
            await asyncio.to_thread(importlib.import_module, "kitsune.node_server")  # the driver's modules with it
    except BaseException:
        await first.stop()
        if nats is not None:
            await _stop(nats)
        raise
    if config is None:
        await first.stop()
        return 2
    from driver import ChromiumBrowser  # noqa: PLC0415 (loaded just above, off the loop)
    from kitsune.node_server import serve_http  # noqa: PLC0415
    return await serve_http(args, config, ChromiumBrowser(first=first), nats)


def _embedded_nats(args: argparse.Namespace, config: Settings) -> EmbeddedNats | None:
    """The node's embedded NATS server, not yet started; None where ``--nats-url`` or ``nats.url`` names one to join."""
    if args.nats_url or config.node.nats.url is not None:
        return None
    from actors.nats_server import EmbeddedNats  # noqa: PLC0415 (the NATS client alone, loaded off the loop)
    return EmbeddedNats(fleet=config.node.fleet)


async def _stop(nats: EmbeddedNats) -> None:
    """Stop an embedded server once its start ended (whatever the start's outcome)."""
    with contextlib.suppress(Exception):
        await nats.started()
    await asyncio.to_thread(nats.stop)


def _configured(args: argparse.Namespace) -> Settings | None:
    """The settings of ``--config`` and the environment, a generated token kept; None (said) when they are wrong."""
    from kitsune.config import load_config  # noqa: PLC0415 (loaded while Chromium launches)
    from kitsune.config_env import stray_variables  # noqa: PLC0415
    from kitsune.token_file import kept_token  # noqa: PLC0415
    from messages.errors import KitsuneError  # noqa: PLC0415
    try:
        config = load_config(Path(args.config) if args.config else None)
    except KitsuneError as e:  # the configuration is wrong: a usage error
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return None
    for warning in stray_variables(os.environ):
        print(f"kitsune: warning: {warning}", file=sys.stderr, flush=True)
    return kept_token(config, Path(args.state_dir))  # written once the node serves (announce)
