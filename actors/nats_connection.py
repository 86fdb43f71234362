"""How a client connects to NATS: its credentials and TLS, and server URLs shown without secrets."""

from __future__ import annotations

import ssl
from typing import Any
from urllib.parse import urlsplit

from core.settings import NatsAuth

__all__ = ["connect_options", "display_url"]


def connect_options(auth: NatsAuth) -> dict[str, Any]:
    """Keyword arguments of nats-py's ``connect`` for ``auth``'s credentials and TLS options."""
    options: dict[str, Any] = {}
    if auth.user is not None:
        options.update(user=auth.user, password=auth.password)
    if auth.creds_file is not None:
        options["user_credentials"] = str(auth.creds_file)
    if auth.nkey_seed_file is not None:
        options["nkeys_seed"] = str(auth.nkey_seed_file)
    if auth.tls_ca_file or auth.tls_cert_file:
        context = ssl.create_default_context(cafile=str(auth.tls_ca_file) if auth.tls_ca_file else None)
        if auth.tls_cert_file is not None:
            context.load_cert_chain(auth.tls_cert_file, auth.tls_key_file)
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
