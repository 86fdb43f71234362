"""A site off 127.0.0.1 holds its port number on 127.0.0.1 too.

Kitsune's proxy refuses its node's own ports (NATS, its proxies, its API) on every local address, so a site
on 127.0.0.3 whose port number happens to be one of those ports on 127.0.0.1 is refused as
``own_endpoint``. Holding the number on 127.0.0.1 for the site's lifetime (a bound socket without
SO_REUSEADDR, which no later bind on that address can share) keeps the two apart in both orders.
"""

from __future__ import annotations

import socket
from collections.abc import Callable
from socketserver import TCPServer
from typing import TypeVar

Server = TypeVar("Server", bound=TCPServer)

_PRIMARY = "127.0.0.1"
_ATTEMPTS = 20  # a port number already taken on 127.0.0.1 is rare: a few attempts always find a free one


def bind_held(host: str, make: Callable[[tuple[str, int]], Server]) -> tuple[Server, socket.socket | None]:
    """A server ``make`` bound at a free port of ``host``, and the socket holding that number on 127.0.0.1
    (None for a server on 127.0.0.1 itself); close the holder when the server closes.

    Raises :class:`OSError` when no free port of ``host`` is free on 127.0.0.1 too.
    """
    for _ in range(_ATTEMPTS):
        server = make((host, 0))
        if host == _PRIMARY:
            return server, None
        holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        try:
            holder.bind((_PRIMARY, server.server_address[1]))
        except OSError:
            holder.close()
            server.server_close()
            continue
        return server, holder
    raise OSError(f"no free port of {host} was also free on {_PRIMARY} in {_ATTEMPTS} attempts")
