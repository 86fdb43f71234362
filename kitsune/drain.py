"""``kitsune drain``: have a node leave its fleet gracefully (``bridge.drain``), as an operator.

The operator's token comes from ``KITSUNE_OPERATOR_TOKEN``. Without ``--node`` the node at ``--url`` drains
(its name from its ``/livez``); with it, the node of that name, through the node at ``--url``. ``--wait``
returns once the node left the fleet. The exit status is 0 when it did what it was asked, 1 otherwise (a
message says why), 2 without a token.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from typing import Any
from urllib.parse import quote

import httpx

__all__ = ["TOKEN_ENV", "run"]

TOKEN_ENV = "KITSUNE_OPERATOR_TOKEN"
_TIMEOUT = 15.0
_POLL = 0.5
_MARGIN = 60.0
"""Seconds ``--wait`` waits past the drain's deadline before it gives up."""


class _Failed(Exception):
    """What went wrong, said to the operator."""


def run(args: argparse.Namespace) -> int:
    token = os.environ.get(TOKEN_ENV, "").strip()
    if not token:
        print(f"kitsune drain: set {TOKEN_ENV} to an operator's token (the configuration's operators)",
              file=sys.stderr)
        return 2
    base = args.url.rstrip("/")
    try:
        with httpx.Client(base_url=base, headers={"Authorization": f"Bearer {token}"}, timeout=_TIMEOUT) as client:
            node = args.node or _answer(client.get("/livez"), 200)["node"]
            body = {"deadline": args.deadline} if args.deadline is not None else None
            state = _answer(client.post(f"/api/fleet/nodes/{quote(node, safe='')}/drain", json=body), 202)
            print(json.dumps(state), flush=True)
            if args.wait:
                _wait(client, node, itself=args.node is None, deadline=float(state.get("deadline") or 0))
                print(json.dumps({"node": node, "state": "left"}), flush=True)
    except httpx.HTTPError as e:
        print(f"kitsune drain: {base} did not answer ({type(e).__name__})", file=sys.stderr)
        return 1
    except _Failed as e:
        print(f"kitsune drain: {e}", file=sys.stderr)
        return 1
    return 0


def _answer(response: httpx.Response, status: int) -> dict[str, Any]:
    """The JSON body of an answer with ``status``; :class:`_Failed` with its error code and message otherwise."""
    try:
        body = response.json()
    except ValueError:
        body = None
    if response.status_code != status or not isinstance(body, dict):
        error = body if isinstance(body, dict) else {}
        raise _Failed(f"{response.request.method} {response.request.url.path} answered {response.status_code} "
                      f"{error.get('code', '')}: {error.get('error', response.reason_phrase)}")
    return body


def _wait(client: httpx.Client, node: str, *, itself: bool, deadline: float) -> None:
    """Until ``node`` left the fleet, its deadline and a margin at most. The node at the URL (``itself``) stops
    once it left: its silence is that."""
    ends = time.monotonic() + deadline + _MARGIN
    while time.monotonic() < ends:
        try:
            state = _answer(client.get(f"/api/fleet/nodes/{quote(node, safe='')}/drain"), 200)
        except httpx.TransportError:
            if itself:
                return
            raise
        if state.get("state") == "left":
            return
        time.sleep(_POLL)
    raise _Failed(f"node {node} did not leave the fleet within {deadline + _MARGIN:g} s")
