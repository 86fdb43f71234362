"""``kitsune mcp``'s client of its bridge: an ``https`` bridge's certificate is checked against the system's trust
store; a bridge over plain HTTP (the embedded one) loads no store, and TLS, were it asked for, trusts nothing."""

from __future__ import annotations

import ssl

from mcp_gateway.stdio import _tls


def test_an_https_bridge_is_checked_against_the_system_trust_store() -> None:
    assert _tls("https://bridge.example:8765") is True
    assert _tls("HTTPS://bridge.example") is True


def test_a_plain_http_bridge_loads_no_trust_store_and_its_context_trusts_nothing() -> None:
    for url in (None, "http://127.0.0.1:8765"):
        context = _tls(url)
        assert isinstance(context, ssl.SSLContext)
        assert context.verify_mode == ssl.CERT_REQUIRED and context.check_hostname
        assert context.cert_store_stats()["x509_ca"] == 0
