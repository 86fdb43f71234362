"""``kitsune provision``: a joined cluster's streams and KV buckets made or brought up to date by its administrator.

A node's NATS user may make a missing stream but never update, purge or delete one
(``actors.nats_server.node_permissions``); this command is how a stream changes (a cluster grown
to three servers, a stream made by an older version). It connects as the administrator user of
deploy/nats (``kitsune-admin``, its password in ``NATS_ADMIN_PASSWORD``, or a ``.creds`` file),
with the TLS options of ``--config``'s ``nats`` section, and never as a node.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import sys
from dataclasses import replace
from pathlib import Path

from actors.nats_admin import provision
from actors.nats_connection import display_url
from actors.nats_server import ADMIN_USER
from core.settings import NatsAuth
from kitsune.config import load_config
from messages.errors import KitsuneError

__all__ = ["ADMIN_PASSWORD_ENV", "admin_auth", "run"]

ADMIN_PASSWORD_ENV = "NATS_ADMIN_PASSWORD"
"""The variable holding the administrator's password (deploy/nats reads the same name)."""


def admin_auth(args: argparse.Namespace, tls: NatsAuth) -> NatsAuth:
    """The administrator's credentials the arguments name, with ``tls``'s TLS options."""
    tls = replace(tls, user=None, password=None, creds_file=None, nkey_seed_file=None)
    if args.creds_file:
        return replace(tls, creds_file=Path(args.creds_file))
    password = os.environ.get(args.password_env)
    if not password:
        raise KitsuneError("invalid_config", f"the administrator's password is not in ${args.password_env}")
    return replace(tls, user=args.user or ADMIN_USER, password=password)


def run(args: argparse.Namespace) -> int:
    """Provision the streams; the exit status (2: a usage error, 1: NATS refused or did not answer)."""
    try:
        config = load_config(Path(args.config) if args.config else None)
        url = args.nats_url or config.node.nats.url
        if not url:
            raise KitsuneError("invalid_config", "no NATS to provision: pass --nats-url or set nats.url")
        auth = admin_auth(args, config.node.nats.auth)
    except KitsuneError as e:
        print(f"kitsune: cannot provision: {e.message}", file=sys.stderr)
        return 2
    try:
        names = asyncio.run(provision(url, auth))
    except KitsuneError as e:
        print(f"kitsune: {e.message}", file=sys.stderr)
        return 1
    print(f"kitsune provisioned {', '.join(names)} on {display_url(url)}", flush=True)
    return 0
