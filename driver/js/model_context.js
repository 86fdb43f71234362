// document.modelContext (WebMCP as its draft reads today) in every secure document of every frame, before the
// page's own scripts, with navigator.modelContext as the older form's alias; and the tools <form toolname>
// declares. The page declares tools; the node calls them and follows their continuation tokens. This side
// speaks to the node only through its binding, whose every call the node attributes to the tab,
// frame and document that made it: nothing here can name another tab, frame or origin.
(() => {
  "use strict";
  const BINDING = "__kitsuneSiteTools";
  let send = null;
  const bound = () => {  // the node's CDP binding, taken out of the page's reach as soon as it is in the document
    if (send === null && typeof globalThis[BINDING] === "function") {
      send = globalThis[BINDING];
      delete globalThis[BINDING];
    }
    return send;
  };
  bound();
  if (!globalThis.isSecureContext) return;  // the draft's [SecureContext]: no modelContext at all

  // The page's own scripts run later and may replace these: the ones taken now are the browser's.
  const { stringify, parse } = JSON;
  const random = new Uint8Array(16);
  crypto.getRandomValues(random);
  const doc = Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
  // A message is one call of the binding with its JSON. One the page waits on carries `reply`: the node answers it
  // with answer(reply, outcome) in this document; the others (took, settled, unregister, clear) are not answered.
  // A document that loaded before the node's channel reached its page (a popup's first one) keeps its messages
  // until the node, once there, tells it (attach).
  const queued = [];
  const flush = () => {
    if (bound() === null) return false;
    queued.splice(0).forEach((text) => send(text));
    return true;
  };
  const out = (message) => {
    queued.push(stringify(message));
    flush();
  };
  const waiting = new Map();  // reply -> [resolve, reject]
  let replies = 0;
  const ask = (message) => new Promise((resolve, reject) => {
    const reply = ++replies;
    waiting.set(reply, [resolve, reject]);
    try {
      out({ ...message, reply });
    } catch (e) {
      waiting.delete(reply);
      reject(e);
    }
  });
  const tell = (message) => {
    try {
      out(message);
    } catch (e) {}  // a message the node never hears: what waits on the node learns it there
  };
  let untracked = null;  // the node's refusal of this document (its tab has as many as it tracks): it declares nothing
  let hello = null;  // the answer to the document's first message, which is its hello too (none is sent before)
  const refused = (op, fields) => {
    if (op === "register") return { refused: `registerTool ${fields.tool.name}: ${untracked}` };
    throw new DOMException("the node does not track this document", "NotAllowedError");
  };
  const first = (message) => {  // the document's first message: the node tracks the document from it (and answers)
    const sent = ask({ ...message, hello: true });
    hello = sent.then((answer) => {
      if (answer && typeof answer.untracked === "string") untracked = answer.untracked;
    }, () => {});
    return sent.then((answer) => (untracked === null ? answer : refused(message.op, message)));
  };
  // `answered`: whether the page waits on the node's answer (a promise of it), or only tells it (a promise of null).
  const post = (op, fields, answered = true) => {
    if (hello === null) return first({ op, doc, ...fields });
    return hello.then(() => {
      if (untracked !== null) return refused(op, fields);
      if (answered) return ask({ op, doc, ...fields });
      tell({ op, doc, ...fields });
      return null;
    });
  };
  let heard = 0;  // declaration messages sent: the node has heard them all when its count is the same
  const declare = (op, fields, answered = true) => post(op, { seq: ++heard, ...fields }, answered);
  const quietly = (promise) => { promise.catch(() => {}); };

  const OUTPUT_CHARS = 1048576;  // a tool's output, as JSON: the node does not take more
  const LIMITS = { tools: 64, description: 4096, schemaBytes: 65536 };  // declarations.py's, tested alike
  const RATE = { bytes: 1048576, burst: 5242880, cost: 4096 };  // DECLARATION_RATE, _BURST, _COST: tested alike
  let left = RATE.burst;
  let at = performance.now();
  const within = (size) => {  // the node's bound on this document's declarations, kept here first
    const now = performance.now();
    left = Math.min(RATE.burst, left + ((now - at) / 1000) * RATE.bytes);
    at = now;
    const cost = Math.max(RATE.cost, size);
    if (left < cost) return false;
    left -= cost;
    return true;
  };
  const refusal = (name, why) => ({ refused: `registerTool ${name}: ${why}` });
  const FORM = Symbol("form");  // a declarative form's tool carries { autosubmit } under it
  const tools = new Map();  // name -> the page's declaration
  const running = new Map();  // invocation id -> its AbortController

  const jsonable = (value) => {
    try {
      const text = stringify(value === undefined ? null : value);
      if (text !== undefined && text.length > OUTPUT_CHARS) {
        return { ok: false, error: { name: "RangeError", message: `the tool's output is over ${OUTPUT_CHARS} characters of JSON` } };
      }
      return { ok: true, value: text === undefined ? null : parse(text) };
    } catch (e) {
      return { ok: false, error: { name: "TypeError", message: "the tool's output is not JSON" } };
    }
  };
  const described = (error) => ({
    name: String((error && error.name) || "Error").slice(0, 64),
    message: String(error && error.message !== undefined ? error.message : error).slice(0, 300),
  });

  // `reserved`: the token the node issued with the invocation. The tool's first requestToken answers it at once and
  // tells the node it was taken (the message goes before the tool's next step can); a later one asks the node.
  function run(id, execute, input, reserved) {
    const controller = new AbortController();
    let settled = false;
    let token = typeof reserved === "string" ? reserved : null;
    const invocation = Object.freeze({
      requestToken() {
        if (settled) return Promise.reject(new DOMException("the tool call has settled", "InvalidStateError"));
        if (token === null) return post("requestToken", { invocation: id });
        const taken = token;
        token = null;
        quietly(post("took", { invocation: id }, false));
        return Promise.resolve(taken);
      },
    });
    running.set(id, controller);
    const options = Object.freeze({ invocation, signal: controller.signal });
    Promise.resolve().then(() => execute(input, options)).then(
      (value) => ({ ...jsonable(value) }),
      (error) => ({ ok: false, error: described(error) }),
    ).then((answer) => {
      settled = true;
      token = null;
      running.delete(id);
      quietly(post("settled", { invocation: id, ...answer }, false));
    });
  }

  function declaration(tool) {
    if (tool === null || typeof tool !== "object") throw new TypeError("registerTool: a tool is an object");
    const { name, description = "", inputSchema = { type: "object" }, annotations, execute } = tool;
    if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,128}$/.test(name)) {
      throw new TypeError("registerTool: name must match [A-Za-z0-9_.-]{1,128}");
    }
    if (typeof description !== "string") throw new TypeError("registerTool: description must be a string");
    if (typeof execute !== "function") throw new TypeError("registerTool: execute must be a function");
    let schema;
    try {
      schema = stringify(inputSchema);
    } catch (e) {
      schema = undefined;
    }
    if (typeof schema !== "string" || !schema.startsWith("{")) {
      throw new TypeError("registerTool: inputSchema must be a JSON object");
    }
    const hints = annotations !== null && typeof annotations === "object" ? annotations : {};
    const kept = {};
    for (const key of ["title", "readOnlyHint", "untrustedContentHint", "destructiveHint", "idempotentHint",
      "openWorldHint"]) {
      const value = hints[key];
      if (typeof value === "boolean" || (key === "title" && typeof value === "string")) kept[key] = value.valueOf();
    }
    if (typeof kept.title === "string") kept.title = kept.title.slice(0, 128);
    // The node checks the limits (declarations.py) and answers a refusal by name; those it can, this side checks
    // first, so that a flood of declarations never reaches the node.
    if (description.length > LIMITS.description) {
      return refusal(name, `description_length: the description must be a string of at most ${LIMITS.description} characters`);
    }
    if (schema.length > LIMITS.schemaBytes) {  // UTF-8 takes at least as many bytes as UTF-16 takes units
      return refusal(name, `schema_size: the input schema must be at most ${LIMITS.schemaBytes} bytes of JSON`);
    }
    return { name, description, inputSchema: schema, annotations: kept, execute, form: tool[FORM] };
  }

  // Resolves once the node holds the tool; rejects (a TypeError naming the limit) when it refuses it. A tool
  // registered with a signal is unregistered when the signal aborts (the promise rejects with its reason).
  function register(tool, options) {
    const signal = options !== null && typeof options === "object" ? options.signal : undefined;
    if (signal !== undefined && !(signal instanceof AbortSignal)) {
      throw new TypeError("registerTool: options.signal must be an AbortSignal");
    }
    const declared = declaration(tool);
    if (signal !== undefined && signal.aborted) return Promise.reject(signal.reason);
    if (declared.refused) return Promise.reject(new TypeError(declared.refused));
    if (tools.has(declared.name)) {
      throw new DOMException(`a tool named ${declared.name} is registered already`, "InvalidStateError");
    }
    if (tools.size >= LIMITS.tools) {
      return Promise.reject(new TypeError(`registerTool ${declared.name}: tool_count: this document declares `
        + `${LIMITS.tools} tools already, the most one document may`));
    }
    if (!within(declared.inputSchema.length + declared.description.length)) {
      return Promise.reject(new TypeError(`registerTool ${declared.name}: declaration_rate: this document declared `
        + `more than ${RATE.bytes} bytes of tools a second (after ${RATE.burst} at once)`));
    }
    tools.set(declared.name, declared);
    const { name, description, inputSchema, annotations, form } = declared;
    const registered = declare("register", { tool: { name, description, inputSchema, annotations, form } })
      .then((answer) => {
        if (answer && typeof answer.refused === "string") {
          if (tools.get(name) === declared) tools.delete(name);
          throw new TypeError(answer.refused);
        }
        if (tools.get(name) === declared) changed();
      });
    if (signal === undefined) return registered;
    return new Promise((resolve, reject) => {
      signal.addEventListener("abort", () => {
        if (tools.get(name) === declared) unregister(name);
        reject(signal.reason);
      }, { once: true });
      registered.then(resolve, reject);
    });
  }

  function unregister(name) {
    if (tools.delete(name)) {
      quietly(declare("unregister", { name }, false));
      changed();
    }
  }

  function clear() {
    tools.clear();
    quietly(declare("clear", {}, false));
    changed();
  }

  // The continuations the node armed for this document (armed.py): an init script of the tab, run before this one's
  // page scripts in its top documents of the tokens' origin, hands each over sealed under its token (AES-256-GCM):
  // the id of the invocation redeeming it starts, the token that invocation may ask for, and the call's input.
  const ARMED = 16;  // hand-offs one document keeps at most (runtime's scripts a chain x what each arms, and more)
  const armed = [];
  const subtle = crypto.subtle;
  const { importKey, decrypt } = SubtleCrypto.prototype;
  const now = Date.now;
  const bytes = (base64) => Uint8Array.from(atob(base64), (c) => c.charCodeAt(0));
  function arm(until, iv, sealed) {
    if (armed.length < ARMED && window === window.top) armed.push({ until, iv, sealed });
  }
  // The hand-off `token` opens (taken from the list: this document opens it once), or null.
  async function unseal(token) {
    try {
      const key = await importKey.call(subtle, "raw", bytes(token.replace(/-/g, "+").replace(/_/g, "/")), "AES-GCM",
        false, ["decrypt"]);
      const [entry, opened] = await Promise.any(armed.filter((entry) => now() < entry.until).map((entry) =>
        decrypt.call(subtle, { name: "AES-GCM", iv: bytes(entry.iv) }, key, bytes(entry.sealed))
          .then((plain) => [entry, plain])));
      const at = armed.indexOf(entry);
      if (at < 0) return null;  // opened by another resumeTool of this document meanwhile
      armed.splice(at, 1);
      return parse(new TextDecoder().decode(opened));
    } catch (e) {
      return null;  // no hand-off is sealed under it (or it is no key at all)
    }
  }

  function resumeTool(token, callback) {
    if (typeof token !== "string" || typeof callback !== "function") {
      return Promise.reject(new TypeError("resumeTool(token, callback): a string and a function"));
    }
    if (token.length > 256 || untracked !== null) {  // no token is that long (runtime.py's TOKEN_CHARS)
      return Promise.reject(new DOMException("the continuation token was refused", "NotAllowedError"));
    }
    if (armed.length === 0) return redeem(token, callback);
    return unseal(token).then((opened) => (opened === null ? redeem(token, callback) : resumed(token, opened, callback)));
  }

  // A hand-off opened: the callback runs now, and the node hears of it (as this document's hello, when it is its
  // first message). The node checks the redemption as it hears it, and aborts the callback's signal if it refuses.
  function resumed(token, { invocation: id, token: reserved, input }, callback) {
    if (hello === null) {
      hello = Promise.resolve();  // a top document: the node tracks it
      tell({ op: "resume", doc, token, invocation: id, hello: true });
    } else {
      quietly(post("resume", { token, invocation: id }, false));
    }
    run(id, callback, input, reserved);
  }

  // A redemption asked of the node, in one round trip: it takes it as this document's hello too (when it is its
  // first message), redeems the token and answers the callback's id, the token it may ask for and, once the
  // invocations before this one settled, its input.
  function redeem(token, callback) {
    const message = { op: "resume", doc, token };
    return (hello === null ? first(message) : ask(message)).then(
      ({ invocation: id, token: reserved, ...answer }) => {
        const input = "input" in answer ? Promise.resolve(answer.input) : post("begin", { invocation: id });
        input.then((value) => run(id, callback, value, reserved), () => {});
      },
      () => { throw new DOMException("the continuation token was refused", "NotAllowedError"); },
    );
  }

  // document.modelContext: the draft's ModelContext (an EventTarget: toolchange), with the continuation
  // proposal's resumeTool. Its registerTool rejects where the older form threw.
  const current = new EventTarget();
  const dispatch = EventTarget.prototype.dispatchEvent;
  let ontoolchange = null;
  Object.defineProperties(current, {
    registerTool: { value(tool, options) {
      try {
        return register(tool, options);
      } catch (e) {
        return Promise.reject(e);
      }
    } },
    resumeTool: { value: resumeTool },
    ontoolchange: {
      get: () => ontoolchange,
      set: (handler) => { ontoolchange = typeof handler === "function" ? handler : null; },
    },
  });
  EventTarget.prototype.addEventListener.call(current, "toolchange", (event) => {
    if (ontoolchange !== null) ontoolchange.call(current, event);
  });
  function changed() {  // in a task of its own, as the draft queues it
    setTimeout(() => dispatch.call(current, new Event("toolchange")), 0);
  }

  // navigator.modelContext: the older draft's form, kept as an alias of the same tools.
  const older = Object.freeze({
    registerTool: register,
    unregisterTool(name) { unregister(String(name)); },
    provideContext(context) {
      const given = Array.from((context && context.tools) || []);
      given.forEach(declaration);  // all or none
      clear();
      return Promise.all(given.map((tool) => register(tool)));
    },
    clearContext: clear,
    resumeTool,
  });
  // On the document and the navigator themselves: they shadow a native modelContext, whose calls and tokens the node
  // could not hold to its rules.
  Object.defineProperty(document, "modelContext", { value: Object.freeze(current), configurable: false,
    enumerable: true });
  Object.defineProperty(navigator, "modelContext", { value: older, configurable: false, enumerable: true });


  // <form toolname tooldescription [toolautosubmit]>: a tool declared without script (the declarative draft). Its
  // input schema comes from the form's named fields; a call fills them and, with toolautosubmit, submits the form
  // once (without it, the submit button is focused for a person to check and submit). A form whose tool changes is
  // declared again, one that goes is unregistered; everything it declares passes the limits a script's tool does.
  const FORM_FIELDS = 256;  // fields of one form at most: a form with more declares no tool
  const SKIPPED = new Set(["submit", "button", "reset", "image", "hidden", "file"]);
  const FORMATS = { date: "date", email: "email", url: "uri" };
  const formTools = new Map();  // form -> { key, controller } of its declaration
  const { querySelector, querySelectorAll } = Document.prototype;
  const textOf = Object.getOwnPropertyDescriptor(Node.prototype, "textContent").get;

  function fieldsOf(form) {
    const all = form.elements;
    if (all.length > FORM_FIELDS) return null;
    const fields = [];
    for (let i = 0; i < all.length; i++) {
      const field = all[i];
      const tag = field.localName;
      const kind = tag === "input" ? String(field.type).toLowerCase() : tag;
      if (field.name && !field.disabled && ["input", "select", "textarea"].includes(tag) && !SKIPPED.has(kind)) {
        fields.push([field, kind]);
      }
    }
    return fields;
  }

  function propertyOf(field, kind) {
    let property = { type: "string" };
    if (kind === "checkbox") {
      property = { type: "boolean" };
    } else if (kind === "number" || kind === "range") {
      property = { type: "number" };
      const min = parseFloat(field.min);
      const max = parseFloat(field.max);
      if (Number.isFinite(min)) property.minimum = min;
      if (Number.isFinite(max)) property.maximum = max;
    } else if (kind === "select") {
      const values = Array.from(field.options, (option) => option.value);
      property = field.multiple ? { type: "array", items: { type: "string", enum: values } }
        : { type: "string", enum: values };
    } else {
      if (FORMATS[kind]) property.format = FORMATS[kind];
      if (field.maxLength >= 0) property.maxLength = field.maxLength;
      if (field.minLength > 0) property.minLength = field.minLength;
    }
    const about = field.getAttribute("toolparamdescription");
    if (about) property.description = about.slice(0, LIMITS.description);
    return property;
  }

  function schemaOf(fields) {
    const properties = Object.create(null);
    const radios = new Set();
    const required = [];
    for (const [field, kind] of fields) {
      const { name } = field;
      if (kind === "radio" && (radios.has(name) || !(name in properties))) {
        if (!radios.has(name)) properties[name] = { type: "string", enum: [] };
        radios.add(name);
        properties[name].enum.push(field.value);
      } else if (!(name in properties)) {
        properties[name] = propertyOf(field, kind);
      } else {
        continue;  // a name taken by an earlier field: the first one is the parameter
      }
      if (field.required && !required.includes(name)) required.push(name);
    }
    return { type: "object", properties, ...(required.length ? { required } : {}), additionalProperties: false };
  }

  function fill(fields, input) {
    for (const [field, kind] of fields) {
      if (!Object.hasOwn(input, field.name)) continue;
      const value = input[field.name];
      if (kind === "checkbox") field.checked = value === true;
      else if (kind === "radio") field.checked = field.value === String(value);
      else if (kind === "select" && field.multiple) {
        for (const option of field.options) option.selected = Array.isArray(value) && value.includes(option.value);
      } else field.value = String(value);
      field.dispatchEvent(new Event("input", { bubbles: true }));
      field.dispatchEvent(new Event("change", { bubbles: true }));
    }
  }

  // The submission a form's tool makes: its submit event says agentInvoked, and takes respondWith(promise) (after
  // preventDefault) for the tool's answer. Listened to first, on the window, before any script of the page.
  let submitting = null;
  addEventListener("submit", (event) => {
    if (submitting === null || event.target !== submitting.form) return;
    const seen = submitting;
    seen.event = event;
    Object.defineProperties(event, {
      agentInvoked: { value: true },
      respondWith: { value(promise) {
        if (!event.defaultPrevented) {
          throw new DOMException("respondWith: call preventDefault() first", "InvalidStateError");
        }
        seen.response = Promise.resolve(promise);
      } },
    });
  }, true);

  function called(form, fields, input, autosubmit) {
    fill(fields, input);
    if (!autosubmit) {
      const button = form.querySelector("button:not([type]), button[type=submit], input[type=submit]");
      if (button) button.focus();
      return { submitted: false, filled: Object.keys(input) };  // the schema admits field names only
    }
    const seen = submitting = { form, event: null, response: undefined };
    try {
      form.requestSubmit();
    } finally {
      submitting = null;
    }
    if (seen.event === null) throw new Error("the form was not submitted: its fields fail its own validation");
    if (seen.response !== undefined) return seen.response;
    if (seen.event.defaultPrevented) return { submitted: true };
    return new Promise(() => {});  // it navigates: the node answers with the document the submission loads
  }

  function formTool(form) {
    const fields = fieldsOf(form);
    if (fields === null) return null;
    const autosubmit = form.hasAttribute("toolautosubmit");
    return { name: form.getAttribute("toolname"), description: form.getAttribute("tooldescription") || "",
      inputSchema: schemaOf(fields), [FORM]: { autosubmit },
      execute: (input) => called(form, fields, input, autosubmit) };
  }

  let scanning = false;
  function scan() {
    scanning = false;
    const forms = Array.from(querySelectorAll.call(document, "form[toolname]")).slice(0, LIMITS.tools);
    for (const [form, had] of formTools) {
      if (!forms.includes(form)) {
        had.controller.abort();
        formTools.delete(form);
      }
    }
    for (const form of forms) {
      const tool = formTool(form);
      const key = tool && stringify([tool.name, tool.description, tool.inputSchema, tool[FORM]]);
      const had = formTools.get(form);
      if (had !== undefined && had.key === key) continue;
      if (had !== undefined) had.controller.abort();
      const controller = new AbortController();
      formTools.set(form, { key, controller });
      if (tool === null) continue;
      try {
        quietly(register(tool, { signal: controller.signal }));
      } catch (e) {}  // a name taken or not a tool name: the form declares nothing until it changes
    }
  }
  const rescan = () => {
    if (!scanning) {
      scanning = true;
      setTimeout(scan, 0);
    }
  };
  new MutationObserver(rescan).observe(document, { subtree: true, childList: true, attributes: true,
    attributeFilter: ["toolname", "tooldescription", "toolautosubmit", "toolparamdescription", "name", "type",
      "required", "disabled", "min", "max", "minlength", "maxlength", "multiple", "value"] });

  // What the node calls in this document (Runtime.callFunctionOn in its main world); `doc` makes sure it is still
  // this document. The page may call them too: nothing they do reaches beyond this document.
  const loaded = new Promise((resolve) => { addEventListener("load", resolve, { once: true }); });
  Object.defineProperty(globalThis, Symbol.for("kitsune.siteTools"), {
    value: Object.freeze({
      attach: flush,  // the node's channel reached this document: what it said so far goes now (false: no binding)
      arm,  // a continuation armed for this document (a hand-off the page's own call could seal only to itself)
      answer(reply, outcome) {  // the node's answer to the message sent with `reply`
        const asked = waiting.get(reply);
        if (asked === undefined) return;
        waiting.delete(reply);
        if (outcome !== null && typeof outcome === "object" && outcome.ok === true) asked[0](outcome.value);
        else asked[1](new DOMException("the node refused the message", "NotAllowedError"));
      },
      declared: () => (hello !== null && untracked === null ? [doc, heard] : null),  // null: nothing to hear
      invoke(to, id, name, input, token) {
        const tool = tools.get(name);
        if (to !== doc || tool === undefined) return false;
        run(id, tool.execute, input, token);
        return true;
      },
      async response() {  // a form tool's answer, in the document its submission loaded: its first JSON-LD, if any
        await loaded;
        const script = querySelector.call(document, 'script[type="application/ld+json"]');
        if (script === null) return { ok: true, value: null };
        const text = textOf.call(script);
        if (text.length > OUTPUT_CHARS) return { ok: false };
        try {
          return jsonable(parse(text));
        } catch (e) {
          return { ok: false };
        }
      },
      abort(to, id) {
        const controller = to === doc ? running.get(id) : undefined;
        if (controller) controller.abort(new DOMException("the agent's call ended", "AbortError"));
      },
    }),
  });
})();
