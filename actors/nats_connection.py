"""How a client connects to NATS: its credentials and TLS, and server URLs shown without secrets."""

from __future__ import annotations

import ssl
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

__all__ = ["NatsAuth", "display_url"]


@dataclass(frozen=True, slots=True)
class NatsAuth:
    """How a client proves who it is to NATS (one way at most) and checks the server's TLS."""

    user: str | None = None
    password: str | None = field(default=None, repr=False)
    creds_file: Path | None = None
    """A NATS JWT ``.creds`` file (user JWT and nkey seed)."""
    nkey_seed_file: Path | None = None
    """A file holding a user nkey seed (``SU...``)."""
    tls_ca_file: Path | None = None
    """CA bundle the server's certificate must chain to (the system's when None)."""
    tls_cert_file: Path | None = None
    """Client certificate, for servers that verify clients."""
    tls_key_file: Path | None = None

    def connect_options(self) -> dict[str, Any]:
        """Keyword arguments of nats-py's ``connect`` for these credentials and TLS options."""
        options: dict[str, Any] = {}
        if self.user is not None:
            options.update(user=self.user, password=self.password)
        if self.creds_file is not None:
            options["user_credentials"] = str(self.creds_file)
        if self.nkey_seed_file is not None:
            options["nkeys_seed"] = str(self.nkey_seed_file)
        if self.tls_ca_file or self.tls_cert_file:
            context = ssl.create_default_context(cafile=str(self.tls_ca_file) if self.tls_ca_file else None)
            if self.tls_cert_file is not None:
                context.load_cert_chain(self.tls_cert_file, self.tls_key_file)
            options["tls"] = context
        return options


def display_url(url: str) -> str:
    """Server URLs (comma-separated) without credentials, for logs, errors and printed lines."""
    shown = []
    for one in filter(None, (u.strip() for u in url.split(","))):
        parts = urlsplit(one if "://" in one else f"nats://{one}")
        host = parts.hostname or "?"
        shown.append(f"{parts.scheme}://{host}:{parts.port}" if parts.port else f"{parts.scheme}://{host}")
    return ", ".join(shown)
