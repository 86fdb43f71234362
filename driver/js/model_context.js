// navigator.modelContext in every document of every frame, before the page's own scripts (WebMCP).
// The page declares tools; the node calls them and follows their continuation tokens. This side
// speaks to the node only through its binding, whose every call the node attributes to the tab,
// frame and document that made it: nothing here can name another tab, frame or origin.
(() => {
  "use strict";
  const BINDING = "__kitsuneSiteTools";
  const send = globalThis[BINDING];
  if (typeof send !== "function") return;
  delete globalThis[BINDING];  // Playwright delivers answers through its own controller, not this global

  const random = new Uint8Array(16);
  crypto.getRandomValues(random);
  const doc = Array.from(random, (b) => b.toString(16).padStart(2, "0")).join("");
  let untracked = null;  // the node's refusal of this document (its tab has as many as it tracks): it declares nothing
  const hello = send({ op: "hello", doc }).then((answer) => {
    if (answer && typeof answer.refused === "string") untracked = answer.refused;
  });
  const post = (op, fields) => hello.then(() => {
    if (untracked !== null) {
      if (op === "register") return { refused: `registerTool ${fields.tool.name}: ${untracked}` };
      throw new DOMException("the node does not track this document", "NotAllowedError");
    }
    return send({ op, doc, ...fields });
  });
  // The page's own scripts run later and may replace these: the ones taken now are the browser's.
  const { stringify, parse } = JSON;
  let heard = 0;  // declaration messages sent: the node has heard them all when its count is the same
  const declare = (op, fields) => post(op, { seq: ++heard, ...fields });
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

  function run(id, execute, input) {
    const controller = new AbortController();
    let settled = false;
    const invocation = Object.freeze({
      requestToken() {
        if (settled) return Promise.reject(new DOMException("the tool call has settled", "InvalidStateError"));
        return post("requestToken", { invocation: id });
      },
    });
    running.set(id, controller);
    const options = Object.freeze({ invocation, signal: controller.signal });
    Promise.resolve().then(() => execute(input, options)).then(
      (value) => ({ ...jsonable(value) }),
      (error) => ({ ok: false, error: described(error) }),
    ).then((answer) => {
      settled = true;
      running.delete(id);
      quietly(post("settled", { invocation: id, ...answer }));
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
    for (const key of ["title", "readOnlyHint", "destructiveHint", "idempotentHint", "openWorldHint"]) {
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
    return { name, description, inputSchema: schema, annotations: kept, execute };
  }

  // Resolves once the node holds the tool; rejects (a TypeError naming the limit) when it refuses it.
  function register(tool) {
    const declared = declaration(tool);
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
    const { name, description, inputSchema, annotations } = declared;
    return declare("register", { tool: { name, description, inputSchema, annotations } }).then((answer) => {
      if (answer && typeof answer.refused === "string") {
        if (tools.get(name) === declared) tools.delete(name);
        throw new TypeError(answer.refused);
      }
    });
  }

  function clear() {
    tools.clear();
    quietly(declare("clear", {}));
  }

  const modelContext = Object.freeze({
    registerTool: register,
    unregisterTool(name) {
      if (tools.delete(String(name))) quietly(declare("unregister", { name: String(name) }));
    },
    provideContext(context) {
      const given = Array.from((context && context.tools) || []);
      given.forEach(declaration);  // all or none
      clear();
      return Promise.all(given.map(register));
    },
    clearContext: clear,
    resumeTool(token, callback) {
      if (typeof token !== "string" || typeof callback !== "function") {
        return Promise.reject(new TypeError("resumeTool(token, callback): a string and a function"));
      }
      if (token.length > 256) {  // no token is that long: not worth the node's time
        return Promise.reject(new DOMException("the continuation token was refused", "NotAllowedError"));
      }
      return post("redeem", { token }).then(
        (id) => {
          post("begin", { invocation: id }).then((input) => run(id, callback, input), () => {});
        },
        () => { throw new DOMException("the continuation token was refused", "NotAllowedError"); },
      );
    },
  });
  // On the navigator itself: it shadows a native modelContext, whose tokens the node could not hold to its rules.
  Object.defineProperty(navigator, "modelContext", { value: modelContext, configurable: false, enumerable: true });

  // What the node calls in this document (frame.evaluate); `doc` makes sure it is still this document.
  Object.defineProperty(globalThis, Symbol.for("kitsune.siteTools"), {
    value: Object.freeze({
      doc,
      declared: () => (untracked === null ? [doc, heard] : null),
      invoke(to, id, name, input) {
        const tool = tools.get(name);
        if (to !== doc || tool === undefined) return false;
        run(id, tool.execute, input);
        return true;
      },
      abort(to, id) {
        const controller = to === doc ? running.get(id) : undefined;
        if (controller) controller.abort(new DOMException("the agent's call ended", "AbortError"));
      },
    }),
  });
})();
