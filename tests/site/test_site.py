"""The test web site, driven by a real Chromium through Playwright's sync API, plus its plain-HTTP behaviour.

One browser per module; a fresh browser context (cookies, storage) per test; the site is reset before each test.
A missing Chromium fails these tests: it never skips them.
"""

from __future__ import annotations

import http.client
import json
import os
import shutil
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import quote, urlsplit

import pytest
from playwright.sync_api import Browser, BrowserContext, Page, expect, sync_playwright

from tests.site import (
    ANY,
    HIDDEN_TEXT,
    NEEDS_USER_ATTRIBUTE,
    NEEDS_USER_TITLES,
    PIXEL_GIF,
    POLICY_TITLES,
    REDIRECT_STATUSES,
    REPORT_CONTENT,
    REPORT_NAME,
    SERVICE_WORKER_JS,
    TARGET_TITLE,
    TEXT_HEADING,
    TEXT_ITEMS,
    TEXT_PARAGRAPHS,
    TITLES,
    TestSite,
)
from tests.site.ports import bind_held
from tests.site.server import _Handler, _Server

ROOT = Path(__file__).resolve().parents[2]
CHROMIUM = os.environ.get("KITSUNE_CHROMIUM") or shutil.which("chromium") or "/usr/bin/chromium"
CHROMIUM_ARGS = ["--no-sandbox", "--disable-gpu", "--disable-quic", "--no-first-run",
                 "--disable-background-networking", "--disable-component-update", "--disable-sync"]
DEFAULT_SLOW = 3.0
OTHER_HOST = "127.0.0.2"  # another loopback address: a second, different host


# -- fixtures ---------------------------------------------------------------------------------------

@pytest.fixture(scope="module")
def site() -> Iterator[TestSite]:
    with TestSite(slow_seconds=DEFAULT_SLOW) as running:
        yield running


@pytest.fixture(scope="module")
def other() -> Iterator[TestSite]:
    with TestSite(host=OTHER_HOST) as running:
        yield running


@pytest.fixture(autouse=True)
def _fresh_site(site: TestSite, other: TestSite) -> None:
    site.reset()
    site.slow_seconds = DEFAULT_SLOW
    other.reset()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    if not Path(CHROMIUM).is_file():
        pytest.fail(f"Chromium not found at {CHROMIUM} (set KITSUNE_CHROMIUM or install chromium)")
    with sync_playwright() as pw:
        launched = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield launched
        launched.close()


@pytest.fixture
def context(browser: Browser) -> Iterator[BrowserContext]:
    ctx = browser.new_context(accept_downloads=True)
    ctx.set_default_timeout(10_000)
    yield ctx
    ctx.close()


@pytest.fixture
def page(context: BrowserContext) -> Page:
    return context.new_page()


def _http(site: TestSite, method: str, path: str, data: bytes | None = None) -> tuple[int, bytes]:
    request = urllib.request.Request(site.url(path), data=data, method=method)
    try:
        with urllib.request.urlopen(request, timeout=10) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as error:
        return error.code, error.read()


def _raw(site: TestSite, method: str, path: str) -> tuple[int, dict[str, str], bytes]:
    """One request that follows no redirect: status, headers, body."""
    parts = urlsplit(site.base)
    connection = http.client.HTTPConnection(parts.hostname or "", parts.port, timeout=10)
    try:
        connection.request(method, path)
        answer = connection.getresponse()
        return answer.status, dict(answer.getheaders()), answer.read()
    finally:
        connection.close()


def _q(url: str) -> str:
    return quote(url, safe="")


def _closed_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


# -- the browser ------------------------------------------------------------------------------------

def test_chromium_is_installed() -> None:
    assert Path(CHROMIUM).is_file(), f"Chromium not found at {CHROMIUM}"


def test_index_links_every_page_and_pages_are_not_counted(site: TestSite, page: Page) -> None:
    page.goto(site.url("/"))
    assert page.title() == TITLES["/"]
    hrefs = set(page.eval_on_selector_all("#pages a", "links => links.map(a => a.getAttribute('href'))"))
    assert set(TITLES) - {"/"} <= hrefs
    assert f"/download/{REPORT_NAME}" in hrefs
    for path, title in TITLES.items():
        page.goto(site.url(path))
        assert page.title() == title, path
    assert site.counts() == {}


def test_form_post_is_counted_exactly_once(site: TestSite, page: Page) -> None:
    page.goto(site.url("/form"))
    assert page.eval_on_selector_all("#color option", "os => os.map(o => [o.value, o.textContent])") == [
        ["red", "Red"], ["green", "Green"], ["blue", "Blue"]]
    page.fill("#name", "Ada")
    page.fill("#email", "ada@example.test")
    page.fill("#message", "Hello\nthere")
    page.select_option("#color", label="Green")
    page.select_option("#sizes", ["s", "l"])
    page.check("#agree")
    page.check("#plan-pro")
    page.click("#submit")
    expect(page).to_have_title("Thanks")
    assert site.counts() == {"POST /form": 1}
    assert page.text_content("#thanks-name") == "Ada"
    assert page.text_content("#thanks-email") == "ada@example.test"
    assert page.text_content("#thanks-message") == "Hello\nthere"  # the HTML parser folds CR LF
    assert page.text_content("#thanks-color") == "green"
    assert page.text_content("#thanks-sizes") == "s, l"
    assert page.text_content("#thanks-agree") == "yes"
    assert page.text_content("#thanks-plan") == "pro"
    assert page.text_content("#thanks-count") == "1"
    assert site.last_form == {"name": ["Ada"], "email": ["ada@example.test"], "message": ["Hello\r\nthere"],
                              "color": ["green"], "sizes": ["s", "l"], "agree": ["yes"], "plan": ["pro"]}


def test_slow_post_is_counted_before_the_answer_arrives(site: TestSite, page: Page) -> None:
    site.hold_slow()  # the answer waits for release_slow(), not for a clock: no race with a busy machine
    page.goto(site.url("/slow"))
    page.fill("#item", "widget")
    page.click("#slow-submit", no_wait_after=True)
    assert site.wait_for_count("POST /slow", 1, timeout=10) == 1
    assert page.url == site.url("/slow")  # counted, and the answer has not arrived: it is still held
    site.release_slow()
    expect(page).to_have_title("Done")
    assert page.text_content("#done-item") == "widget"
    assert site.counts() == {"POST /slow": 1}
    assert site.last_form == {"item": ["widget"]}


def test_slow_post_answers_after_slow_seconds(site: TestSite, page: Page) -> None:
    site.slow_seconds = 0.5
    page.goto(site.url("/slow"))
    page.fill("#item", "gadget")
    started = time.monotonic()
    page.click("#slow-submit", no_wait_after=True)
    expect(page).to_have_title("Done")
    assert time.monotonic() - started >= 0.5  # a lower bound only: a busy machine makes it later, never sooner
    assert site.counts() == {"POST /slow": 1}


def test_checkout_counts_two_writes_and_lands_on_confirmation(site: TestSite, page: Page) -> None:
    page.goto(site.url("/checkout/shipping"))
    page.fill("#address", "1 Fox Lane")
    page.click("#to-billing")
    expect(page).to_have_url(site.url("/checkout/billing"))
    assert page.text_content("#billing-address") == "1 Fox Lane"
    page.fill("#card", "4242424242424242")
    page.click("#to-confirm")
    expect(page).to_have_url(site.url("/checkout/confirmation"))
    assert page.title() == "Order confirmed"
    assert page.text_content("#order-id") == "ORDER-0001"
    assert page.text_content("#confirm-address") == "1 Fox Lane"
    assert page.text_content("#confirm-card") == "4242"
    assert site.counts() == {"POST /checkout/shipping": 1, "POST /checkout/billing": 1}


def test_links_navigate(site: TestSite, page: Page) -> None:
    page.goto(site.url("/links"))
    page.click("#next")
    expect(page).to_have_title("Next")
    assert page.url == site.url("/links/next")
    page.go_back()
    expect(page).to_have_title("Links")
    page.click("#external-ish")
    expect(page).to_have_title("Other")


def test_popups_open_the_child(site: TestSite, context: BrowserContext, page: Page) -> None:
    page.goto(site.url("/popups"))
    with page.expect_popup() as popup_info:
        page.click("#open-popup")
    popup = popup_info.value
    popup.wait_for_load_state()
    assert popup.title() == "Popup child"
    with context.expect_page() as new_page_info:
        page.click("#blank-link")
    child = new_page_info.value
    child.wait_for_load_state()
    assert child.title() == "Popup child"
    assert child.url == site.url("/popups/child")
    assert len(context.pages) == 3


def test_cookies_round_trip(site: TestSite, context: BrowserContext, page: Page) -> None:
    page.goto(site.url("/cookies/set?name=flavour&value=ginger"))
    expect(page).to_have_url(site.url("/cookies"))
    assert page.text_content("#server-cookies") == "flavour=ginger"
    assert page.text_content("#client-cookies") == "flavour=ginger"
    page.fill("#cookie-name", "colour")
    page.fill("#cookie-value", "red")
    page.click("#set-cookie")
    expect(page.locator("#server-cookies")).to_contain_text("colour=red")
    assert "flavour=ginger" in (page.text_content("#client-cookies") or "")
    assert {(c["name"], c["value"]) for c in context.cookies()} == {("flavour", "ginger"), ("colour", "red")}
    assert site.counts() == {"GET /cookies/set": 2}


def test_storage_dump(site: TestSite, page: Page) -> None:
    page.goto(site.url("/storage"))
    for key, value in (("b", "2"), ("a", "one")):
        page.fill("#key", key)
        page.fill("#value", value)
        page.click("#save")
    page.click("#show")
    assert json.loads(page.text_content("#dump") or "") == {"a": "one", "b": "2"}
    page.reload()
    page.click("#show")
    assert json.loads(page.text_content("#dump") or "") == {"a": "one", "b": "2"}
    page.click("#clear")
    page.click("#show")
    assert page.text_content("#dump") == "{}"
    assert site.counts() == {}


def test_download_content_and_count(site: TestSite, page: Page) -> None:
    page.goto(site.url("/download"))
    with page.expect_download() as download_info:
        page.click("#download")
    download = download_info.value
    assert download.suggested_filename == REPORT_NAME
    assert Path(download.path()).read_bytes() == REPORT_CONTENT
    assert site.counts() == {f"GET /download/{REPORT_NAME}": 1}


def test_clicks_hit_the_server_and_local_clicks_do_not(site: TestSite, page: Page) -> None:
    page.goto(site.url("/clicks"))
    assert page.text_content("#total") == "0"
    for expected in ("1", "2", "3"):
        page.click("#hit")
        expect(page.locator("#total")).to_have_text(expected)
    assert site.count("POST /clicks/hit") == 3
    page.click("#local")
    for i in range(10):
        page.click(f"#b{i}")
    expect(page.locator("#local-count")).to_have_text("11")
    assert site.counts() == {"POST /clicks/hit": 3}
    page.reload()
    assert page.text_content("#total") == "3"
    assert page.text_content("#local-count") == "0"


def test_text_page(site: TestSite, page: Page) -> None:
    page.goto(site.url("/text"))
    assert page.inner_text("h1") == TEXT_HEADING
    assert page.locator("p.para").all_inner_texts() == list(TEXT_PARAGRAPHS)
    assert page.locator("li.item").all_inner_texts() == list(TEXT_ITEMS)
    body = page.inner_text("body")
    assert all(paragraph in body for paragraph in TEXT_PARAGRAPHS)
    assert HIDDEN_TEXT not in body
    assert page.locator("#hidden").text_content() == HIDDEN_TEXT


def test_wait_page(site: TestSite, page: Page) -> None:
    # ?start=click: the timer starts when the test clicks #start, so the page before the change is
    # there to see however long the load took.
    page.goto(site.url("/wait?start=click"))
    assert page.locator("#vanish").count() == 1
    assert page.locator("#late").count() == 0
    page.click("#start")
    page.wait_for_selector("#late", state="visible")
    page.wait_for_selector("#vanish", state="detached")
    assert page.text_content("#late") == "I arrived late."
    # The delay as the page measured it (its own clock, 1 ms allowed for the coarsened performance.now()):
    # the element came late, not at once.
    assert page.evaluate("window.lateAfterMs") >= 499
    # Without ?start= the timer starts as the page loads (what the integration tests use).
    page.goto(site.url("/wait?ms=50"))
    page.wait_for_selector("#late")
    page.wait_for_selector("#vanish", state="detached")
    assert page.locator("#start").count() == 0


def test_navigate_on_click(site: TestSite, page: Page) -> None:
    page.goto(site.url("/navigate-on-click"))
    page.click("#go")
    expect(page).to_have_url(site.url("/links/next"))
    assert page.title() == "Next"


def test_api_echo_is_json_and_not_counted(site: TestSite, page: Page) -> None:
    page.goto(site.url("/"))
    data = page.evaluate("fetch('/api/echo?x=1&y=two&y=three').then(r => r.json())")
    assert data == {"x": "1", "y": ["two", "three"]}
    assert site.counts() == {}


def test_reset_zeroes_counters_and_state(site: TestSite, page: Page) -> None:
    site.slow_seconds = 0
    page.goto(site.url("/checkout/shipping"))
    page.fill("#address", "2 Den Road")
    page.click("#to-billing")
    page.fill("#card", "1111")
    page.click("#to-confirm")
    expect(page.locator("#order-id")).to_have_text("ORDER-0001")
    page.goto(site.url("/clicks"))
    page.click("#hit")
    expect(page.locator("#total")).to_have_text("1")
    assert sum(site.counts().values()) == 3
    assert site.last_form == {"card": ["1111"]}
    site.reset()
    assert site.counts() == {}
    assert site.count("POST /clicks/hit") == 0
    assert site.last_form == {}
    assert site.slow_seconds == 0  # a setting, not state
    page.reload()
    assert page.text_content("#total") == "0"
    page.goto(site.url("/checkout/confirmation"))
    assert page.text_content("#order-id") == ""


# -- plain HTTP -------------------------------------------------------------------------------------

def test_every_write_is_counted_and_reads_are_not(site: TestSite) -> None:
    assert _http(site, "GET", "/form")[0] == 200
    assert _http(site, "GET", "/api/echo?a=1") == (200, b'{"a": "1"}')
    assert _http(site, "GET", "/nowhere")[0] == 404
    assert _http(site, "POST", "/nowhere", b"a=1")[0] == 404
    assert _http(site, "PUT", "/form", b"x")[0] == 405
    assert _http(site, "DELETE", "/form")[0] == 405
    assert _http(site, "GET", "/cookies/set")[0] == 400
    status, body = _http(site, "GET", f"/download/{REPORT_NAME}?again=1")
    assert (status, body) == (200, REPORT_CONTENT)
    assert site.counts() == {"POST /nowhere": 1, "PUT /form": 1, "DELETE /form": 1, "GET /cookies/set": 1,
                             f"GET /download/{REPORT_NAME}": 1}
    assert site.last_form == {"a": ["1"]}
    assert site.count("GET /form") == 0


def test_counting_is_thread_safe(site: TestSite) -> None:
    totals: list[int] = []

    def hit() -> None:
        totals.append(json.loads(_http(site, "POST", "/clicks/hit", b"")[1])["total"])

    threads = [threading.Thread(target=hit) for _ in range(40)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(10)
    assert site.count("POST /clicks/hit") == 40
    assert sorted(totals) == list(range(1, 41))


def test_lifecycle() -> None:
    site = TestSite(slow_seconds=3600)
    with pytest.raises(RuntimeError):
        _ = site.base
    base = site.start()
    assert base.startswith("http://127.0.0.1:") and site.base == base and site.url("/x") == base + "/x"
    assert site.start() == base
    answers: list[int] = []
    client = threading.Thread(target=lambda: answers.append(_http(site, "POST", "/slow", b"item=a")[0]))
    client.start()
    assert site.wait_for_count("POST /slow", 1, timeout=10) == 1
    site.stop()
    client.join(60)
    # The hour-long sleep is cut short by stop(): the client has its answer.
    assert not client.is_alive() and answers == [200]
    with pytest.raises(urllib.error.URLError):
        urllib.request.urlopen(base + "/", timeout=2)
    site.stop()
    with TestSite() as other:
        assert _http(other, "GET", "/")[0] == 200
    with pytest.raises(RuntimeError):
        _ = other.base


def test_server_imports_only_the_standard_library() -> None:
    probe = ("import sys; before = set(sys.modules); import tests.site; "
             "print(sorted({m.split('.')[0] for m in set(sys.modules) - before} "
             "- set(sys.stdlib_module_names) - {'tests'}))")
    result = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "[]"
    assert "asyncio" not in subprocess.run(
        [sys.executable, "-c", "import sys, tests.site; print(sorted(sys.modules))"],
        cwd=ROOT, capture_output=True, text=True, check=True).stdout


# -- a second host and ANY ---------------------------------------------------------------------------

def test_a_second_host_serves_on_another_loopback_address_and_counts_any(
        site: TestSite, other: TestSite, page: Page) -> None:
    assert other.host == OTHER_HOST and other.base.startswith(f"http://{OTHER_HOST}:")
    assert site.host == "127.0.0.1"
    assert other.count(ANY) == 0
    page.goto(other.url("/policy/target"))
    assert page.title() == TARGET_TITLE
    assert other.count(ANY) == 1  # the page only: the favicon is a data: URL
    assert site.count(ANY) == 0
    assert other.counts() == {}  # a page is not a write, and ANY is not among the writes
    page.goto(site.url("/form"))
    assert site.count(ANY) == 1 and other.count(ANY) == 1


def test_any_counts_every_request_and_reset_zeroes_it(site: TestSite) -> None:
    assert _http(site, "GET", "/form")[0] == 200
    assert _http(site, "GET", "/nowhere")[0] == 404
    assert _http(site, "POST", "/clicks/hit", b"")[0] == 200
    assert _http(site, "PUT", "/form", b"x")[0] == 405
    assert _raw(site, "HEAD", "/")[0] == 501
    assert _raw(site, "OPTIONS", "/form")[0] == 501
    assert _raw(site, "GET", "/redirect?to=/form")[0] == 302
    assert site.count(ANY) == 7
    assert site.wait_for_count(ANY, 7, timeout=0.1) == 7
    assert site.counts() == {"POST /clicks/hit": 1, "PUT /form": 1}
    site.reset()
    assert site.count(ANY) == 0


def test_the_host_argument_and_lifecycle_of_a_second_site() -> None:
    with TestSite(host=OTHER_HOST) as second:
        assert second.base.startswith(f"http://{OTHER_HOST}:")
        assert _http(second, "GET", "/policy/target")[0] == 200
        assert second.count(ANY) == 1
        with pytest.raises(urllib.error.URLError):  # it serves on 127.0.0.2 only
            urllib.request.urlopen(f"http://127.0.0.1:{urlsplit(second.base).port}/", timeout=2)
        assert second.count(ANY) == 1



def test_a_second_site_holds_its_port_number_on_127_0_0_1_until_it_stops() -> None:
    # Kitsune's proxy refuses its node's own ports on every local address: a site on 127.0.0.2 must never
    # share a port number with anything (the node's NATS or proxies) on 127.0.0.1.
    with TestSite(host=OTHER_HOST) as second:
        port = urlsplit(second.base).port
        with socket.socket() as probe, pytest.raises(OSError):
            probe.bind(("127.0.0.1", port))
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", port))  # freed with the site


def test_a_second_site_skips_a_port_number_taken_on_127_0_0_1() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken_port = taken.getsockname()[1]
        offered: list[int] = []

        def make(address: tuple[str, int]) -> _Server:
            offered.append(taken_port if not offered else 0)
            return _Server((address[0], offered[-1]), _Handler)

        server, holder = bind_held(OTHER_HOST, make)
        assert holder is not None
        with server, holder:
            assert offered[0] == taken_port and server.server_address[1] != taken_port
            assert holder.getsockname() == ("127.0.0.1", server.server_address[1])

# -- redirects ---------------------------------------------------------------------------------------

def test_redirect_statuses(site: TestSite, other: TestSite) -> None:
    target = other.url("/policy/target")
    status, headers, _ = _raw(site, "GET", f"/redirect?to={_q(target)}")
    assert (status, headers["Location"]) == (302, target)
    assert headers["Access-Control-Allow-Origin"] == "*"
    for code in sorted(REDIRECT_STATUSES):
        status, headers, _ = _raw(site, "GET", f"/redirect?to={_q(target)}&status={code}")
        assert (status, headers["Location"]) == (int(code), target)
    assert _raw(site, "GET", "/redirect?to=/form")[1]["Location"] == "/form"
    assert _raw(site, "GET", f"/redirect?to={_q('/a b/é?x=1&y=%41')}")[1]["Location"] == "/a%20b/%C3%A9?x=1&y=%41"
    for bad in ("/redirect", "/redirect?to=", "/redirect?to=/form&status=200", "/redirect?to=/form&status=300",
                "/redirect?to=/form&status=x", "/redirect?to=%2Fform%0D%0ASet-Cookie:%20a=b"):
        status, headers, _ = _raw(site, "GET", bad)
        assert status == 400 and "Location" not in headers and "Set-Cookie" not in headers, bad
    assert other.count(ANY) == 0


def test_the_browser_follows_redirects_to_the_other_host(site: TestSite, other: TestSite, page: Page) -> None:
    for code in ("302", "301", "307"):
        page.goto(site.url(f"/redirect?to={_q(other.url('/policy/target'))}&status={code}"))
        assert page.title() == TARGET_TITLE and page.url == other.url("/policy/target")
    assert other.count(ANY) == 3


# -- URL-policy pages, nothing blocked ----------------------------------------------------------------

def test_policy_pages_have_their_titles_and_defaults(site: TestSite, page: Page) -> None:
    for path, title in POLICY_TITLES.items():
        page.goto(site.url(path))
        if path in ("/policy/meta", "/policy/refresh"):  # they move on to their target at once
            page.wait_for_url(site.url("/policy/target"))
        assert page.title() == (TARGET_TITLE if path in ("/policy/meta", "/policy/refresh") else title), path
    assert site.counts() == {}
    assert _raw(site, "GET", "/policy/pixel.gif")[1]["Content-Type"] == "image/gif"


def test_targets_are_escaped_for_html_and_script(site: TestSite, page: Page) -> None:
    nasty = "/policy/target?a=\"'</script><b id=x>&amp;\u2028"
    for path in ("/policy/open", "/policy/fetch", "/policy/frame", "/policy/image", "/policy/ws"):
        page.goto(site.url(f"{path}?to={_q(nasty)}"))
        assert page.evaluate("TO") == nasty, path
        assert page.text_content("#to") == nasty, path
        assert page.locator("#x").count() == 0, path
    page.goto(site.url(f"/policy/open?to={_q(nasty)}"))
    assert page.get_attribute("#blank", "href") == nasty


def test_policy_open_opens_the_target(site: TestSite, other: TestSite, context: BrowserContext, page: Page) -> None:
    page.goto(site.url(f"/policy/open?to={_q(other.url('/policy/target'))}"))
    with page.expect_popup() as popup_info:
        page.click("#open")
    popup = popup_info.value
    popup.wait_for_load_state()
    assert popup.title() == TARGET_TITLE and popup.url == other.url("/policy/target")
    with context.expect_page() as new_page_info:
        page.click("#blank")
    child = new_page_info.value
    child.wait_for_load_state()
    assert child.title() == TARGET_TITLE
    assert other.count(ANY) == 2


def test_policy_fetch_reports_status_or_error(site: TestSite, other: TestSite, page: Page) -> None:
    for to, expected in ((other.url("/policy/target"), "ok 200"),
                         (other.url("/nowhere"), "ok 404"),
                         ("/api/echo?x=1", "ok 200"),
                         (site.url(f"/redirect?to={_q(other.url('/policy/target'))}"), "ok 200"),
                         (f"http://127.0.0.1:{_closed_port()}/", "error TypeError")):
        page.goto(site.url(f"/policy/fetch?to={_q(to)}"))
        page.click("#fetch")
        expect(page.locator("#result")).to_have_text(expected)
    assert other.count(ANY) == 3


def test_policy_frame_loads_the_target(site: TestSite, other: TestSite, page: Page) -> None:
    page.goto(site.url(f"/policy/frame?to={_q(other.url('/policy/target'))}"))
    expect(page.frame_locator("#frame").locator("#target")).to_have_text("Target")
    frame = page.frame(url=other.url("/policy/target"))
    assert frame is not None and frame.title() == TARGET_TITLE
    assert other.count(ANY) == 1


def test_policy_image_loads_or_errs(site: TestSite, other: TestSite, page: Page) -> None:
    page.goto(site.url(f"/policy/image?to={_q(other.url('/policy/pixel.gif'))}"))
    expect(page.locator("#state")).to_have_text("loaded")
    assert page.eval_on_selector("#img", "img => img.naturalWidth") == 1
    page.goto(site.url(f"/policy/image?to={_q(other.url('/policy/target'))}"))  # HTML is not an image
    expect(page.locator("#state")).to_have_text("error")
    page.goto(site.url("/policy/image"))
    expect(page.locator("#state")).to_have_text("loaded")
    assert other.count(ANY) == 2
    assert _http(site, "GET", "/policy/pixel.gif") == (200, PIXEL_GIF)


def test_policy_ws_reports_error_without_a_websocket_server(site: TestSite, other: TestSite, page: Page) -> None:
    ws = other.base.replace("http://", "ws://") + "/ws"
    page.goto(site.url(f"/policy/ws?to={_q(ws)}"))
    page.click("#ws")
    expect(page.locator("#result")).to_have_text("error")
    assert other.count(ANY) == 1  # the handshake reached the other host and got a 404
    page.goto(site.url("/policy/ws"))
    assert page.evaluate("TO") == site.base.replace("http://", "ws://") + "/ws"
    page.goto(site.url(f"/policy/ws?to={_q('ftp://example.test/')}"))  # not a WebSocket URL
    page.click("#ws")
    expect(page.locator("#result")).to_have_text("error SyntaxError")


def test_policy_sw_registers_on_loopback(site: TestSite, page: Page) -> None:
    page.goto(site.url("/policy/sw"))
    expect(page.locator("#result")).to_have_text("registered")
    status, headers, body = _raw(site, "GET", "/sw.js")
    assert (status, body) == (200, SERVICE_WORKER_JS)
    assert headers["Content-Type"].startswith("application/javascript")


# -- "needs user" pages -------------------------------------------------------------------------------

def test_needs_user_pages_show_a_hint_until_the_button(site: TestSite, page: Page) -> None:
    for path, title in NEEDS_USER_TITLES.items():
        page.goto(site.url(path))
        assert page.title() == title, path

    page.goto(site.url("/needs-user/sign-in"))
    expect(page.locator("input[type=password]#password")).to_be_visible()
    page.fill("#username", "ada")
    page.fill("#password", "secret")
    page.click("#sign-in")
    expect(page.locator("#signed-in")).to_have_text("Signed in")
    assert page.locator("input[type=password]").count() == 0
    assert page.url == site.url("/needs-user/sign-in")

    page.goto(site.url("/needs-user/captcha"))
    expect(page.locator("div.g-recaptcha#captcha")).to_be_visible()
    page.click("#solve")
    expect(page.locator("#status")).to_have_text("Solved")
    assert page.locator(".g-recaptcha").count() == 0

    page.goto(site.url("/needs-user/marked"))
    expect(page.locator(f"[{NEEDS_USER_ATTRIBUTE}=human_check]")).to_be_visible()
    page.click("#done")
    expect(page.locator("#status")).to_have_text("Done")
    assert page.locator(f"[{NEEDS_USER_ATTRIBUTE}]").count() == 0

    page.goto(site.url("/needs-user/none"))
    hints = f"input[type=password], .g-recaptcha, [{NEEDS_USER_ATTRIBUTE}]"
    assert page.locator(hints).count() == 0
    assert site.counts() == {}  # no button sent anything
