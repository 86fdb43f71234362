"""The node's forward proxy: Chromium reaches the network through it only, and it judges every connection.

Chromium is launched with ``--proxy-server`` set to this proxy and ``--proxy-bypass-list=<-loopback>``
(so that loopback goes through it too). It takes two kinds of request:

- ``CONNECT host:port``: TLS, and every WebSocket (Chromium tunnels ``ws:`` and ``wss:`` through a
  proxy with CONNECT), tunnelled as they are, without interception;
- absolute-form plain HTTP (``GET http://host:port/path HTTP/1.1``): sent on in origin form with
  ``Connection: close`` (a WebSocket upgrade keeps its ``Upgrade``), so that each request to
  another host comes on a connection of its own and is judged again.

Before it opens a connection the proxy judges the host and the port with the URL lists, resolves
the name itself (``localhost`` and ``*.localhost`` are loopback, as in Chromium), judges every
address the name resolved to against the deny rules and against the node's own endpoints (its
HTTP API, its NATS and this proxy, refused on every address of this machine whatever the lists
say), and then connects to one of those judged addresses: the name is never resolved a second
time, so DNS rebinding has nothing to switch. Anything else (another method without an absolute
``http:`` URL, another scheme, a malformed head) is refused. A refusal is a 403 with a short body,
and nothing is connected; an upstream that cannot be reached is a 502 (reason ``unreachable``, or
``unresolved`` when its name did not resolve). Both carry the header
``X-Kitsune-Proxy: <marker> <reason>``, with a marker drawn for each proxy, so that the driver can
tell the proxy's answers from a site's own (a site cannot guess the marker).
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import secrets
import socket
from collections.abc import Callable, Iterable
from urllib.parse import urlsplit

from core.url_policy import Address, Denial, UrlPolicy, target_of

__all__ = ["PROXY_HEADER", "Endpoint", "PolicyProxy", "endpoints_of"]

Endpoint = tuple[str, int]
"""A listening endpoint: a host (an address or a name) and a port."""

PROXY_HEADER = "x-kitsune-proxy"
"""The header of the proxy's own answers: ``<marker> <reason>``; reason is a Denial's, ``unreachable`` or
``unresolved``."""

_HEAD_LIMIT = 64 * 1024
_HEAD_TIMEOUT = 30.0
_CONNECT_TIMEOUT = 10.0
_CHUNK = 1 << 16
_HOP_BY_HOP = frozenset({b"connection", b"proxy-connection", b"keep-alive", b"proxy-authorization", b"te",
                         b"trailer"})
_LOOPBACK = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))


class _Unreachable(Exception):
    """The judged addresses of a host did not answer (``unreachable``), or its name did not resolve (``unresolved``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


class PolicyProxy:
    """A forward proxy on loopback, on the running asyncio loop, that judges every connection first."""

    def __init__(self, policy: Callable[[], UrlPolicy], own_endpoints: Callable[[], Iterable[Endpoint]], *,
                 marker: str | None = None) -> None:
        self.policy = policy
        """The URL lists as they are now (read for every connection)."""
        self.own_endpoints = own_endpoints
        """The node's listening endpoints besides this proxy's (read for every connection)."""
        self.marker = marker or secrets.token_hex(16)
        """Names the proxy's own answers in :data:`PROXY_HEADER` (drawn for it, or shared by a node's proxies)."""
        self.refusals = 0
        """How many connections it has refused."""
        self.unresolved = 0
        """How many connections it could not open because the name did not resolve."""
        self._server: asyncio.Server | None = None
        self._port = 0
        self._connections: set[asyncio.Task[None]] = set()

    @property
    def endpoint(self) -> Endpoint:
        """Where it listens (after :meth:`start`)."""
        return "127.0.0.1", self._port

    async def start(self) -> None:
        """Listen on a free loopback port."""
        self._server = await asyncio.start_server(self._serve, "127.0.0.1", 0, limit=_HEAD_LIMIT)
        self._port = self._server.sockets[0].getsockname()[1]

    async def stop(self) -> None:
        """Stop listening and end every connection it carries."""
        server, self._server = self._server, None
        if server is None:
            return
        server.close()
        for task in list(self._connections):
            task.cancel()
        await asyncio.gather(*self._connections, return_exceptions=True)
        await server.wait_closed()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        task = asyncio.current_task()
        assert task is not None
        self._connections.add(task)
        try:
            await self._handle(reader, writer)
        except (OSError, EOFError, asyncio.LimitOverrunError, asyncio.IncompleteReadError, TimeoutError,
                UnicodeError, ValueError):
            pass  # a client that went away or sent garbage: nothing to answer
        finally:
            self._connections.discard(task)
            writer.close()
            with contextlib.suppress(Exception):
                await writer.wait_closed()

    async def _handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await asyncio.wait_for(reader.readuntil(b"\r\n\r\n"), _HEAD_TIMEOUT)
        line, _, fields = head[:-4].partition(b"\r\n")
        method, target, version = line.decode("ascii").split(" ")
        tunnel = method == "CONNECT"
        url = f"https://{target}/" if tunnel else target
        if not (tunnel or url[:7].lower() == "http://"):
            return await self._refuse(writer, "scheme", "only CONNECT and http:// requests pass")
        try:
            judged = await self._judge(url)
            if isinstance(judged, Denial):
                return await self._refuse(writer, judged.reason, judged.message)
            upstream_reader, upstream = await self._open(*judged)
        except _Unreachable as e:
            return await self._refuse(writer, e.reason, str(e))
        closing = False
        try:
            if tunnel:
                writer.write(b"HTTP/1.1 200 Connection established\r\n\r\n")
            else:
                parts = urlsplit(target)
                path = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
                closing = not _has_field(fields, b"upgrade")
                upstream.write(f"{method} {path} {version}\r\n".encode("ascii") + _without_hop_by_hop(fields)
                               + (b"Connection: close" if closing else b"Connection: Upgrade") + b"\r\n\r\n")
            await _relay(reader, writer, upstream_reader, upstream, closing)
        finally:
            upstream.close()

    async def _judge(self, url: str) -> tuple[str, int, list[Address]] | Denial:
        """The host, port and judged addresses of a request's target, or why it is refused.

        Raises :class:`_Unreachable` when the name does not resolve.
        """
        target = target_of(url)
        if target is None:
            return Denial("scheme", None, "about:blank is not a network address")
        if isinstance(target, Denial):
            return target
        host, port = target
        policy = self.policy()
        denial = policy.check_host(host, port)
        if denial is not None:
            return denial
        addresses = await _resolve(host, port)
        for address in addresses:
            denial = policy.check_address(host, address, port)
            if denial is None and await self._is_own(address, port):
                denial = Denial("own_endpoint", host, f"host {host} port {port} is this node's own endpoint")
            if denial is not None:
                return denial
        return host, port, addresses

    async def _is_own(self, address: Address, port: int) -> bool:
        """Whether ``port`` of ``address`` is one of the node's endpoints (or this proxy)."""
        for own_host, own_port in (self.endpoint, *self.own_endpoints()):
            if own_port != port:
                continue
            try:
                owns = await _resolve(own_host, own_port)
            except _Unreachable:
                continue
            if address in owns or (any(_is_local(own) for own in owns) and _is_local(address)):
                return True
        return False

    async def _open(self, host: str, port: int,
                    addresses: list[Address]) -> tuple[asyncio.StreamReader, asyncio.StreamWriter]:
        """A connection to the first judged address that answers."""
        for address in addresses:
            with contextlib.suppress(OSError, TimeoutError):
                return await asyncio.wait_for(asyncio.open_connection(str(address), port, limit=_CHUNK),
                                              _CONNECT_TIMEOUT)
        raise _Unreachable("unreachable", f"host {host} port {port} did not answer")

    async def _refuse(self, writer: asyncio.StreamWriter, reason: str, message: str) -> None:
        """Answer 403 (502 when the upstream is ``unreachable`` or ``unresolved``) with a short body; nothing
        is connected."""
        failed = reason in ("unreachable", "unresolved")
        status = "502 Bad Gateway" if failed else "403 Forbidden"
        if not failed:
            self.refusals += 1
        if reason == "unresolved":
            self.unresolved += 1
        body = f"Kitsune's proxy: {message}\n".encode()
        writer.write(f"HTTP/1.1 {status}\r\nContent-Type: text/plain; charset=utf-8\r\n"
                     f"Content-Length: {len(body)}\r\nCache-Control: no-store\r\nConnection: close\r\n"
                     f"Proxy-Connection: close\r\nX-Kitsune-Proxy: {self.marker} {reason}\r\n\r\n".encode() + body)
        await writer.drain()


def endpoints_of(urls: str, default_port: int) -> set[Endpoint]:
    """The endpoints of comma-separated server URLs (``nats://a:4222,nats://b``)."""
    found: set[Endpoint] = set()
    for url in filter(None, (part.strip() for part in urls.split(","))):
        parts = urlsplit(url if "://" in url else f"//{url}")
        if parts.hostname:
            found.add((parts.hostname, parts.port or default_port))
    return found


async def _resolve(host: str, port: int) -> list[Address]:
    """The addresses a host name resolves to (in the resolver's order), without duplicates."""
    with contextlib.suppress(ValueError):
        return [ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))]
    if host == "localhost" or host.endswith(".localhost"):
        return list(_LOOPBACK)
    try:
        infos = await asyncio.wait_for(asyncio.get_running_loop().getaddrinfo(
            host, port, type=socket.SOCK_STREAM, proto=socket.IPPROTO_TCP), _CONNECT_TIMEOUT)
    except (OSError, TimeoutError, UnicodeError, RuntimeError) as e:  # RuntimeError: the loop is closing
        raise _Unreachable("unresolved", f"the name {host} did not resolve") from e
    return list(dict.fromkeys(ipaddress.ip_address(str(info[4][0]).partition("%")[0]) for info in infos))


def _is_local(address: Address) -> bool:
    """Whether an address is this machine's: loopback, unspecified, or one it can bind."""
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address.is_loopback or address.is_unspecified:
        return True
    family = socket.AF_INET if address.version == 4 else socket.AF_INET6
    with socket.socket(family, socket.SOCK_STREAM) as probe:
        try:
            probe.bind((str(address), 0))
        except OSError:
            return False
    return True


def _has_field(fields: bytes, name: bytes) -> bool:
    return any(line.partition(b":")[0].strip().lower() == name for line in fields.split(b"\r\n"))


def _without_hop_by_hop(fields: bytes) -> bytes:
    """Header lines without the hop-by-hop ones, each ending in CRLF."""
    return b"".join(line + b"\r\n" for line in fields.split(b"\r\n")
                    if line and line.partition(b":")[0].strip().lower() not in _HOP_BY_HOP)


async def _relay(client_reader: asyncio.StreamReader, client: asyncio.StreamWriter,
                 upstream_reader: asyncio.StreamReader, upstream: asyncio.StreamWriter, closing: bool) -> None:
    """Copy bytes both ways until either side ends; with ``closing``, the response head is passed on
    with ``Connection: close`` (so that Chromium never sends a second request on the connection)."""

    async def copy(reader: asyncio.StreamReader, writer: asyncio.StreamWriter, closing: bool = False) -> None:
        with contextlib.suppress(OSError, asyncio.IncompleteReadError, asyncio.LimitOverrunError):
            if closing:
                status, _, fields = (await reader.readuntil(b"\r\n\r\n"))[:-4].partition(b"\r\n")
                writer.write(status + b"\r\n" + _without_hop_by_hop(fields)
                             + b"Connection: close\r\nProxy-Connection: close\r\n\r\n")
            while data := await reader.read(_CHUNK):
                writer.write(data)
                await writer.drain()

    copies = [asyncio.ensure_future(copy(client_reader, upstream)),
              asyncio.ensure_future(copy(upstream_reader, client, closing))]
    try:
        await asyncio.wait(copies, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in copies:
            task.cancel()
        await asyncio.gather(*copies, return_exceptions=True)
