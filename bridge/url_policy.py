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
IP addresses or CIDR ranges; an IPv4-mapped IPv6 address (``[::ffff:127.0.0.1]``) matches the
rules of its IPv4 address and the other way round. Deny wins over allow; an empty allow list
allows every host that is not denied. Host rules cannot see DNS: ``0.0.0.0`` and ``[::]`` reach
the local host too, and a name may resolve to any address.
"""

from __future__ import annotations

import ipaddress
import re
import unicodedata
from collections.abc import Iterable
from dataclasses import dataclass, field
from urllib.parse import unquote_to_bytes

from messages.errors import KitsuneError

__all__ = ["Denial", "UrlPolicy", "normalize_host"]

_Address = ipaddress.IPv4Address | ipaddress.IPv6Address
_Network = ipaddress.IPv4Network | ipaddress.IPv6Network

_WEB_SCHEMES = frozenset({"http", "https", "ws", "wss"})
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
    """``scheme``, ``unparseable``, ``denied`` (a deny rule matched) or ``not_allowed`` (no allow rule did)."""
    host: str | None
    """The normalized host that was judged; None when the URL has no host or does not parse."""
    message: str
    """For a person: names the host or the scheme, never the URL's userinfo, path or query."""


@dataclass(frozen=True, slots=True)
class _Rules:
    hosts: frozenset[str]
    suffixes: tuple[str, ...]
    networks: tuple[_Network, ...]

    def match(self, host: str) -> bool:
        address = _address(host)
        if address is None:
            return host in self.hosts or host.endswith(self.suffixes)
        return any(a in network for a in _equivalents(address) for network in self.networks)


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
        host = _host_of(url)
        if not isinstance(host, str):
            return host
        if self._deny.match(host):
            return Denial("denied", host, f"host {host} is denied by the URL policy")
        if self.allow and not self._allow.match(host):
            return Denial("not_allowed", host, f"host {host} is not in the URL allow list")
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


def _host_of(url: str) -> str | Denial | None:
    """The normalized host of a web URL; None for about:blank; a Denial for anything else."""
    text = url.strip(_C0_OR_SPACE).translate(_NO_TAB_OR_NEWLINE)
    scheme = _SCHEME.match(text)
    if scheme is None:
        return _unparseable("it has no scheme")
    name, rest = scheme[0][:-1].lower(), text[scheme.end() :]
    if name == "about" and rest == "blank":
        return None
    if name not in _WEB_SCHEMES:
        return Denial("scheme", None, f"scheme {name}: is not allowed (only http, https, ws, wss and about:blank)")
    authority = _AUTHORITY_END.split(rest.lstrip("/\\"), maxsplit=1)[0]
    host, port = _split_port(authority.rpartition("@")[2])
    if not host:
        return _unparseable("it has no host")
    if port and not (port.isascii() and port.isdigit() and int(port) <= 65535):
        return _unparseable("its port is not valid")
    try:
        return normalize_host(host)
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


def _address(host: str) -> _Address | None:
    try:
        return ipaddress.ip_address(host.removeprefix("[").removesuffix("]"))
    except ValueError:
        return None


def _equivalents(address: _Address) -> tuple[_Address, ...]:
    """An address and its IPv4 / IPv4-mapped IPv6 twin."""
    if isinstance(address, ipaddress.IPv4Address):
        return address, ipaddress.IPv6Address(0xFFFF << 32 | int(address))
    return (address,) if address.ipv4_mapped is None else (address, address.ipv4_mapped)


def _parse_rule(rule: str, which: str) -> tuple[str, str | _Network]:
    """A rule's normal form and what it matches: a host, a ``.suffix`` or a network."""
    text = rule.strip() if isinstance(rule, str) else ""
    try:
        if "/" in text:
            network = ipaddress.ip_network(text.replace("[", "").replace("]", ""))
            if isinstance(network, ipaddress.IPv4Network):
                return str(network), network
            return f"{_format_ipv6(int(network.network_address))}/{network.prefixlen}", network
        if text.startswith("*."):
            domain = normalize_host(text[2:])
            if _address(domain) is None:
                return f"*.{domain}", f".{domain}"
        else:
            host = normalize_host(f"[{text}]" if ":" in text and not text.startswith("[") else text)
            address = _address(host)
            return (host, host) if address is None else (host, ipaddress.ip_network(address))
    except ValueError:
        pass
    raise KitsuneError(
        "invalid_config",
        f"URL {which} rule {rule!r} is not a host, a *.domain wildcard, an IP address or a CIDR range",
        state={"list": which, "rule": str(rule)},
    )


def _parse_rules(rules: Iterable[str], which: str) -> list[tuple[str, str | _Network]]:
    if isinstance(rules, str):
        raise KitsuneError("invalid_config", f"URL {which} rules must be a list of rules, not one string",
                           state={"list": which, "rule": rules})
    return [_parse_rule(rule, which) for rule in rules]


def _normal_forms(rules: Iterable[str], which: str) -> tuple[str, ...]:
    return tuple(rule for rule, _ in _parse_rules(rules, which))


def _compile(rules: Iterable[str], which: str) -> _Rules:
    hosts: set[str] = set()
    suffixes: list[str] = []
    networks: list[_Network] = []
    for _, target in _parse_rules(rules, which):
        if isinstance(target, str):
            if target.startswith("."):
                suffixes.append(target)
            else:
                hosts.add(target)
        else:
            networks.append(target)
    return _Rules(frozenset(hosts), tuple(suffixes), tuple(networks))
