"""Where the browser may go: URL allow and deny lists, judged on the host a browser would reach.

A URL is parsed as Chromium parses it (the WHATWG URL standard), so the host judged is the host
the browser connects to, whatever tricks the URL plays:

- leading and trailing C0 controls and spaces are stripped, tabs and newlines removed anywhere;
- only ``http``, ``https``, ``ws``, ``wss`` and exactly ``about:blank`` pass; ``ws`` and ``wss`` are
  judged like ``http`` and ``https`` because a WebSocket goes to a host like any request. Every
  other scheme (``data:``, ``javascript:``, ``file:``, ``blob:``, ``view-source:``...) is denied;
- in the authority, ``\\`` is a ``/``, the host follows the last ``@`` (userinfo is ignored), and
  a URL with no host, a bad port or an invalid host is ``unparseable``, hence denied;
- the host is percent-decoded, mapped to lowercase ASCII with IDNA (the stdlib's ``idna`` codec)
  and stripped of one trailing dot; a host ending in a number is an IPv4 address in any form
  Chromium takes (``127.1``, ``0x7f000001``, ``0177.0.0.1``, ``2130706433``...), and ``[...]``
  is IPv6, serialized as Chromium does (``[::ffff:7f00:1]``).

Where the stdlib cannot follow Chromium exactly, the host is refused as invalid rather than
guessed: names whose IDNA 2003 and UTS 46 forms may differ (``ß``, ``ς``, joiners, fillers, any
character newer than Unicode 3.2), characters Chromium escapes (space, ``*``) and empty labels.

Rules are hosts (``example.test``), sub-domain wildcards (``*.example.test``, not the apex),
IP addresses or CIDR ranges, and the first three may name a port (``shop.test:8443``,
``*.shop.test:443``, ``127.0.0.1:8080``, ``[::1]:80``); a rule without a port matches every
port, and a URL without one has its scheme's (80 for http and ws, 443 for https and wss). An
IPv4-mapped IPv6 address (``[::ffff:127.0.0.1]``) matches the rules of its IPv4 address and the
other way round; ``0.0.0.0`` and ``[::]`` reach this machine and match the rules of ``127.0.0.1``
and ``[::1]`` too, and so do ``localhost`` and ``*.localhost``, which Chromium sends to loopback
without asking DNS. Deny wins over allow; an empty allow list allows every host that is not denied.

A URL's host is judged without DNS (:meth:`UrlPolicy.check`); the node's proxy also judges every
address a name resolves to against the deny rules (:meth:`UrlPolicy.check_address`) before it
connects to that address.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from messages.errors import KitsuneError

__all__ = ["Address", "Denial", "UrlPolicy", "normalize_host", "target_of"]

Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_DEFAULT_PORTS = {"http": 80, "https": 443, "ws": 80, "wss": 443}
_LOOPBACK: tuple[Address, ...] = (ipaddress.IPv4Address("127.0.0.1"), ipaddress.IPv6Address("::1"))
_RULE_PORT = re.compile(r"(.*[^:]):([0-9]+)")
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_AUTHORITY_END = re.compile(r"[/\\?#]")
_C0_OR_SPACE = "".join(map(chr, range(0x21)))
_NO_TAB_OR_NEWLINE = str.maketrans("", "", "\t\n\r")
# WHATWG's forbidden domain code points, and "*" that Chromium escapes to "%2A".
_FORBIDDEN_IN_DOMAIN = frozenset(" #%*/:<>?@[\\]^|\x7f") | frozenset(map(chr, range(0x20)))
# Characters that IDNA 2003 (the stdlib codec) and UTS 46 (Chromium) map differently: the deviations
# (ß, final sigma, joiners), fillers UTS 46 ignores, a hyphen it keeps, ideographs Unicode 4.0 corrected.
_IDNA_DIFFERENCES = frozenset(
    "\u00df\u03c2\u200c\u200d\u115f\u1160\u17b4\u17b5\u3164\uffa0\u1806"
    "\U0002f868\U0002f874\U0002f91f\U0002f95f\U0002f9bf"
)
_NUMBER = re.compile(r"[0-9]+|0x[0-9a-f]*")
_DIGITS = {16: re.compile(r"[0-9a-f]+"), 8: re.compile(r"[0-7]+"), 10: re.compile(r"[0-9]+")}
_IPV6 = re.compile(r"[0-9A-Fa-f:.]+")
_ZERO_RUN = re.compile(r"(?<![^:])0(?::0)+(?![^:])")


@dataclass(frozen=True, slots=True)
class Denial:
    """Why the browser may not go to a URL."""

    reason: str
    """``scheme``, ``unparseable``, ``denied`` (a deny rule matched), ``not_allowed`` (no allow rule did)
    or, from the node's proxy, ``own_endpoint`` (the node's own API, NATS or proxy port)."""
    host: str | None
    """The normalized host that was judged; None when the URL has no host or does not parse."""
    message: str
    """For a person: names the host or the scheme, never the URL's userinfo, path or query."""


_Port = int | None
"""A rule's port; None matches every port."""


@dataclass(frozen=True, slots=True)
class _Rules:
    hosts: frozenset[tuple[str, _Port]]
    suffixes: tuple[tuple[str, _Port], ...]
    networks: tuple[tuple[_Network, _Port], ...]

    def match(self, host: str, port: int) -> bool:
        address = _address(host)
        if address is not None:
            return self.match_address(address, port)
        if (host, None) in self.hosts or (host, port) in self.hosts:
            return True
        if any(host.endswith(suffix) and rule_port in (None, port) for suffix, rule_port in self.suffixes):
            return True
        return _is_localhost(host) and any(self.match_address(a, port) for a in _LOOPBACK)

    def match_address(self, address: Address, port: int) -> bool:
        return any(a in network and rule_port in (None, port)
                   for a in _equivalents(address) for network, rule_port in self.networks)


@dataclass(frozen=True, slots=True)
class UrlPolicy:
    """The URL allow and deny lists of a node."""

    allow: tuple[str, ...] = ()
    """Host rules; empty allows every host that no deny rule matches."""
    deny: tuple[str, ...] = ()
    """Host rules; a match denies even when an allow rule matches too."""
    _allow: _Rules = field(init=False, repr=False, compare=False)
    _deny: _Rules = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "_allow", _compile(self.allow, "allow"))
        object.__setattr__(self, "_deny", _compile(self.deny, "deny"))

    @classmethod
    def from_config(cls, allow: Iterable[str] = (), deny: Iterable[str] = ()) -> UrlPolicy:
        """A policy with its rules checked and kept in their normal form (``*.EXAMPLE.test.`` → ``*.example.test``)."""
        return cls(_normal_forms(allow, "allow"), _normal_forms(deny, "deny"))

    def check(self, url: str) -> Denial | None:
        """None when the browser may go to ``url``, else why not."""
        target = target_of(url)
        return target if not isinstance(target, tuple) else self.check_host(*target)

    def check_host(self, host: str, port: int) -> Denial | None:
        """None when a connection to port ``port`` of ``host`` (in :func:`normalize_host` form) is allowed."""
        if self._deny.match(host, port):
            return Denial("denied", host, f"host {host} port {port} is denied by the URL policy")
        if self.allow and not self._allow.match(host, port):
            return Denial("not_allowed", host, f"host {host} port {port} is not in the URL allow list")
        return None

    def check_address(self, host: str, address: Address, port: int) -> Denial | None:
        """None unless a deny rule matches ``address``, an address ``host`` resolved to."""
        if self._deny.match_address(address, port):
            return Denial("denied", host, f"host {host} resolves to {address}, port {port} of which is "
                                          "denied by the URL policy")
        return None


def normalize_host(host: str) -> str:
    """The form hosts and rules are compared in, as a browser parses a URL's host; ValueError if invalid."""
    if host.startswith("["):
        if not host.endswith("]") or not _IPV6.fullmatch(host[1:-1]):
            raise ValueError("not a valid IPv6 address")
        return f"[{_format_ipv6(int(ipaddress.IPv6Address(host[1:-1])))}]"
    try:
        domain = _domain_to_ascii(unquote_to_bytes(host).decode("utf-8"))
    except UnicodeError as e:
        raise ValueError("not a valid domain name") from e
    if _FORBIDDEN_IN_DOMAIN.intersection(domain):
        raise ValueError("a domain name holds a forbidden character")
    labels = domain.split(".")
    if labels[-1] == "" and len(labels) > 1:
        labels.pop()
    if "" in labels:
        raise ValueError("a domain name holds an empty label")
    if _NUMBER.fullmatch(labels[-1]):
        return str(ipaddress.IPv4Address(_parse_ipv4(labels)))
    return ".".join(labels)


def target_of(url: str) -> tuple[str, int] | Denial | None:
    """The normalized host and the port of a web URL; None for about:blank; a Denial for anything else."""
    text = url.strip(_C0_OR_SPACE).translate(_NO_TAB_OR_NEWLINE)
    scheme = _SCHEME.match(text)
    if scheme is None:
        return _unparseable("it has no scheme")
    name, rest = scheme[0][:-1].lower(), text[scheme.end() :]
    if name == "about" and rest == "blank":
        return None
    if name not in _DEFAULT_PORTS:
        return Denial("scheme", None, f"scheme {name}: is not allowed (only http, https, ws, wss and about:blank)")
    authority = _AUTHORITY_END.split(rest.lstrip("/\\"), maxsplit=1)[0]
    host, port = _split_port(authority.rpartition("@")[2])
    if not host:
        return _unparseable("it has no host")
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return _unparseable("its port is not valid")
    try:
        return normalize_host(host), int(port) if port else _DEFAULT_PORTS[name]
    except ValueError:
        return _unparseable("its host is not valid")


def _unparseable(why: str) -> Denial:
    return Denial("unparseable", None, f"the URL does not parse: {why}")


def _split_port(host_port: str) -> tuple[str, str]:
    """Split ``host:port`` at the first colon outside brackets (WHATWG host state)."""
    inside = False
    for i, char in enumerate(host_port):
        if char in "[]":
            inside = char == "["
        elif char == ":" and not inside:
            return host_port[:i], host_port[i + 1 :]
    return host_port, ""


def _domain_to_ascii(domain: str) -> str:
    if domain.isascii():
        return domain.lower()
    if any(char in _IDNA_DIFFERENCES or unicodedata.ucd_3_2_0.category(char) == "Cn" for char in domain):
        raise UnicodeError("IDNA 2003 (Unicode 3.2) and UTS 46 may map this name differently")
    ascii_domain = domain.encode("idna").decode("ascii").lower()
    unicode_domain = ascii_domain.encode("ascii").decode("idna")
    if unicodedata.normalize("NFKC", unicode_domain.casefold()) != unicode_domain:
        raise UnicodeError("IDNA 2003 (Unicode 3.2) and UTS 46 may map this name differently")
    return ascii_domain


def _parse_ipv4(parts: list[str]) -> int:
    """The WHATWG IPv4 parser: 1 to 4 numbers, decimal, octal (``0`` prefix) or hex (``0x``)."""
    numbers = [_ipv4_number(part) for part in parts]
    if len(numbers) > 4 or any(n > 255 for n in numbers[:-1]) or numbers[-1] >= 256 ** (5 - len(numbers)):
        raise ValueError("not a valid IPv4 address")
    return sum(n << 8 * (3 - i) for i, n in enumerate(numbers[:-1])) + numbers[-1]


def _ipv4_number(part: str) -> int:
    if part.startswith("0x"):
        base, digits = 16, part[2:]
    elif part.startswith("0") and len(part) > 1:
        base, digits = 8, part[1:]
    else:
        base, digits = 10, part
    if base == 16 and not digits:
        return 0
    if not _DIGITS[base].fullmatch(digits):
        raise ValueError("not a valid IPv4 number")
    return int(digits, base)


def _format_ipv6(address: int) -> str:
    """WHATWG IPv6 serialization: lowercase hex pieces, the first longest run of 2+ zeros as ``::``."""
    text = ":".join(f"{address >> (112 - 16 * i) & 0xFFFF:x}" for i in range(8))
    run = max(_ZERO_RUN.finditer(text), key=lambda m: len(m[0]), default=None)
    return text if run is None else f"{text[: run.start()].rstrip(':')}::{text[run.end() :].lstrip(':')}"


def _address(host: str) -> Address | None:
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def _equivalents(address: Address) -> tuple[Address, ...]:
    """An address and its IPv4 / IPv4-mapped IPv6 twin; an unspecified address reaches loopback too."""
    if isinstance(address, ipaddress.IPv4Address):
        twins: tuple[Address, ...] = (address, ipaddress.IPv6Address(0xFFFF << 32 | int(address)))
    else:
        twins = (address,) if address.ipv4_mapped is None else (address, address.ipv4_mapped)
    if not any(a.is_unspecified for a in twins):
        return twins
    return (*twins, *_equivalents(_LOOPBACK[0]), _LOOPBACK[1])


def _is_localhost(host: str) -> bool:
    return host == "localhost" or host.endswith(".localhost")


def _parse_rule(rule: str, which: str) -> tuple[str, str | _Network, _Port]:
    """A rule's normal form, what it matches (a host, a ``.suffix`` or a network) and its port."""
    text = rule.strip() if isinstance(rule, str) else ""
    with_port = _RULE_PORT.fullmatch(text)
    if with_port and "/" not in text and (text.count(":") == 1 or with_port[1].endswith("]")):
        port = int(with_port[2])
        if 0 < port <= 65535:
            normal, target, _ = _parse_rule(with_port[1], which)
            return f"{normal}:{port}", target, port
        text = ""
    try:
        if "/" in text:
            network = ipaddress.ip_network(text.replace("[", "").replace("]", ""))
            if isinstance(network, ipaddress.IPv4Network):
                return str(network), network, None
            return f"{_format_ipv6(int(network.network_address))}/{network.prefixlen}", network, None
        if text.startswith("*."):
            domain = normalize_host(text[2:])
            if _address(domain) is None:
                return f"*.{domain}", f".{domain}", None
        else:
            host = normalize_host(f"[{text}]" if ":" in text and not text.startswith("[") else text)
            address = _address(host)
            return (host, host if address is None else ipaddress.ip_network(address), None)
    except ValueError:
        pass
    raise KitsuneError(
        "invalid_config",
        f"URL {which} rule {rule!r} is not a host, a *.domain wildcard or an IP address (each with an "
        "optional :port), or a CIDR range",
        state={"list": which, "rule": str(rule)},
    )


def _parse_rules(rules: Iterable[str], which: str) -> list[tuple[str, str | _Network, _Port]]:
    if isinstance(rules, str):
        raise KitsuneError("invalid_config", f"URL {which} rules must be a list of rules, not one string",
                           state={"list": which, "rule": rules})
    return [_parse_rule(rule, which) for rule in rules]


def _normal_forms(rules: Iterable[str], which: str) -> tuple[str, ...]:
    return tuple(rule for rule, _, _ in _parse_rules(rules, which))


def _compile(rules: Iterable[str], which: str) -> _Rules:
    hosts: set[tuple[str, _Port]] = set()
    suffixes: list[tuple[str, _Port]] = []
    networks: list[tuple[_Network, _Port]] = []
    for _, target, port in _parse_rules(rules, which):
        if isinstance(target, str):
            (suffixes.append if target.startswith(".") else hosts.add)((target, port))
        else:
            networks.append((target, port))
    return _Rules(frozenset(hosts), tuple(suffixes), tuple(networks))
