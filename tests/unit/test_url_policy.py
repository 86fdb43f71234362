"""The URL policy: hosts judged as Chromium parses them, allow and deny lists, schemes."""

from __future__ import annotations

import dataclasses
import ipaddress

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.url_policy import Denial, UrlPolicy, normalize_host
from messages.errors import KitsuneError

POLICY = UrlPolicy.from_config(allow=["allowed.test"], deny=["127.0.0.1", "127.0.0.0/8", "denied.test"])


def denial(policy: UrlPolicy, url: str) -> Denial:
    result = policy.check(url)
    assert result is not None, f"{url!r} was allowed"
    return result


# --- the classic tricks: the host judged is the host the browser reaches ----------------------


@pytest.mark.parametrize(("url", "host"), [
    pytest.param("http://allowed.test@denied.test/", "denied.test", id="userinfo-is-ignored"),
    pytest.param("http://allowed.test:pw@denied.test/", "denied.test", id="userinfo-with-password-is-ignored"),
    pytest.param("http://a@allowed.test@denied.test/", "denied.test", id="host-follows-the-last-at"),
    pytest.param("http://denied.test\\@allowed.test/", "denied.test", id="backslash-ends-the-authority"),
    pytest.param("http:\\\\denied.test\\path", "denied.test", id="backslashes-are-slashes"),
    pytest.param("http:denied.test/", "denied.test", id="slashes-may-be-missing"),
    pytest.param("http:////denied.test/", "denied.test", id="extra-slashes-are-skipped"),
    pytest.param("HTTP://denied.test/", "denied.test", id="scheme-is-case-insensitive"),
    pytest.param("http://DeNiEd.TEST/", "denied.test", id="host-is-case-insensitive"),
    pytest.param("http://denied.test./", "denied.test", id="trailing-dot-is-removed"),
    pytest.param("http://denied.test:8080/", "denied.test", id="port-does-not-matter"),
    pytest.param("http://%64%65nied.test/", "denied.test", id="percent-encoded-host-is-decoded"),
    pytest.param("http://denied%2Etest/", "denied.test", id="percent-encoded-dot-is-decoded"),
    pytest.param("http://ｄｅｎｉｅｄ．ｔｅｓｔ/", "denied.test", id="idna-fullwidth-letters"),  # noqa: RUF001
    pytest.param("http://ⓓenied.test/", "denied.test", id="idna-enclosed-letter"),
    pytest.param("http://denied\u3002test/", "denied.test", id="idna-ideographic-full-stop"),
    pytest.param("http://den\u00adied.test/", "denied.test", id="idna-soft-hyphen-is-dropped"),
    pytest.param("http://127.1/", "127.0.0.1", id="ipv4-two-parts"),
    pytest.param("http://127.0.1/", "127.0.0.1", id="ipv4-three-parts"),
    pytest.param("http://0x7f000001/", "127.0.0.1", id="ipv4-hex"),
    pytest.param("http://0x7f.0.0.1/", "127.0.0.1", id="ipv4-hex-dotted"),
    pytest.param("http://0X7F.0.0.1/", "127.0.0.1", id="ipv4-hex-uppercase"),
    pytest.param("http://0177.0.0.1/", "127.0.0.1", id="ipv4-octal"),
    pytest.param("http://017700000001/", "127.0.0.1", id="ipv4-octal-single-number"),
    pytest.param("http://00000177.0.0.1/", "127.0.0.1", id="ipv4-octal-many-zeros"),
    pytest.param("http://2130706433/", "127.0.0.1", id="ipv4-single-decimal"),
    pytest.param("http://0x7f.0.01/", "127.0.0.1", id="ipv4-mixed-hex-decimal-octal"),
    pytest.param("http://0x7f.1/", "127.0.0.1", id="ipv4-mixed-two-parts"),
    pytest.param("http://127.0.0.1./", "127.0.0.1", id="ipv4-trailing-dot"),
    pytest.param("http://%31%32%37.0.0.1/", "127.0.0.1", id="ipv4-percent-encoded"),
    pytest.param("http://１２７.０.０.１/", "127.0.0.1", id="ipv4-fullwidth-digits"),  # noqa: RUF001
    pytest.param("http://127.255.0.9/", "127.255.0.9", id="ipv4-in-denied-range"),
    pytest.param("http://[::ffff:127.0.0.1]/", "[::ffff:7f00:1]", id="ipv6-mapped-dotted"),
    pytest.param("http://[::ffff:7f00:1]/", "[::ffff:7f00:1]", id="ipv6-mapped-hex"),
    pytest.param("http://[0:0:0:0:0:ffff:7f00:1]/", "[::ffff:7f00:1]", id="ipv6-mapped-expanded"),
    pytest.param("http://[::FFFF:7F00:1]:80/", "[::ffff:7f00:1]", id="ipv6-mapped-uppercase"),
    pytest.param("http://[::ffff:127.1.2.3]/", "[::ffff:7f01:203]", id="ipv6-mapped-in-denied-range"),
    pytest.param("  http://denied.test/  ", "denied.test", id="spaces-around-are-stripped"),
    pytest.param("\x00\x01http://denied.test/\x1f", "denied.test", id="c0-controls-around-are-stripped"),
    pytest.param("ht\ttp://de\nnied.te\rst/", "denied.test", id="tabs-and-newlines-are-removed"),
    pytest.param("http://127.0.\t0.1/", "127.0.0.1", id="tab-inside-an-address-is-removed"),
    pytest.param("ws://denied.test/", "denied.test", id="websocket-is-judged-by-host"),
    pytest.param("wss://127.1/", "127.0.0.1", id="secure-websocket-is-judged-by-host"),
])
def test_a_trick_is_judged_on_the_host_the_browser_reaches(url: str, host: str) -> None:
    result = denial(POLICY, url)
    assert (result.reason, result.host) == ("denied", host)


@pytest.mark.parametrize("url", [
    pytest.param("http://denied.test@allowed.test/", id="denied-host-as-userinfo"),
    pytest.param("http://127.0.0.1:80@allowed.test/", id="denied-address-as-userinfo"),
    pytest.param("http://denied.test%2F@allowed.test/", id="encoded-slash-in-userinfo"),
    pytest.param("http://allowed.test#@denied.test/", id="fragment-ends-the-authority"),
    pytest.param("http://allowed.test?@denied.test/", id="query-ends-the-authority"),
    pytest.param("http://allowed.test/@denied.test/", id="path-ends-the-authority"),
    pytest.param("HTTPS://ALLOWED.TEST.:443/a?next=http://denied.test/", id="denied-host-in-query"),
    pytest.param("https://allowed.test:/", id="empty-port"),
])
def test_a_trick_does_not_deny_the_host_the_browser_really_reaches(url: str) -> None:
    assert POLICY.check(url) is None


@pytest.mark.parametrize(("host", "normal"), [
    pytest.param("Example.TEST.", "example.test", id="case-and-trailing-dot"),
    pytest.param("b%C3%BCcher.test", "xn--bcher-kva.test", id="percent-encoded-utf8"),
    pytest.param("Bücher.test", "xn--bcher-kva.test", id="idna-to-punycode"),
    pytest.param("XN--BCHER-KVA.test", "xn--bcher-kva.test", id="punycode-is-lowercased"),
    pytest.param("\u0130.test", "xn--i-9bb.test", id="idna-dotted-capital-i"),
    pytest.param("a_b.test", "a_b.test", id="underscore-is-kept"),
    pytest.param("0", "0.0.0.0", id="ipv4-zero"),
    pytest.param("0x", "0.0.0.0", id="ipv4-bare-hex-prefix"),
    pytest.param("1.2.3.0x", "1.2.3.0", id="ipv4-bare-hex-prefix-last"),
    pytest.param("4294967295", "255.255.255.255", id="ipv4-largest-number"),
    pytest.param("1.16777215", "1.255.255.255", id="ipv4-last-part-fills-the-rest"),
    pytest.param("0000000000000000000000000127.1", "87.0.0.1", id="ipv4-long-octal"),
    pytest.param("a.b.1e2", "a.b.1e2", id="not-a-number-is-a-name"),
    pytest.param("[0:0:0:0:0:0:0:1]", "[::1]", id="ipv6-compressed"),
    pytest.param("[1:0:0:2:0:0:0:3]", "[1:0:0:2::3]", id="ipv6-longest-zero-run"),
    pytest.param("[1:0:0:2:0:0:3:4]", "[1::2:0:0:3:4]", id="ipv6-first-zero-run-on-a-tie"),
    pytest.param("[1:2:3:4:5:6:0:8]", "[1:2:3:4:5:6:0:8]", id="ipv6-single-zero-kept"),
    pytest.param("[::]", "[::]", id="ipv6-unspecified"),
    pytest.param("[::127.0.0.1]", "[::7f00:1]", id="ipv6-compatible"),
])
def test_normalize_host_gives_the_form_chromium_serializes(host: str, normal: str) -> None:
    assert normalize_host(host) == normal
    assert normalize_host(normal) == normal


@pytest.mark.parametrize("host", [
    pytest.param("", id="empty"),
    pytest.param(".", id="only-a-dot"),
    pytest.param("a..b", id="empty-label"),
    pytest.param("a b", id="space"),
    pytest.param("a*b", id="asterisk-chromium-escapes"),
    pytest.param("a%zzb", id="bad-percent-escape"),
    pytest.param("%ff", id="not-utf8"),
    pytest.param("a%2fb", id="encoded-slash"),
    pytest.param("a%00b", id="encoded-nul"),
    pytest.param("::1", id="ipv6-without-brackets"),
    pytest.param("[::1", id="unclosed-bracket"),
    pytest.param("[fe80::1%25eth0]", id="ipv6-zone"),
    pytest.param("[::ffff:1.2.3]", id="ipv6-short-ipv4"),
    pytest.param("[1::2::3]", id="ipv6-two-compressions"),
    pytest.param("256.0.0.1", id="ipv4-part-too-big"),
    pytest.param("1.2.3.4.5", id="ipv4-too-many-parts"),
    pytest.param("0x100000000", id="ipv4-too-big"),
    pytest.param("1.16777216", id="ipv4-last-part-too-big"),
    pytest.param("09.0.0.1", id="ipv4-bad-octal"),
    pytest.param("0x1g.0.0.1", id="ipv4-bad-hex"),
    pytest.param("allowed.x.1", id="name-ending-in-a-number"),
    pytest.param("foo.0x", id="name-ending-in-a-hex-prefix"),
    pytest.param("faß.test", id="idna-deviation-sharp-s"),
    pytest.param("\u03c3\u03bf\u03c6\u03bf\u03c2.test", id="idna-deviation-final-sigma"),
    pytest.param("a\u200db.test", id="idna-deviation-joiner"),
    pytest.param("\u1c90.test", id="idna-letter-newer-than-unicode-3-2"),
    pytest.param("\uab70.test", id="idna-lowercase-newer-than-its-capital"),
    pytest.param("\u1e9e.test", id="idna-capital-sharp-s"),
    pytest.param("a\u3164b.test", id="idna-filler-chromium-ignores"),
    pytest.param("a\u1806b.test", id="idna-hyphen-chromium-keeps"),
    pytest.param("\U0002f868.test", id="idna-ideograph-unicode-4-corrected"),
])
def test_normalize_host_refuses_what_is_not_a_host(host: str) -> None:
    with pytest.raises(ValueError):
        normalize_host(host)


# --- allow and deny lists ----------------------------------------------------------------------


@pytest.mark.parametrize(("url", "host"), [
    pytest.param("http://other.test/", "other.test", id="other-host"),
    pytest.param("http://sub.allowed.test/", "sub.allowed.test", id="sub-domain-of-an-exact-rule"),
    pytest.param("http://allowed.test.evil.test/", "allowed.test.evil.test", id="allowed-host-as-prefix"),
    pytest.param("http://evilallowed.test/", "evilallowed.test", id="allowed-host-as-suffix"),
    pytest.param("http://10.0.0.1/", "10.0.0.1", id="address"),
])
def test_allow_list_refuses_every_other_host(url: str, host: str) -> None:
    result = denial(POLICY, url)
    assert (result.reason, result.host) == ("not_allowed", host)
    assert host in result.message


def test_empty_allow_list_allows_every_host_not_denied() -> None:
    policy = UrlPolicy.from_config(deny=["denied.test"])
    assert policy.check("https://anything.test/") is None
    assert policy.check("http://10.1.2.3:8080/") is None
    assert denial(policy, "http://denied.test/").reason == "denied"
    assert UrlPolicy().check("http://[::1]/") is None


@pytest.mark.parametrize(("url", "reason"), [
    pytest.param("http://bad.example.test/", "denied", id="deny-wins-over-wildcard-allow"),
    pytest.param("http://both.test/", "denied", id="deny-wins-over-the-same-allow"),
    pytest.param("http://10.6.6.6/", "denied", id="deny-cidr-wins-over-allow-cidr"),
    pytest.param("http://good.example.test/", None, id="allowed-by-wildcard"),
    pytest.param("http://example.test/", None, id="allowed-apex"),
    pytest.param("http://10.1.1.1/", None, id="allowed-by-cidr"),
])
def test_deny_wins_over_allow(url: str, reason: str | None) -> None:
    policy = UrlPolicy.from_config(allow=["*.example.test", "example.test", "both.test", "10.0.0.0/8"],
                                   deny=["bad.example.test", "both.test", "10.6.0.0/16"])
    result = policy.check(url)
    assert (result and result.reason) == reason


@pytest.mark.parametrize(("url", "matches"), [
    pytest.param("http://a.example.test/", True, id="sub-domain"),
    pytest.param("http://a.b.example.test/", True, id="deep-sub-domain"),
    pytest.param("http://A.EXAMPLE.TEST./", True, id="sub-domain-normalized"),
    pytest.param("http://example.test/", False, id="apex-is-not-matched"),
    pytest.param("http://badexample.test/", False, id="same-suffix-without-dot"),
    pytest.param("http://example.test.evil.test/", False, id="wildcard-domain-as-prefix"),
])
def test_wildcard_matches_sub_domains_not_the_apex(url: str, matches: bool) -> None:
    result = UrlPolicy.from_config(deny=["*.example.test"]).check(url)
    assert (result is not None and result.reason == "denied") is matches


def test_unicode_rule_matches_punycode_url_and_back() -> None:
    assert denial(UrlPolicy.from_config(deny=["bücher.test"]), "http://xn--bcher-kva.test/").reason == "denied"
    assert denial(UrlPolicy.from_config(deny=["*.xn--bcher-kva.test"]), "http://a.BÜCHER.test/").host == \
        "a.xn--bcher-kva.test"


@pytest.mark.parametrize(("rule", "url", "matches"), [
    pytest.param("10.0.0.0/8", "http://10.1.2.3/", True, id="v4-cidr-inside"),
    pytest.param("10.0.0.0/8", "http://0xa.1/", True, id="v4-cidr-hex-inside"),
    pytest.param("10.0.0.0/8", "http://11.0.0.0/", False, id="v4-cidr-outside"),
    pytest.param("10.0.0.0/8", "http://[::ffff:10.9.9.9]/", True, id="v4-cidr-matches-mapped-v6"),
    pytest.param("10.0.0.0/8", "http://[::a00:1]/", False, id="v4-cidr-ignores-compatible-v6"),
    pytest.param("192.168.1.7", "http://3232235783/", True, id="v4-address-any-form"),
    pytest.param("127.0.0.1", "http://[::ffff:127.0.0.1]/", True, id="v4-address-matches-mapped-v6"),
    pytest.param("fd00::/8", "http://[fd12:3456::1]/", True, id="v6-cidr-inside"),
    pytest.param("fd00::/8", "http://[fe80::1]/", False, id="v6-cidr-outside"),
    pytest.param("fd00::/8", "http://10.0.0.1/", False, id="v6-cidr-ignores-v4"),
    pytest.param("::1/128", "http://[0:0:0:0:0:0:0:1]/", True, id="v6-loopback-cidr"),
    pytest.param("::1/128", "http://127.0.0.1/", False, id="v6-loopback-is-not-v4-loopback"),
    pytest.param("::1", "http://[::1]:8080/", True, id="v6-address-bare"),
    pytest.param("[::1]", "http://[::1]/", True, id="v6-address-bracketed"),
    pytest.param("::ffff:127.0.0.0/104", "http://127.3.2.1/", True, id="mapped-v6-cidr-matches-v4"),
    pytest.param("[::ffff:7f00:1]", "http://2130706433/", True, id="mapped-v6-address-matches-v4"),
    pytest.param("*.example.test", "http://10.0.0.1/", False, id="wildcard-never-matches-an-address"),
])
def test_address_and_cidr_rules(rule: str, url: str, matches: bool) -> None:
    result = UrlPolicy.from_config(deny=[rule]).check(url)
    assert (result is not None and result.reason == "denied") is matches


# --- ports and names of this machine ------------------------------------------------------------


@pytest.mark.parametrize(("rule", "url", "matches"), [
    pytest.param("shop.test:8443", "https://shop.test:8443/", True, id="host-and-port"),
    pytest.param("shop.test:8443", "https://shop.test/", False, id="host-other-port"),
    pytest.param("shop.test:443", "https://shop.test/", True, id="https-default-port"),
    pytest.param("shop.test:80", "ws://shop.test/", True, id="ws-default-port"),
    pytest.param("shop.test:443", "wss://SHOP.test.:443/", True, id="wss-default-port-normalized"),
    pytest.param("shop.test", "http://shop.test:8765/", True, id="rule-without-port-matches-every-port"),
    pytest.param("*.shop.test:443", "https://a.shop.test/", True, id="wildcard-and-port"),
    pytest.param("*.shop.test:443", "http://a.shop.test/", False, id="wildcard-other-port"),
    pytest.param("127.0.0.1:8080", "http://127.1:8080/", True, id="address-and-port-any-form"),
    pytest.param("127.0.0.1:8080", "http://127.0.0.1:8081/", False, id="address-other-port"),
    pytest.param("[::1]:80", "http://[::1]/", True, id="ipv6-and-port"),
    pytest.param("[::1]:80", "http://[::1]:81/", False, id="ipv6-other-port"),
    pytest.param("127.0.0.1:80", "http://[::ffff:127.0.0.1]/", True, id="mapped-v6-and-port"),
])
def test_a_rule_may_name_a_port(rule: str, url: str, matches: bool) -> None:
    result = UrlPolicy.from_config(deny=[rule]).check(url)
    assert (result is not None and result.reason == "denied") is matches


def test_an_allowed_host_on_its_port_only_refuses_its_other_ports() -> None:
    policy = UrlPolicy.from_config(allow=["127.0.0.1:8080"])
    assert policy.check("http://127.0.0.1:8080/") is None
    refused = denial(policy, "http://127.0.0.1:8765/api/tabs")
    assert (refused.reason, refused.host) == ("not_allowed", "127.0.0.1")
    assert "port 8765" in refused.message


@pytest.mark.parametrize("url", ["http://localhost:9/", "http://LOCALHOST./", "http://x.localhost/",
                                 "http://a.b.localhost:8080/", "http://0.0.0.0/", "http://0/", "http://[::]/",
                                 "ws://localhost/", "http://[::ffff:0.0.0.0]/"])
def test_names_and_addresses_that_reach_loopback_match_loopback_rules(url: str) -> None:
    assert denial(UrlPolicy.from_config(deny=["127.0.0.0/8", "::1"]), url).reason == "denied"
    assert UrlPolicy.from_config(deny=["10.0.0.0/8"]).check(url) is None


def test_localhost_is_allowed_by_a_loopback_rule_with_its_port() -> None:
    policy = UrlPolicy.from_config(allow=["127.0.0.1:8080"])
    assert policy.check("http://localhost:8080/") is None
    assert denial(policy, "http://localhost:8081/").reason == "not_allowed"


def test_a_resolved_address_is_judged_against_the_deny_rules_with_its_port() -> None:
    policy = UrlPolicy.from_config(allow=["shop.test"], deny=["127.0.0.0/8", "10.0.0.1:22"])
    loopback, private = ipaddress.ip_address("127.0.0.5"), ipaddress.ip_address("10.0.0.1")
    refused = policy.check_address("shop.test", loopback, 443)
    assert refused is not None and (refused.reason, refused.host) == ("denied", "shop.test")
    assert "127.0.0.5" in refused.message
    assert policy.check_address("shop.test", ipaddress.ip_address("0.0.0.0"), 80) is not None
    assert policy.check_address("shop.test", private, 22) is not None
    assert policy.check_address("shop.test", private, 443) is None
    assert policy.check_address("shop.test", ipaddress.ip_address("93.184.215.14"), 443) is None


# --- schemes -----------------------------------------------------------------------------------


@pytest.mark.parametrize(("url", "scheme"), [
    pytest.param("data:text/html,<script>alert(1)</script>", "data", id="data"),
    pytest.param("javascript:alert(1)", "javascript", id="javascript"),
    pytest.param("JaVaScRiPt:alert(1)", "javascript", id="javascript-mixed-case"),
    pytest.param("java\tscr\nipt:alert(1)", "javascript", id="javascript-with-tab-and-newline"),
    pytest.param("\x01 javascript:alert(1)", "javascript", id="javascript-after-controls"),
    pytest.param("file:///etc/passwd", "file", id="file"),
    pytest.param("view-source:http://allowed.test/", "view-source", id="view-source"),
    pytest.param("chrome://settings", "chrome", id="chrome"),
    pytest.param("chrome-extension://abc/x.html", "chrome-extension", id="chrome-extension"),
    pytest.param("blob:http://allowed.test/1f0c", "blob", id="blob"),
    pytest.param("filesystem:http://allowed.test/temporary/x", "filesystem", id="filesystem"),
    pytest.param("ftp://allowed.test/", "ftp", id="ftp"),
    pytest.param("mailto:a@allowed.test", "mailto", id="mailto"),
    pytest.param("allowed.test:8080", "allowed.test", id="host-and-port-parses-as-a-scheme"),
    pytest.param("about:srcdoc", "about", id="about-other-than-blank"),
    pytest.param("about:blank#x", "about", id="about-blank-with-fragment"),
    pytest.param("about:blank?x", "about", id="about-blank-with-query"),
])
def test_only_web_schemes_and_about_blank_pass(url: str, scheme: str) -> None:
    result = denial(POLICY, url)
    assert (result.reason, result.host) == ("scheme", None)
    assert f"scheme {scheme}:" in result.message


@pytest.mark.parametrize("url", [
    pytest.param("about:blank", id="about-blank"),
    pytest.param("ABOUT:blank", id="about-blank-scheme-case"),
    pytest.param(" about:bl\tank\n", id="about-blank-stripped"),
    pytest.param("http://allowed.test/", id="http"),
    pytest.param("https://allowed.test/", id="https"),
    pytest.param("ws://allowed.test/socket", id="ws"),
    pytest.param("wss://allowed.test/socket", id="wss"),
])
def test_web_schemes_and_about_blank_are_allowed(url: str) -> None:
    assert POLICY.check(url) is None


# --- unparseable URLs --------------------------------------------------------------------------


@pytest.mark.parametrize("url", [
    pytest.param("", id="empty"),
    pytest.param(" \t\n", id="only-whitespace"),
    pytest.param("allowed.test", id="no-scheme"),
    pytest.param("//allowed.test/", id="scheme-relative"),
    pytest.param("/path", id="path-only"),
    pytest.param("1http://allowed.test/", id="scheme-starting-with-digit"),
    pytest.param("http://", id="no-host"),
    pytest.param("http:///", id="no-host-only-slashes"),
    pytest.param("http://:80/", id="empty-host-with-port"),
    pytest.param("http://user:pw@/", id="empty-host-after-userinfo"),
    pytest.param("http://allowed.test:99999/", id="port-too-big"),
    pytest.param("http://allowed.test:8o/", id="port-not-a-number"),
    pytest.param("http://allowed.test:-1/", id="port-negative"),
    pytest.param("http://allowed.test:８０/", id="port-fullwidth-digits"),  # noqa: RUF001
    pytest.param("http://allowed.test:80:80/", id="port-twice"),
    pytest.param("http://[::1/", id="ipv6-unclosed"),
    pytest.param("http://[::1]x/", id="ipv6-trailing-garbage"),
    pytest.param("http://[fe80::1%25eth0]/", id="ipv6-zone"),
    pytest.param("http://256.0.0.1/", id="ipv4-part-too-big"),
    pytest.param("http://1.2.3.4.5/", id="ipv4-too-many-parts"),
    pytest.param("http://0x100000000/", id="ipv4-too-big"),
    pytest.param("http://09.0.0.1/", id="ipv4-bad-octal"),
    pytest.param("http://allowed.x.1/", id="name-ending-in-a-number"),
    pytest.param("http://a b.test/", id="space-in-host"),
    pytest.param("http://a<b.test/", id="forbidden-character"),
    pytest.param("http://a*b.test/", id="asterisk-in-host"),
    pytest.param("http://%zz.test/", id="bad-percent-escape"),
    pytest.param("http://%ff.test/", id="percent-escape-not-utf8"),
    pytest.param("http://a%00b.test/", id="encoded-nul"),
    pytest.param("http://allowed.test%2Fx/", id="encoded-slash"),
    pytest.param("http://allowed.test%40denied.test/", id="encoded-at"),
    pytest.param("http://a..b.test/", id="empty-label"),
    pytest.param("http://faß.test/", id="idna-deviation"),
    pytest.param("http://den\u3164ied.test/", id="idna-filler-that-would-hide-a-denied-host"),
])
def test_unparseable_urls_are_denied(url: str) -> None:
    result = denial(POLICY, url)
    assert (result.reason, result.host) == ("unparseable", None)


# --- messages never leak the URL's secrets ---------------------------------------------------


@pytest.mark.parametrize(("url", "reason", "names"), [
    pytest.param("http://admin:hunter2@denied.test/p?token=s3cret#frag", "denied", "denied.test", id="denied"),
    pytest.param("https://admin:hunter2@other.test:8443/p?token=s3cret", "not_allowed", "other.test",
                 id="not-allowed"),
    pytest.param("http://admin:hunter2@[::ffff:7f00:1]/?token=s3cret", "denied", "[::ffff:7f00:1]",
                 id="denied-address"),
    pytest.param("ftp://admin:hunter2@allowed.test/?token=s3cret", "scheme", "ftp", id="scheme"),
    pytest.param("javascript:fetch('/?token=s3cret&pw=hunter2')", "scheme", "javascript", id="scheme-javascript"),
    pytest.param("http://admin:hunter2@/?token=s3cret", "unparseable", "no host", id="unparseable-no-host"),
    pytest.param("http://admin:hunter2@a%zz/?token=s3cret", "unparseable", "host", id="unparseable-host"),
    pytest.param("http://admin:hunter2@allowed.test:8o/?token=s3cret", "unparseable", "port",
                 id="unparseable-port"),
])
def test_message_names_the_host_or_scheme_never_userinfo_or_query(url: str, reason: str, names: str) -> None:
    result = denial(POLICY, url)
    assert result.reason == reason
    assert names in result.message
    for secret in ("admin", "hunter2", "token", "s3cret", "/p", "frag"):
        assert secret not in result.message


USERINFO = st.text(st.characters(blacklist_characters="@/\\?#\t\n\r"), min_size=1)


@given(user=USERINFO, password=USERINFO, query=st.text(min_size=1))
def test_no_message_holds_the_userinfo_or_query(user: str, password: str, query: str) -> None:
    result = denial(POLICY, f"http://{user}:{password}@denied.test/?{query}")
    assert (result.reason, result.host) == ("denied", "denied.test")
    assert f"{user}:{password}@" not in result.message
    assert f"?{query}" not in result.message


@given(st.text())
def test_any_text_is_judged_without_raising(url: str) -> None:
    result = POLICY.check(url)
    assert result is None or result.reason in {"scheme", "unparseable", "denied", "not_allowed"}


# --- configuration -----------------------------------------------------------------------------


def test_rules_are_kept_in_their_normal_form() -> None:
    policy = UrlPolicy.from_config(
        allow=[" Example.TEST. ", "*.EXAMPLE.test.", "Bücher.test", "127.1", "0x0a000001"],
        deny=["::1", "[::FFFF:127.0.0.1]", "10.0.0.0/8", "FD00::/8", "[::1]/128", "10.0.0.0/255.0.0.0"],
    )
    assert policy.allow == ("example.test", "*.example.test", "xn--bcher-kva.test", "127.0.0.1", "10.0.0.1")
    assert policy.deny == ("[::1]", "[::ffff:7f00:1]", "10.0.0.0/8", "fd00::/8", "::1/128", "10.0.0.0/8")
    assert policy == UrlPolicy(policy.allow, policy.deny)
    assert UrlPolicy.from_config(policy.allow, policy.deny) == policy


def test_rules_with_ports_are_kept_in_their_normal_form() -> None:
    policy = UrlPolicy.from_config(allow=["Shop.TEST.:8443", "*.Shop.test:443", "127.1:8080", "[::FFFF:127.0.0.1]:80"])
    assert policy.allow == ("shop.test:8443", "*.shop.test:443", "127.0.0.1:8080", "[::ffff:7f00:1]:80")
    assert UrlPolicy.from_config(policy.allow) == policy


@pytest.mark.parametrize("rule", [
    pytest.param("", id="empty"),
    pytest.param("*", id="bare-asterisk"),
    pytest.param("*.", id="wildcard-without-domain"),
    pytest.param("a.*.test", id="asterisk-inside"),
    pytest.param("*.*.test", id="double-wildcard"),
    pytest.param("*.127.0.0.1", id="wildcard-over-an-address"),
    pytest.param("https://example.test", id="url-not-host"),
    pytest.param("example.test:", id="host-with-empty-port"),
    pytest.param("example.test:0", id="port-zero"),
    pytest.param("example.test:65536", id="port-too-big"),
    pytest.param("example.test:8080:1", id="two-ports"),
    pytest.param(":8080", id="port-without-host"),
    pytest.param("10.0.0.0/8:80", id="cidr-with-port"),
    pytest.param("example.test/path", id="host-with-path"),
    pytest.param("user@example.test", id="host-with-userinfo"),
    pytest.param("exa mple.test", id="space"),
    pytest.param("example..test", id="empty-label"),
    pytest.param("1.2.3.4.5", id="bad-address"),
    pytest.param("10.0.0.1/8", id="cidr-with-host-bits"),
    pytest.param("10.0.0.0/33", id="cidr-prefix-too-long"),
    pytest.param("10/8", id="cidr-short-address"),
    pytest.param("fe80::1%eth0", id="ipv6-zone"),
])
def test_an_invalid_rule_is_named_in_invalid_config(rule: str) -> None:
    with pytest.raises(KitsuneError) as caught:
        UrlPolicy.from_config(allow=["allowed.test"], deny=["denied.test", rule])
    assert caught.value.code == "invalid_config"
    assert repr(rule) in caught.value.message
    assert caught.value.state == {"list": "deny", "rule": rule}


def test_rules_are_validated_however_the_policy_is_built() -> None:
    with pytest.raises(KitsuneError, match=r"allow rule 'a b'"):
        UrlPolicy(allow=("a b",))
    with pytest.raises(KitsuneError) as caught:
        UrlPolicy.from_config(allow="allowed.test")
    assert caught.value.code == "invalid_config"


def test_a_policy_is_immutable() -> None:
    with pytest.raises(dataclasses.FrozenInstanceError):
        POLICY.allow = ()  # type: ignore[misc]
