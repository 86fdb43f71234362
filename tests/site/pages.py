"""HTML of the test site's pages: plain HTML, small inline scripts, no external resources.

Every page has a <title> and an empty data: favicon, so Chromium asks the server for nothing else.
"""

from __future__ import annotations

import base64
import json
from html import escape

# Fixed content that tests assert against.
REPORT_NAME = "report.txt"
REPORT_CONTENT = b"Kitsune test report\nstatus: ok\nrows: 3\n"
TEXT_HEADING = "Known text"
TEXT_PARAGRAPHS = (
    "The quick brown fox jumps over the lazy dog.",
    "Kitsune runs browser commands on real Chromium tabs.",
    "A write must never happen twice.",
)
TEXT_ITEMS = ("Apple", "Banana", "Cherry", "Date", "Elderberry")
HIDDEN_TEXT = "This paragraph is hidden."

# path -> title of every GET page (the index links each of them).
TITLES = {
    "/": "Kitsune test site",
    "/form": "Form",
    "/form20": "Sign-up",
    "/slow": "Slow",
    "/checkout/shipping": "Shipping",
    "/checkout/billing": "Billing",
    "/checkout/confirmation": "Order confirmed",
    "/links": "Links",
    "/links/next": "Next",
    "/links/other": "Other",
    "/popups": "Popups",
    "/popups/child": "Popup child",
    "/cookies": "Cookies",
    "/storage": "Storage",
    "/download": "Download",
    "/clicks": "Clicks",
    "/text": "Text",
    "/wait": "Wait",
    "/navigate-on-click": "Navigate on click",
}


def document(title: str, body: str, script: str = "") -> str:
    """A whole page: doctype, title, no-request favicon, body, optional inline script at the end."""
    tail = f"<script>\n{script}\n</script>\n" if script else ""
    return (
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n"
        f"<title>{escape(title)}</title>\n<link rel=\"icon\" href=\"data:,\">\n</head>\n"
        f"<body>\n{body}\n{tail}</body>\n</html>\n"
    )


def index() -> str:
    items = "\n".join(f'<li><a id="to{escape(path.replace("/", "-"))}" href="{escape(path)}">{escape(title)}</a></li>'
                      for path, title in TITLES.items() if path != "/")
    extra = ('<li><a id="to-download-file" href="/download/report.txt">report.txt (counted)</a></li>\n'
             '<li><a id="to-api-echo" href="/api/echo?hello=world">/api/echo (JSON)</a></li>')
    return document(TITLES["/"], f"<h1>Kitsune test site</h1>\n<ul id=\"pages\">\n{items}\n{extra}\n</ul>")


def form() -> str:
    body = """<h1>Form</h1>
<form id="form" method="POST" action="/form">
  <p><label for="name">Name</label> <input id="name" name="name" type="text"></p>
  <p><label for="email">Email</label> <input id="email" name="email" type="email"></p>
  <p><label for="message">Message</label> <textarea id="message" name="message"></textarea></p>
  <p><label for="color">Color</label>
    <select id="color" name="color">
      <option value="red">Red</option>
      <option value="green">Green</option>
      <option value="blue">Blue</option>
    </select></p>
  <p><label for="sizes">Sizes</label>
    <select id="sizes" name="sizes" multiple>
      <option value="s">S</option>
      <option value="m">M</option>
      <option value="l">L</option>
    </select></p>
  <p><input id="agree" name="agree" type="checkbox" value="yes"> <label for="agree">I agree</label></p>
  <fieldset><legend>Plan</legend>
    <input id="plan-basic" name="plan" type="radio" value="basic"> <label for="plan-basic">Basic</label>
    <input id="plan-pro" name="plan" type="radio" value="pro"> <label for="plan-pro">Pro</label>
  </fieldset>
  <p><button id="submit" type="submit">Submit</button></p>
</form>"""
    return document(TITLES["/form"], body)


FORM_FIELDS = ("name", "email", "message", "color", "sizes", "agree", "plan")


def thanks(fields: dict[str, list[str]], count: int) -> str:
    rows = "\n".join(f'<dt>{name}</dt><dd id="thanks-{name}">{escape(", ".join(fields.get(name, [])))}</dd>'
                     for name in FORM_FIELDS)
    body = (f"<h1>Thanks</h1>\n<p>Submission number <span id=\"thanks-count\">{count}</span>.</p>\n"
            f"<dl id=\"thanks\">\n{rows}\n</dl>\n<p><a id=\"back\" href=\"/form\">Back to the form</a></p>")
    return document("Thanks", body)


LONG_FORM_FIELDS = (
    ("first_name", "First name"), ("last_name", "Last name"), ("email", "Email"), ("phone", "Phone"),
    ("company", "Company"), ("job_title", "Job title"), ("street", "Street address"), ("street2", "Address line 2"),
    ("city", "City"), ("region", "State or region"), ("postal_code", "Postal code"), ("website", "Website"),
    ("username", "Username"), ("referral", "Referral code"), ("team_size", "Team size"),
    ("use_case", "What will you use it for?"), ("heard_from", "How did you hear about us?"), ("notes", "Notes"),
)
"""The sign-up form's text fields (name, label): with ``country`` (a select) and ``terms`` (a checkbox), 20."""
LONG_FORM_COUNTRIES = (("fr", "France"), ("de", "Germany"), ("jp", "Japan"), ("br", "Brazil"))
LONG_FORM_SIZE = len(LONG_FORM_FIELDS) + 2


def form20() -> str:
    """/form20: a sign-up form of 20 labelled fields (18 text fields, a country select, a terms checkbox)."""
    kinds = {"email": "email", "phone": "tel", "website": "url"}
    rows = [f'  <p><label for="{name}">{escape(label)}</label> <input id="{name}" name="{name}" '
            f'type="{kinds.get(name, "text")}"></p>' if name != "notes" else
            f'  <p><label for="{name}">{escape(label)}</label> <textarea id="{name}" name="{name}"></textarea></p>'
            for name, label in LONG_FORM_FIELDS]
    options = "".join(f'<option value="{code}">{escape(label)}</option>' for code, label in LONG_FORM_COUNTRIES)
    body = f"""<h1>Create your account</h1>
<form id="form20" method="POST" action="/form20">
{chr(10).join(rows)}
  <p><label for="country">Country</label> <select id="country" name="country">{options}</select></p>
  <p><input id="terms" name="terms" type="checkbox" value="accepted"> <label for="terms">I accept the terms</label></p>
  <p><button id="sign-up" type="submit">Create account</button></p>
</form>"""
    return document(TITLES["/form20"], body)


def form20_thanks(fields: dict[str, list[str]], count: int) -> str:
    """The answer to a POST /form20: how many fields arrived, each value, and the submission's number."""
    names = [name for name, _ in LONG_FORM_FIELDS] + ["country", "terms"]
    rows = "\n".join(f'<dt>{name}</dt><dd id="got-{name}">{escape(", ".join(fields.get(name, [])))}</dd>'
                     for name in names)
    received = sum(1 for name in names if any(fields.get(name, [])))
    body = (f"<h1>Welcome aboard</h1>\n<p id=\"received\">{received} of {LONG_FORM_SIZE} fields received, "
            f"submission number {count}.</p>\n<dl>\n{rows}\n</dl>")
    return document("Welcome", body)


def slow() -> str:
    body = """<h1>Slow</h1>
<form id="slow-form" method="POST" action="/slow">
  <p><label for="item">Item</label> <input id="item" name="item" type="text"></p>
  <p><button id="slow-submit" type="submit">Submit slowly</button></p>
</form>"""
    return document(TITLES["/slow"], body)


def done(item: str, count: int) -> str:
    body = (f"<h1>Done</h1>\n<p>Item <span id=\"done-item\">{escape(item)}</span>, "
            f"write number <span id=\"done-count\">{count}</span>.</p>")
    return document("Done", body)


def shipping() -> str:
    body = """<h1>Shipping</h1>
<form id="shipping-form" method="POST" action="/checkout/shipping">
  <p><label for="address">Address</label> <input id="address" name="address" type="text"></p>
  <p><button id="to-billing" type="submit">Continue to billing</button></p>
</form>"""
    return document(TITLES["/checkout/shipping"], body)


def billing(address: str) -> str:
    body = f"""<h1>Billing</h1>
<p>Shipping to <span id="billing-address">{escape(address)}</span>.</p>
<form id="billing-form" method="POST" action="/checkout/billing">
  <p><label for="card">Card</label> <input id="card" name="card" type="text"></p>
  <p><button id="to-confirm" type="submit">Place order</button></p>
</form>"""
    return document(TITLES["/checkout/billing"], body)


def confirmation(order_id: str, address: str, card_last4: str) -> str:
    body = (f"<h1>Order confirmed</h1>\n<p>Order <span id=\"order-id\">{escape(order_id)}</span></p>\n"
            f"<p>Shipping to <span id=\"confirm-address\">{escape(address)}</span>, card ending "
            f"<span id=\"confirm-card\">{escape(card_last4)}</span>.</p>")
    return document(TITLES["/checkout/confirmation"], body)


def links() -> str:
    body = """<h1>Links</h1>
<p><a id="next" href="/links/next">Next page</a></p>
<p><a id="external-ish" href="/links/other">Other page</a></p>"""
    return document(TITLES["/links"], body)


def links_next() -> str:
    return document(TITLES["/links/next"], '<h1>Next</h1>\n<p><a id="back" href="/links">Back to links</a></p>')


def links_other() -> str:
    return document(TITLES["/links/other"], '<h1>Other</h1>\n<p><a id="back" href="/links">Back to links</a></p>')


def popups() -> str:
    body = """<h1>Popups</h1>
<p><button id="open-popup" type="button" onclick="window.open('/popups/child')">Open popup</button></p>
<p><a id="blank-link" href="/popups/child" target="_blank">Open in a new tab</a></p>"""
    return document(TITLES["/popups"], body)


def popup_child() -> str:
    return document(TITLES["/popups/child"], "<h1>Popup child</h1>\n<p id=\"child\">I am the popup child.</p>")


def cookies(cookie_header: str) -> str:
    body = f"""<h1>Cookies</h1>
<p>Server received: <code id="server-cookies">{escape(cookie_header)}</code></p>
<p>document.cookie: <code id="client-cookies"></code></p>
<form id="cookie-form" method="GET" action="/cookies/set">
  <p><label for="cookie-name">Name</label> <input id="cookie-name" name="name" type="text"></p>
  <p><label for="cookie-value">Value</label> <input id="cookie-value" name="value" type="text"></p>
  <p><button id="set-cookie" type="submit">Set cookie</button></p>
</form>"""
    script = 'document.getElementById("client-cookies").textContent = document.cookie;'
    return document(TITLES["/cookies"], body, script)


def storage() -> str:
    body = """<h1>Storage</h1>
<p><label for="key">Key</label> <input id="key" type="text">
   <label for="value">Value</label> <input id="value" type="text"></p>
<p><button id="save" type="button">Save</button> <button id="show" type="button">Show</button>
   <button id="clear" type="button">Clear</button> <span id="status"></span></p>
<pre id="dump"></pre>"""
    script = """function $(id) { return document.getElementById(id); }
$("save").addEventListener("click", function () {
  localStorage.setItem($("key").value, $("value").value);
  $("status").textContent = "saved " + $("key").value;
});
$("show").addEventListener("click", function () {
  var all = {};
  Object.keys(localStorage).sort().forEach(function (k) { all[k] = localStorage.getItem(k); });
  $("dump").textContent = JSON.stringify(all);
});
$("clear").addEventListener("click", function () {
  localStorage.clear();
  $("status").textContent = "cleared";
});"""
    return document(TITLES["/storage"], body, script)


def download() -> str:
    body = (f"<h1>Download</h1>\n<p><a id=\"download\" href=\"/download/{REPORT_NAME}\">Download {REPORT_NAME}</a></p>")
    return document(TITLES["/download"], body)


def clicks(total: int) -> str:
    buttons = "\n".join(f'<button id="b{i}" class="many" type="button">B{i}</button>' for i in range(10))
    body = f"""<h1>Clicks</h1>
<p><button id="hit" type="button">Hit the server</button> Server total: <span id="total">{total}</span></p>
<p><button id="local" type="button">Local click</button> Local count: <span id="local-count">0</span></p>
<p id="many">
{buttons}
</p>"""
    script = """var localCount = 0;
function bump() { localCount += 1; document.getElementById("local-count").textContent = String(localCount); }
document.getElementById("local").addEventListener("click", bump);
document.querySelectorAll("button.many").forEach(function (b) { b.addEventListener("click", bump); });
document.getElementById("hit").addEventListener("click", function () {
  fetch("/clicks/hit", {method: "POST"})
    .then(function (r) { return r.json(); })
    .then(function (data) { document.getElementById("total").textContent = String(data.total); });
});"""
    return document(TITLES["/clicks"], body, script)


def text() -> str:
    paragraphs = "\n".join(f'<p id="p{i}" class="para">{escape(p)}</p>' for i, p in enumerate(TEXT_PARAGRAPHS, 1))
    items = "\n".join(f'<li class="item">{escape(item)}</li>' for item in TEXT_ITEMS)
    body = (f"<h1 id=\"heading\">{escape(TEXT_HEADING)}</h1>\n{paragraphs}\n<ul id=\"items\">\n{items}\n</ul>\n"
            f"<p id=\"hidden\" hidden>{escape(HIDDEN_TEXT)}</p>")
    return document(TITLES["/text"], body)


def wait(delay_ms: int, on_click: bool = False) -> str:
    """#late arrives and #vanish goes delay_ms after the page runs its script, or after a click on #start.

    With on_click the page changes nothing until it is told to, so a test can look at the page before
    the change however slow the machine is. window.lateAfterMs is the delay the page itself measured.
    """
    start = '\n<p><button id="start" type="button">Start the timer</button></p>' if on_click else ""
    body = f"""<h1>Wait</h1>
<p id="vanish">I vanish after {delay_ms} ms.</p>{start}
<div id="slot"></div>"""
    trigger = ('document.getElementById("start").addEventListener("click", start, {once: true});'
               if on_click else "start();")
    script = f"""function arrive(startedAt) {{
  var late = document.createElement("p");
  late.id = "late";
  late.textContent = "I arrived late.";
  document.getElementById("slot").appendChild(late);
  var vanish = document.getElementById("vanish");
  if (vanish) {{ vanish.remove(); }}
  window.lateAfterMs = performance.now() - startedAt;
}}
function start() {{
  var startedAt = performance.now();
  setTimeout(function () {{ arrive(startedAt); }}, {delay_ms});
}}
{trigger}"""
    return document(TITLES["/wait"], body, script)


def navigate_on_click() -> str:
    body = """<h1>Navigate on click</h1>
<p><button id="go" type="button" onclick="location.href='/links/next'">Go</button></p>"""
    return document(TITLES["/navigate-on-click"], body)


def not_found(path: str) -> str:
    return document("Not found", f"<h1>Not found</h1>\n<p id=\"path\">{escape(path)}</p>")


# -- URL-policy pages ----------------------------------------------------------------------------------
#
# Each takes its target in ?to= (the server supplies a default when it is missing). The target goes into
# HTML attributes through html.escape and into scripts through js_string, so any URL is safe to pass.

TARGET_TITLE = "Target"
POLICY_TITLES = {
    "/policy/open": "Policy: open",
    "/policy/fetch": "Policy: fetch",
    "/policy/frame": "Policy: frame",
    "/policy/image": "Policy: image",
    "/policy/ws": "Policy: WebSocket",
    "/policy/sw": "Policy: service worker",
    "/policy/object": "Policy: object",
    "/policy/form": "Policy: form",
    "/policy/location": "Policy: location",
    "/policy/meta": "Policy: meta refresh",
    "/policy/refresh": "Policy: Refresh header",
    "/policy/prefetch": "Policy: prefetch",
    "/policy/prerender": "Policy: prerender",
    "/policy/webrtc": "Policy: WebRTC",
    "/policy/target": TARGET_TITLE,
}
# A 1x1 transparent GIF, served at /policy/pixel.gif (the image page's default target).
PIXEL_GIF = base64.b64decode("R0lGODlhAQABAIAAAAAAAP///yH5BAEAAAAALAAAAAABAAEAAAIBRAA7")
# The service worker served at /sw.js: it installs and does nothing (no fetch handler).
SERVICE_WORKER_JS = (b"// Kitsune test site: a service worker that does nothing.\n"
                     b"self.addEventListener(\"install\", function () { self.skipWaiting(); });\n")


def js_string(value: str) -> str:
    """A JavaScript string literal of value that is safe inside an inline <script> (no <, >, & or U+2028)."""
    return json.dumps(value).replace("<", "\\u003c").replace(">", "\\u003e").replace("&", "\\u0026")


def _target_script(to: str, script: str) -> str:
    return f"var TO = {js_string(to)};\nfunction $(id) {{ return document.getElementById(id); }}\n{script}"


def policy_open(to: str) -> str:
    body = f"""<h1>Policy: open</h1>
<p>Target: <code id="to">{escape(to)}</code></p>
<p><button id="open" type="button">window.open</button></p>
<p><a id="blank" href="{escape(to)}" target="_blank">Open in a new tab</a></p>"""
    script = '$("open").addEventListener("click", function () { window.open(TO); });'
    return document(POLICY_TITLES["/policy/open"], body, _target_script(to, script))


def policy_fetch(to: str) -> str:
    body = f"""<h1>Policy: fetch</h1>
<p>Target: <code id="to">{escape(to)}</code></p>
<p><button id="fetch" type="button">fetch</button> <span id="result"></span></p>"""
    script = """$("fetch").addEventListener("click", function () {
  $("result").textContent = "pending";
  fetch(TO, {cache: "no-store"}).then(
    function (r) { $("result").textContent = "ok " + r.status; },
    function (e) { $("result").textContent = "error " + ((e && e.name) || "Error"); });
});"""
    return document(POLICY_TITLES["/policy/fetch"], body, _target_script(to, script))


def policy_frame(to: str) -> str:
    body = f"""<h1>Policy: frame</h1>
<p>Target: <code id="to">{escape(to)}</code></p>
<iframe id="frame" title="target" src="{escape(to)}" width="600" height="200"></iframe>"""
    return document(POLICY_TITLES["/policy/frame"], body, _target_script(to, ""))


def policy_image(to: str) -> str:
    # #state comes before the image, and the handlers are attributes: they exist before the load can finish.
    body = f"""<h1>Policy: image</h1>
<p>Target: <code id="to">{escape(to)}</code></p>
<p>State: <span id="state">loading</span></p>
<p><img id="img" alt="target image" src="{escape(to)}"
  onload="document.getElementById('state').textContent = 'loaded'"
  onerror="document.getElementById('state').textContent = 'error'"></p>"""
    return document(POLICY_TITLES["/policy/image"], body, _target_script(to, ""))


def policy_ws(to: str) -> str:
    body = f"""<h1>Policy: WebSocket</h1>
<p>Target: <code id="to">{escape(to)}</code></p>
<p><button id="ws" type="button">Connect</button> <span id="result"></span></p>"""
    script = """var socket = null;
$("ws").addEventListener("click", function () {
  $("result").textContent = "connecting";
  try {
    socket = new WebSocket(TO);
  } catch (e) {
    $("result").textContent = "error " + ((e && e.name) || "Error");
    return;
  }
  socket.onopen = function () { $("result").textContent = "open"; };
  socket.onerror = function () { $("result").textContent = "error"; };
  socket.onclose = function () { if ($("result").textContent !== "error") { $("result").textContent = "close"; } };
});"""
    return document(POLICY_TITLES["/policy/ws"], body, _target_script(to, script))


def policy_object(to: str) -> str:
    body = f"""<h1>Policy: object</h1>
<object id="object" type="text/html" data="{escape(to)}" width="600" height="200"></object>"""
    return document(POLICY_TITLES["/policy/object"], body, _target_script(to, ""))


def policy_form(to: str) -> str:
    body = f"""<h1>Policy: form</h1>
<form id="form" method="post" action="{escape(to)}"><input name="item" value="x">
<button id="submit" type="submit">Post</button></form>"""
    return document(POLICY_TITLES["/policy/form"], body, _target_script(to, ""))


def policy_location(to: str) -> str:
    body = '<h1>Policy: location</h1>\n<p><button id="go" type="button">location = TO</button></p>'
    script = '$("go").addEventListener("click", function () { location = TO; });'
    return document(POLICY_TITLES["/policy/location"], body, _target_script(to, script))


def policy_meta(to: str) -> str:
    body = f'<meta http-equiv="refresh" content="0;url={escape(to)}">\n<h1>Policy: meta refresh</h1>'
    return document(POLICY_TITLES["/policy/meta"], body, _target_script(to, ""))


def policy_refresh(to: str) -> str:
    """The page the server sends with ``Refresh: 0;url=<to>``."""
    return document(POLICY_TITLES["/policy/refresh"], "<h1>Policy: Refresh header</h1>", _target_script(to, ""))


def _speculation(kind: str, to: str) -> str:
    rules = json.dumps({kind: [{"source": "list", "urls": [to], "eagerness": "immediate"}]}).replace("<", "\\u003c")
    body = f"""<h1>Policy: {kind}</h1>
<script type="speculationrules">{rules}</script>
<p><a id="link" href="{escape(to)}">the target</a></p>"""
    return document(POLICY_TITLES[f"/policy/{kind}"], body, _target_script(to, ""))


def policy_prefetch(to: str) -> str:
    return _speculation("prefetch", to)


def policy_prerender(to: str) -> str:
    return _speculation("prerender", to)


def policy_webrtc(to: str) -> str:
    """ICE gathering with ``to`` as the ICE server (``stun:`` or ``turn:``, TURN with test credentials)."""
    body = '<h1>Policy: WebRTC</h1>\n<p>ICE: <span id="result">pending</span></p>'
    script = """var server = {urls: TO};
if (TO.indexOf("turn") === 0) { server.username = "user"; server.credential = "secret"; }
var pc = new RTCPeerConnection({iceServers: [server], iceTransportPolicy: "all"});
pc.createDataChannel("probe");
pc.onicegatheringstatechange = function () {
  if (pc.iceGatheringState === "complete") { $("result").textContent = "complete"; }
};
pc.createOffer().then(function (offer) { return pc.setLocalDescription(offer); }).catch(function (e) {
  $("result").textContent = "error " + ((e && e.name) || "Error");
});"""
    return document(POLICY_TITLES["/policy/webrtc"], body, _target_script(to, script))


def policy_sw() -> str:
    body = """<h1>Policy: service worker</h1>
<p>Registering <code>/sw.js</code>: <span id="result">pending</span></p>"""
    script = """function $(id) { return document.getElementById(id); }
if (!("serviceWorker" in navigator)) {
  $("result").textContent = "error " + (window.isSecureContext ? "NotSupportedError" : "SecurityError");
} else {
  navigator.serviceWorker.register("/sw.js").then(
    function () { $("result").textContent = "registered"; },
    function (e) { $("result").textContent = "error " + ((e && e.name) || "Error"); });
}"""
    return document(POLICY_TITLES["/policy/sw"], body, script)


def policy_target() -> str:
    return document(TARGET_TITLE, '<h1 id="target">Target</h1>\n<p>You reached the target page.</p>')


# -- "needs user" pages ------------------------------------------------------------------------------------
#
# Each shows something only a person can deal with, and a button that makes it go away (no request is sent).

NEEDS_USER_ATTRIBUTE = "data-kitsune-needs-user"
NEEDS_USER_TITLES = {
    "/needs-user/sign-in": "Sign in",
    "/needs-user/captcha": "Captcha",
    "/needs-user/marked": "Human check",
    "/needs-user/none": "Nothing needed",
}


def needs_user_sign_in() -> str:
    body = """<h1>Sign in</h1>
<div id="slot">
<form id="sign-in-form" action="#">
  <p><label for="username">User name</label> <input id="username" name="username" type="text"
     autocomplete="username"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password"
     autocomplete="current-password"></p>
  <p><button id="sign-in" type="submit">Sign in</button></p>
</form>
</div>"""
    script = """document.getElementById("sign-in-form").addEventListener("submit", function (event) {
  event.preventDefault();
  var done = document.createElement("p");
  done.id = "signed-in";
  done.textContent = "Signed in";
  document.getElementById("slot").replaceChildren(done);
});"""
    return document(NEEDS_USER_TITLES["/needs-user/sign-in"], body, script)


def account(signed_in_as: str | None) -> str:
    """/account: a sign-in form that POSTs to /sign-in (counted) until a person signed in, then the account."""
    if signed_in_as is None:
        body = """<h1>Sign in to your account</h1>
<form id="sign-in-form" method="post" action="/sign-in">
  <p><label for="username">User name</label> <input id="username" name="username" type="text"></p>
  <p><label for="password">Password</label> <input id="password" name="password" type="password"></p>
  <p><button id="sign-in" type="submit">Sign in</button></p>
</form>"""
        return document("Sign in", body)
    body = f"""<h1 id="account">Account of {escape(signed_in_as)}</h1>
<form method="post" action="/account/order"><button id="order" type="submit">Place the order</button></form>"""
    return document("Account", body)


def needs_user_captcha() -> str:
    body = """<h1>Captcha</h1>
<div id="captcha" class="g-recaptcha" data-sitekey="kitsune-test-site-key">I am not a robot</div>
<p><button id="solve" type="button">Solve</button> <span id="status"></span></p>"""
    script = """document.getElementById("solve").addEventListener("click", function () {
  var captcha = document.getElementById("captcha");
  if (captcha) { captcha.remove(); }
  document.getElementById("status").textContent = "Solved";
});"""
    return document(NEEDS_USER_TITLES["/needs-user/captcha"], body, script)


def needs_user_marked() -> str:
    body = f"""<h1>Human check</h1>
<div id="marked" {NEEDS_USER_ATTRIBUTE}="human_check">Please confirm that you are a person.</div>
<p><button id="done" type="button">Done</button> <span id="status"></span></p>"""
    script = """document.getElementById("done").addEventListener("click", function () {
  var marked = document.getElementById("marked");
  if (marked) { marked.remove(); }
  document.getElementById("status").textContent = "Done";
});"""
    return document(NEEDS_USER_TITLES["/needs-user/marked"], body, script)


def needs_user_none() -> str:
    return document(NEEDS_USER_TITLES["/needs-user/none"],
                    "<h1>Nothing needed</h1>\n<p id=\"nothing\">Nothing here needs a person.</p>")
