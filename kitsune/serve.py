"""``kitsune serve``: one node (embedded NATS, local Chromium) and its HTTP API, until SIGINT or SIGTERM.

Chromium starts launching first, while the node's modules load (:mod:`kitsune.node_server`: a second
and more of CPU, in a worker thread), then the node starts (NATS beside the launch's end) and serves.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib
import logging
import os
import sys
from pathlib import Path

from bridge.logs import configure_logging
from core.settings import Settings
from driver import ChromiumBrowser
from kitsune.config import load_config
from kitsune.config_env import stray_variables
from kitsune.token_file import kept_token
from messages.errors import KitsuneError

__all__ = ["serve"]


def serve(args: argparse.Namespace) -> int:
    """Run the node the arguments describe; the exit status."""
    configure_logging(logging.INFO)  # JSON lines on standard error
    try:
        config = load_config(Path(args.config) if args.config else None)
    except KitsuneError as e:  # the configuration is wrong: a usage error
        print(f"kitsune: cannot start: {e.message}", file=sys.stderr)
        return 2
    for warning in stray_variables(os.environ):
        print(f"kitsune: warning: {warning}", file=sys.stderr, flush=True)
    config = kept_token(config, Path(args.state_dir))  # written once the node serves (announce)
    status = asyncio.run(_launched_first(args, config))
    # every part is stopped by now (NATS, Chromium, actors, the audit file): exit without the
    # interpreter's teardown, which took another 0.5 s and more here, no Python code running
    logging.shutdown()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(status)


async def _launched_first(args: argparse.Namespace, config: Settings) -> int:
    """Serve with a browser that launches while the node's modules load."""
    browser = ChromiumBrowser()
    browser.launch_early()
    try:
        await asyncio.to_thread(importlib.import_module, "kitsune.node_server")
    except BaseException:
        await browser.stop()
        raise
    from kitsune.node_server import serve_http  # noqa: PLC0415 (loaded just above, off the loop)
    return await serve_http(args, config, browser)
