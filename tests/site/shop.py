"""The test site's shop: pages whose tools an agent calls (WebMCP).

The pages use only the standard page API, which the node injects into every document: most the older form's
(``navigator.modelContext.registerTool``, ``execute(input, options)``, ``options.invocation.requestToken()``,
``navigator.modelContext.resumeTool(token, callback)``), the draft's pages ``document.modelContext`` and
declarative forms. Every tool's write is a counted POST ("POST /shop/billing", ...).

- ``/shop``: ``search(query)``, a read of the catalogue, no continuation.
- ``/shop/billing`` -> ``/shop/shipping`` -> ``/shop/confirmation``: ``checkout(shipping_address,
  billing_address)``, three documents and two tokens, one POST on each page; the cart goes along in ``?cart=``.
- ``/shop/item``: ``try_on(item_id)``, which creates ``/shop/tryon-frame`` on demand; the frame finishes it.
- ``/shop/leave``: ``leave(note)`` POSTs, then navigates to ``/shop/leave?left=1`` without a token; there
  the same tool POSTs and answers without navigating.
- ``/shop/handoff?to=URL``: ``hand_off(note)`` requests a token and navigates to URL with ``token=`` added
  (another origin's ``/shop/redeem`` for a cross-origin redemption).
- ``/shop/hold``: ``hold(note)`` requests a token and stays: nothing redeems it unless a test does.
- ``/shop/wishlist`` (``document.modelContext``, the current draft's form): ``stock(item_id)``, declared
  ``readOnlyHint`` and ``untrustedContentHint``, a read of the catalogue; ``wish(item_id)`` POSTs, registered with
  a signal that ``window.dropWish()`` aborts. ``window.toolchanges`` counts the ``toolchange`` events,
  ``window.wishEnded`` names how the registration's promise ended.
- ``/shop/order``: a declarative ``<form toolname="order" toolautosubmit>`` (item_id, quantity, gift, size) that
  POSTs to /shop/order, whose answer is a page with the order in its JSON-LD; ``/shop/note``: a declarative
  ``note`` form without ``toolautosubmit`` (it POSTs /shop/note only when a person submits it).
- ``/shop/redeem?token=T[&twice=1]``: redeems T; its callback answers ``{"redeemed": path, "again": ...}``,
  where ``again`` is how a second redemption of T fared (``twice``). A refused redemption sets the title
  to ``rejected: <DOMException name>``.

Every token a page requests is kept, for the tests, in the tab's ``sessionStorage["shop.tokens"]``
(a JSON list) of that origin.
"""

from __future__ import annotations

import json
import threading
from http import HTTPStatus

from tests.site.pages import document

PREFIX = "/shop"
CATALOGUE = {
    "dress-red": {"name": "Red summer dress", "price": "49.00", "fit": "true to size"},
    "dress-blue": {"name": "Blue evening dress", "price": "89.00", "fit": "runs small"},
    "coat-wool": {"name": "Wool coat", "price": "129.00", "fit": "runs large"},
}
TOKENS_KEY = "shop.tokens"
REJECTED = "rejected: "
"""The title of a page whose redemption was refused starts with it (then the DOMException's name)."""

Answer = tuple[int, bytes, str]
"""An HTTP status, a body and its content type."""

_COMMON = f"""const mc = navigator.modelContext;
const params = new URLSearchParams(location.search);
function keep(token) {{
  const kept = JSON.parse(sessionStorage.getItem({json.dumps(TOKENS_KEY)}) || "[]");
  kept.push(token);
  sessionStorage.setItem({json.dumps(TOKENS_KEY)}, JSON.stringify(kept));
  return token;
}}
async function requestToken(options) {{ return keep(await options.invocation.requestToken()); }}
async function post(path, fields) {{
  const answer = await fetch(path, {{method: "POST", body: new URLSearchParams(fields)}});
  if (!answer.ok) throw new Error(path + " answered " + answer.status);
  return answer.json();
}}
function show(data) {{ document.getElementById("out").textContent = JSON.stringify(data); return data; }}
function go(to, fields) {{
  const url = new URL(to, location.href);
  for (const [name, value] of Object.entries(fields)) url.searchParams.set(name, value);
  location.href = url.href;
}}
function redeem(callback) {{
  return mc.resumeTool(params.get("token") || "", callback).then(
    () => {{ document.body.dataset.resumed = "yes"; }},
    (e) => {{ document.title = {json.dumps(REJECTED)} + ((e && e.name) || "Error"); }});
}}
function text(description) {{ return {{type: "string", minLength: 1, maxLength: 500, description}}; }}
function schema(properties, required) {{
  return {{type: "object", properties, required, additionalProperties: false}};
}}
"""


def _page(title: str, script: str) -> str:
    return document(title, f'<h1>{title}</h1>\n<pre id="out"></pre>', _COMMON + script)


SEARCH = _page("Shop", """mc.registerTool({
  name: "search", description: "Search the shop's catalogue by name.", annotations: {readOnlyHint: true},
  inputSchema: schema({query: text("Words of the item's name")}, ["query"]),
  execute: async (input) => show(await (await fetch("/shop/api/search?q=" + encodeURIComponent(input.query))).json()),
});""")

BILLING = _page("Billing", """mc.registerTool({
  name: "checkout", description: "Buy the cart: billing, then shipping, then the order's confirmation.",
  inputSchema: schema({shipping_address: text("Where to ship"), billing_address: text("Whom to bill")},
                      ["shipping_address", "billing_address"]),
  execute: async (input, options) => {
    const token = await requestToken(options);
    const billed = await post("/shop/billing", {billing_address: input.billing_address});
    go("/shop/shipping", {token, cart: billed.cart});
    return {step: "billing"};
  },
});""")

SHIPPING = _page("Shipping", """redeem(async (input, options) => {
  const token = await requestToken(options);
  const cart = params.get("cart") || "";
  await post("/shop/shipping", {cart, shipping_address: input.shipping_address});
  go("/shop/confirmation", {token, cart});
  return {step: "shipping"};
});""")

CONFIRMATION = _page("Confirmation", """redeem(async () => show(
  await post("/shop/confirmation", {cart: params.get("cart") || ""})));""")

ITEM = _page("Item", """mc.registerTool({
  name: "try_on", description: "Try an item on, in the try-on frame (loaded on demand).",
  inputSchema: schema({item_id: text("The item's id")}, ["item_id"]),
  execute: async (input, options) => {
    const token = await requestToken(options);
    const frame = document.createElement("iframe");
    frame.id = "tryon";
    frame.title = "Try-on";
    frame.src = "/shop/tryon-frame?" + new URLSearchParams({token});
    document.body.appendChild(frame);
    return {step: "frame"};
  },
});""")

TRYON_FRAME = _page("Try-on", """redeem(async (input) => show(await post("/shop/tryon", {item_id: input.item_id})));""")

LEAVE = _page("Leave", """mc.registerTool({
  name: "leave", description: "Leave a note; the first page navigates away as it does.",
  inputSchema: schema({note: text("The note")}, ["note"]),
  execute: async (input) => {
    const sent = await post("/shop/leave", {note: input.note});
    if (params.has("left")) return show({left: true, count: sent.count});
    location.href = "/shop/leave?left=1";
    return new Promise(() => {});  // the page goes away while the tool runs
  },
});""")

HANDOFF = _page("Hand-off", """mc.registerTool({
  name: "hand_off", description: "Carry on in the document at ?to=.",
  inputSchema: schema({note: text("The note")}, []),
  execute: async (input, options) => {
    const to = params.get("to");
    if (!to) throw new Error("no ?to= to hand off to");
    go(to, {token: await requestToken(options)});
    return {step: "hand_off"};
  },
});""")

HOLD = _page("Hold", """mc.registerTool({
  name: "hold", description: "Ask for a continuation and stay on this page.",
  inputSchema: schema({note: text("The note")}, []),
  execute: async (input, options) => { await requestToken(options); return {step: "hold"}; },
});""")

WAITS = _page("Waits", """mc.registerTool({
  name: "wait_for_frame", description: "Carry on in a frame; settle once the frame's resumeTool resolved.",
  inputSchema: schema({note: text("The note")}, []),
  execute: async (input, options) => {
    const frame = document.createElement("iframe");
    frame.src = "/shop/redeem?" + new URLSearchParams({token: await requestToken(options)});
    document.body.appendChild(frame);
    await new Promise((resolve) => {  // the frame's callback runs only after this settles
      const resumed = () => frame.contentDocument?.body?.dataset.resumed === "yes" && resolve();
      setInterval(resumed, 10);
    });
    return {step: "waited"};
  },
});""")

REDEEM = _page("Redeem", """redeem(async () => {
  let again = null;
  if (params.has("twice")) {
    again = await mc.resumeTool(params.get("token") || "", async () => ({replayed: true})).then(
      () => "accepted", (e) => (e && e.name) || "Error");
  }
  return show({redeemed: location.pathname, again});
});""")

WISHLIST = _page("Wishlist", """const tools = document.modelContext;
window.toolchanges = 0;
tools.ontoolchange = () => { window.toolchanges += 1; };
tools.registerTool({
  name: "stock", description: "How many of an item are in stock (the answer quotes the supplier).",
  annotations: {readOnlyHint: true, untrustedContentHint: true},
  inputSchema: schema({item_id: text("The item's id")}, ["item_id"]),
  execute: async (input) => show({item_id: input.item_id, in_stock: input.item_id in {"coat-wool": 1}}),
});
const wishes = new AbortController();
window.dropWish = () => wishes.abort();
tools.registerTool({
  name: "wish", description: "Put an item on the wish list.",
  inputSchema: schema({item_id: text("The item's id")}, ["item_id"]),
  execute: async (input) => show(await post("/shop/wish", {item_id: input.item_id})),
}, {signal: wishes.signal}).then(() => { window.wishEnded = "registered"; },
                                 (e) => { window.wishEnded = (e && e.name) || String(e); });""")

ORDER = document("Order", """<h1>Order</h1>
<form id="order" toolname="order" tooldescription="Order an item of the shop." toolautosubmit method="post"
      action="/shop/order">
  <input name="item_id" required toolparamdescription="The item's id">
  <input name="quantity" type="number" min="1" max="9">
  <input name="gift" type="checkbox">
  <select name="size"><option value="s">S</option><option value="m">M</option><option value="l">L</option></select>
  <input type="hidden" name="channel" value="agent">
  <button>Order</button>
</form>""")

NOTE = document("Note", """<h1>Note</h1>
<form id="note" toolname="note" tooldescription="Leave a note; a person checks it and sends it." method="post"
      action="/shop/note">
  <textarea name="text" required maxlength="200"></textarea>
  <button id="send">Send</button>
</form>""")

PAGES = {
    "/shop": SEARCH, "/shop/billing": BILLING, "/shop/shipping": SHIPPING, "/shop/confirmation": CONFIRMATION,
    "/shop/item": ITEM, "/shop/tryon-frame": TRYON_FRAME, "/shop/leave": LEAVE, "/shop/handoff": HANDOFF,
    "/shop/hold": HOLD, "/shop/waits": WAITS, "/shop/redeem": REDEEM,
}
"""path -> the HTML of the shop's pages written for the older form, ``navigator.modelContext``."""
DRAFT_PAGES = {"/shop/wishlist": WISHLIST, "/shop/order": ORDER, "/shop/note": NOTE}
"""path -> the HTML of the shop's pages of the current draft: ``document.modelContext``, declarative forms."""


def owns(path: str) -> bool:
    """Whether ``path`` is the shop's (GET and POST)."""
    return path == PREFIX or path.startswith(PREFIX + "/")


def _json(data: object, status: int = HTTPStatus.OK) -> Answer:
    return status, json.dumps(data).encode("utf-8"), "application/json"


def _first(fields: dict[str, list[str]], name: str) -> str:
    return (fields.get(name) or [""])[0]


class Shop:
    """The shop's server side: carts and orders of one TestSite, under a lock (the handler's threads share it)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._carts: dict[str, dict[str, str]] = {}
        self._orders = 0
        self._notes = 0

    def reset(self) -> None:
        """Forget every cart, order and note."""
        with self._lock:
            self._carts.clear()
            self._orders = self._notes = 0

    def get(self, path: str, query: dict[str, list[str]]) -> Answer:
        """The answer to a GET of a shop page or of /shop/api/search?q= (a read: never counted)."""
        if path == "/shop/api/search":
            words = _first(query, "q").lower().split()
            found = [{"id": item, "name": about["name"], "price": about["price"]} for item, about in CATALOGUE.items()
                     if all(word in about["name"].lower() for word in words)]
            return _json({"query": _first(query, "q"), "results": found})
        if (page := PAGES.get(path, DRAFT_PAGES.get(path))) is not None:
            return HTTPStatus.OK, page.encode("utf-8"), "text/html; charset=utf-8"
        return _json({"error": f"no shop page {path}"}, HTTPStatus.NOT_FOUND)

    def post(self, path: str, fields: dict[str, list[str]]) -> Answer:
        """The answer to a POST (the server counted it already): JSON, 400 or 404 when it makes no sense."""
        with self._lock:
            if path == "/shop/billing":
                cart = f"CART-{len(self._carts) + 1:04d}"
                self._carts[cart] = {"billing_address": _first(fields, "billing_address")}
                return _json({"cart": cart})
            if path == "/shop/leave":
                self._notes += 1
                return _json({"count": self._notes})
            if path == "/shop/wish":
                return _json({"wished": _first(fields, "item_id")})
            if path == "/shop/order":
                return self._order(fields)
            if path == "/shop/tryon":
                item = _first(fields, "item_id")
                if item not in CATALOGUE:
                    return _json({"error": "no such item"}, HTTPStatus.NOT_FOUND)
                return _json({"item_id": item, "fit": CATALOGUE[item]["fit"]})
            return self._cart_step(path, fields)

    def _order(self, fields: dict[str, list[str]]) -> Answer:
        """The page a submitted order form loads: the order in its JSON-LD (called under the lock)."""
        self._orders += 1
        order = {"order": f"ORDER-{self._orders:04d}", **{name: _first(fields, name) for name in sorted(fields)}}
        page = document("Ordered", f'<h1>Ordered</h1>\n<script type="application/ld+json">{json.dumps(order)}</script>')
        return HTTPStatus.OK, page.encode("utf-8"), "text/html; charset=utf-8"

    def _cart_step(self, path: str, fields: dict[str, list[str]]) -> Answer:
        cart = self._carts.get(_first(fields, "cart"))
        if path not in ("/shop/shipping", "/shop/confirmation"):
            return _json({"error": f"no shop write {path}"}, HTTPStatus.NOT_FOUND)
        if cart is None:
            return _json({"error": "unknown cart"}, HTTPStatus.BAD_REQUEST)
        if path == "/shop/shipping":
            cart["shipping_address"] = _first(fields, "shipping_address")
            return _json({"cart": _first(fields, "cart")})
        if "shipping_address" not in cart or "order" in cart:
            return _json({"error": "the cart is not ready to order"}, HTTPStatus.CONFLICT)
        self._orders += 1
        cart["order"] = f"SHOP-{self._orders:04d}"
        return _json({"order": cart["order"], "shipping_address": cart["shipping_address"],
                      "billing_address": cart["billing_address"]})
