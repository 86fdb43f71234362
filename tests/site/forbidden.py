"""A "forbidden" host for URL-policy tests: a TCP listener and a UDP socket that record every contact.

``Forbidden(host)`` listens on a free TCP port and binds a UDP socket on another (both on ``host``),
each in a daemon thread. ``connections`` counts every TCP connection accepted (before anything is
read from it), ``packets`` every UDP datagram: a test that the browser never reached it asserts
both stay 0. A TCP connection is answered with a small HTTP page when it sends a request, so that
a test that *should* reach it sees a page.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["Forbidden"]

_ANSWER = (b"HTTP/1.0 200 OK\r\nContent-Type: text/html\r\nContent-Length: 40\r\n\r\n"
           b"<title>Forbidden</title><h1>reached</h1>")


class Forbidden:
    """A TCP and a UDP endpoint on ``host`` that count whatever reaches them."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self._lock = threading.Lock()
        self._connections = 0
        self._packets = 0
        self._tcp = socket.create_server((host, 0))
        self._udp = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self._udp.bind((host, 0))
        self._stopping = threading.Event()
        self._threads = [threading.Thread(target=self._accept, daemon=True, name="forbidden-tcp"),
                         threading.Thread(target=self._receive, daemon=True, name="forbidden-udp")]

    @property
    def port(self) -> int:
        """The TCP port."""
        return int(self._tcp.getsockname()[1])

    @property
    def udp_port(self) -> int:
        return int(self._udp.getsockname()[1])

    def url(self, path: str = "/", scheme: str = "http") -> str:
        return f"{scheme}://{self.host}:{self.port}{path}"

    @property
    def contacts(self) -> tuple[int, int]:
        """(TCP connections, UDP packets) received so far."""
        with self._lock:
            return self._connections, self._packets

    def _accept(self) -> None:
        while not self._stopping.is_set():
            try:
                connection, _ = self._tcp.accept()
            except OSError:
                return
            with self._lock:
                self._connections += 1
            threading.Thread(target=self._answer, args=(connection,), daemon=True).start()

    @staticmethod
    def _answer(connection: socket.socket) -> None:
        with connection:
            connection.settimeout(2.0)
            try:
                if connection.recv(65536):
                    connection.sendall(_ANSWER)
            except OSError:
                return

    def _receive(self) -> None:
        while not self._stopping.is_set():
            try:
                self._udp.recvfrom(65536)
            except OSError:
                return
            with self._lock:
                self._packets += 1

    def __enter__(self) -> Forbidden:
        for thread in self._threads:
            thread.start()
        return self

    def __exit__(self, exc_type: type[BaseException] | None, exc: BaseException | None,
                 tb: TracebackType | None) -> None:
        self._stopping.set()
        for sock in (self._tcp, self._udp):
            with contextlib.suppress(OSError):  # so that a thread blocked in accept() or recvfrom() returns
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()
        for thread in self._threads:
            thread.join(timeout=5)

