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
  const hello = send({ op: "hello", doc });
  const post = (op, fields) => hello.then(() => send({ op, doc, ...fields }));
  const quietly = (promise) => { promise.catch(() => {}); };

  const tools = new Map();  // name -> the page's declaration
  const running = new Map();  // invocation id -> its AbortController

  const jsonable = (value) => {
    try {
      const text = JSON.stringify(value === undefined ? null : value);
      return { ok: true, value: text === undefined ? null : JSON.parse(text) };
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
    const { name, description = "", inputSchema = { type: "object" }, execute } = tool;
    if (typeof name !== "string" || !/^[A-Za-z0-9_.-]{1,128}$/.test(name)) {
      throw new TypeError("registerTool: name must match [A-Za-z0-9_.-]{1,128}");
    }
    if (typeof description !== "string") throw new TypeError("registerTool: description must be a string");
    if (typeof execute !== "function") throw new TypeError("registerTool: execute must be a function");
    const schema = jsonable(inputSchema);
    if (!schema.ok || schema.value === null || typeof schema.value !== "object") {
      throw new TypeError("registerTool: inputSchema must be a JSON object");
    }
    return { name, description: description.slice(0, 4096), inputSchema: schema.value, execute };
  }

  function register(tool) {
    const declared = declaration(tool);
    if (tools.has(declared.name)) {
      throw new DOMException(`a tool named ${declared.name} is registered already`, "InvalidStateError");
    }
    tools.set(declared.name, declared);
    const { name, description, inputSchema } = declared;
    quietly(post("register", { tool: { name, description, inputSchema } }));
  }

  function clear() {
    tools.clear();
    quietly(post("clear", {}));
  }

  const modelContext = Object.freeze({
    registerTool: register,
    unregisterTool(name) {
      if (tools.delete(String(name))) quietly(post("unregister", { name: String(name) }));
    },
    provideContext(context) {
      const declared = Array.from((context && context.tools) || [], declaration);
      clear();
      declared.forEach(register);
    },
    clearContext: clear,
    resumeTool(token, callback) {
      if (typeof token !== "string" || typeof callback !== "function") {
        return Promise.reject(new TypeError("resumeTool(token, callback): a string and a function"));
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
      declared: () => [doc, tools.size],
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
