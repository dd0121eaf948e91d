// odradek's web console: a single-page app over the brokers' HTTP API (docs/console.md). No framework and no build
// step; every piece of data is put on the page as text (never as HTML), and every request that changes something
// carries the session's CSRF token in a header.
"use strict";

const state = { cluster: null, csrf: null, principal: null, authentication: null, timers: [], history: [], notice: null };

// ---- DOM ----

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (value === null || value === undefined || value === false) continue;
    if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else if (name === "text") node.textContent = value;
    else node.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined || child === false) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function svg(tag, attrs, ...children) {
  const node = document.createElementNS("http://www.w3.org/2000/svg", tag);
  for (const [name, value] of Object.entries(attrs || {})) node.setAttribute(name, String(value));
  for (const child of children.flat(Infinity)) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function table(headers, rows, attrs) {
  return el(
    "table",
    attrs,
    el("thead", {}, el("tr", {}, headers.map((h) => el("th", { class: /^(#|Offset|Lag|Size|Start|End|Count|Committed)/.test(h) ? "num" : null }, h)))),
    el("tbody", {}, rows),
  );
}

function field(label, input) {
  return el("label", {}, label, input);
}

function view(...children) {
  const main = document.getElementById("view");
  main.replaceChildren(...children.flat().filter((c) => c !== null && c !== undefined && c !== false));
  return main;
}

function value(id) {
  const node = document.getElementById(id);
  return node ? node.value.trim() : "";
}

// ---- messages ----

function banner(kind, text) {
  const node = document.getElementById("banner");
  node.className = kind;
  node.textContent = text;
  node.hidden = false;
  node.dataset.kind = kind;
}

function clearBanner() {
  const node = document.getElementById("banner");
  node.hidden = true;
  node.textContent = "";
}

function failed(e, what) {
  if (e instanceof ApiError && e.status === 403) {
    const who = state.principal || "you";
    const action = what ? `${who} may not ${what}` : `${who} may not do this`;
    banner("refused", `Refused: ${action}. The cluster answered HTTP 403 (${e.code}): ${e.message}`);
  } else if (e instanceof ApiError) {
    banner("error", `Failed (HTTP ${e.status}, ${e.code}): ${e.message}`);
  } else {
    banner("error", `Failed: ${e.message || e}`);
  }
}

// ---- the HTTP API ----

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
}

async function call(method, path, body) {
  const headers = { Accept: "application/json" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  if (method !== "GET" && state.csrf) headers["X-Odradek-CSRF"] = state.csrf;
  const answer = await fetch(path, {
    method,
    headers,
    body: body === undefined ? undefined : JSON.stringify(body),
    credentials: "same-origin",
    cache: "no-store",
  });
  const text = await answer.text();
  let data = null;
  if (text) {
    try {
      data = JSON.parse(text);
    } catch (_) {
      data = { message: text };
    }
  }
  if (!answer.ok) {
    if (answer.status === 401 && path.startsWith("/v3/")) signedOut();
    throw new ApiError(answer.status, data && data.error_code, (data && data.message) || answer.statusText);
  }
  return data;
}

function api(method, path, body) {
  return call(method, `/v3/clusters/${encodeURIComponent(state.cluster)}${path}`, body);
}

const enc = encodeURIComponent;

// ---- bytes ----

function bytesOf(base64) {
  if (base64 === null || base64 === undefined) return null;
  const text = atob(base64);
  const out = new Uint8Array(text.length);
  for (let i = 0; i < text.length; i++) out[i] = text.charCodeAt(i);
  return out;
}

function base64Of(text) {
  const bytes = new TextEncoder().encode(text);
  let binary = "";
  for (const b of bytes) binary += String.fromCharCode(b);
  return btoa(binary);
}

function hex(bytes) {
  const lines = [];
  for (let i = 0; i < bytes.length; i += 16) {
    const row = Array.from(bytes.slice(i, i + 16), (b) => b.toString(16).padStart(2, "0")).join(" ");
    lines.push(`${i.toString(16).padStart(6, "0")}  ${row}`);
  }
  return lines.join("\n");
}

function rendered(base64, mode, decoded) {
  const bytes = bytesOf(base64);
  if (bytes === null) return el("span", { class: "muted" }, "null");
  if (mode === "hex") return el("pre", {}, hex(bytes));
  const text = new TextDecoder("utf-8", { fatal: false }).decode(bytes);
  if (mode === "schema" && decoded) {
    if (decoded.error) return el("span", {}, el("span", { class: "tag bad" }, `schema ${decoded.schema_id}`), " ", decoded.error);
    return el("span", {}, el("span", { class: "tag good" }, `${decoded.type} schema ${decoded.schema_id}`), el("pre", {}, JSON.stringify(decoded.data, null, 2)));
  }
  if (mode === "json" || mode === "schema") {
    try {
      return el("pre", {}, JSON.stringify(JSON.parse(text), null, 2));
    } catch (_) {
      return el("span", {}, el("span", { class: "tag" }, "not JSON"), " ", el("pre", {}, text));
    }
  }
  return el("pre", {}, text);
}

function headerText(headers) {
  return headers.map((h) => `${h.name}=${h.value === null ? "null" : new TextDecoder().decode(bytesOf(h.value))}`).join("\n");
}

function number(n) {
  return n === null || n === undefined ? "–" : Number(n).toLocaleString("en");
}

function size(bytes) {
  if (bytes === null || bytes === undefined) return "–";
  const units = ["B", "KiB", "MiB", "GiB", "TiB"];
  let n = bytes;
  let unit = 0;
  while (n >= 1024 && unit < units.length - 1) {
    n /= 1024;
    unit++;
  }
  return `${unit ? n.toFixed(1) : n} ${units[unit]}`;
}

function list(ids) {
  return ids && ids.length ? ids.join(", ") : "–";
}

// ---- sign-in ----

async function start() {
  document.getElementById("sign-out").addEventListener("click", signOut);
  window.addEventListener("hashchange", () => render());
  const current = await call("GET", "/ui/session");
  if (current.signed_in) return signedIn(current);
  // Without authentication, or with a client certificate the listener verified, an empty sign-in opens the session.
  if (current.authentication === "none" || current.certificate_principal) return signedIn(await call("POST", "/ui/session", {}));
  showLogin();
}

function showLogin(message) {
  stopTimers();
  document.getElementById("nav").hidden = true;
  document.getElementById("sign-out").hidden = true;
  document.getElementById("who").textContent = "";
  const form = el(
    "form",
    { class: "card login", id: "login-form" },
    el("h1", {}, "Sign in"),
    el("p", { class: "muted" }, "A SCRAM user of the cluster."),
    field("User", el("input", { id: "login-user", autocomplete: "username", required: true })),
    field("Password", el("input", { id: "login-password", type: "password", autocomplete: "current-password", required: true })),
    el("button", { id: "login-submit", type: "submit" }, "Sign in"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      signedIn(await call("POST", "/ui/session", { user: value("login-user"), password: document.getElementById("login-password").value }));
    } catch (e) {
      failed(e);
    }
  });
  view(form);
  if (message) banner("error", message);
}

async function signedIn(session) {
  state.csrf = session.csrf_token;
  state.principal = session.principal;
  state.authentication = session.authentication;
  clearBanner();
  const clusters = await call("GET", "/v3/clusters");
  state.cluster = clusters.data[0].cluster_id;
  document.getElementById("nav").hidden = false;
  document.getElementById("sign-out").hidden = session.authentication === "none";
  document.getElementById("who").textContent = `${session.principal} · cluster ${state.cluster}`;
  document.getElementById("who").dataset.principal = session.principal;
  if (!location.hash || location.hash === "#/") location.hash = "#/overview";
  else render();
}

function signedOut() {
  state.csrf = null;
  showLogin("The session ended: sign in again.");
}

async function signOut() {
  try {
    await call("DELETE", "/ui/session");
  } finally {
    state.csrf = null;
    history.replaceState(null, "", "#/");
    showLogin();
  }
}

// ---- routing ----

const pages = {
  overview: overviewPage,
  topics: topicsPage,
  topic: topicPage,
  browse: browsePage,
  produce: producePage,
  groups: groupsPage,
  group: groupPage,
  security: securityPage,
  metrics: metricsPage,
};

function stopTimers() {
  for (const t of state.timers) clearInterval(t);
  state.timers = [];
}

function every(ms, fn) {
  state.timers.push(setInterval(fn, ms));
}

async function render() {
  if (!state.csrf) return;
  stopTimers();
  clearBanner();
  delete document.body.dataset.page;
  const [name, ...rest] = location.hash.replace(/^#\//, "").split("/");
  const page = pages[name] || overviewPage;
  const section = { topic: "topics", group: "groups" }[name] || name;
  for (const a of document.querySelectorAll("nav#nav a")) a.classList.toggle("current", a.dataset.page === section);
  view(el("p", { class: "muted" }, "Loading…"));
  try {
    await page(...rest.map(decodeURIComponent));
  } catch (e) {
    view(el("h1", {}, "Not available"), el("p", { class: "muted" }, "This page could not be loaded."));
    failed(e, "open this page");
  }
  if (state.notice) banner("ok", state.notice);
  state.notice = null;
  document.body.dataset.page = name;
}

function navigate(hash, notice) {
  state.notice = notice;
  location.hash = hash;
}

// ---- overview ----

async function overviewPage() {
  const o = await api("GET", "/overview");
  const quorum = o.quorum.error
    ? el("p", { class: "muted" }, `Quorum not shown: ${o.quorum.error}`)
    : table(
        ["Controller", "Role", "Log end", "Lag", "Last fetch"],
        [...o.quorum.voters.map((v) => ["voter", v]), ...o.quorum.observers.map((v) => ["observer", v])].map(([role, v]) =>
          el(
            "tr",
            {},
            el("td", {}, v.node_id, v.node_id === o.quorum.leader_id ? " (leader)" : ""),
            el("td", {}, role),
            el("td", { class: "num" }, number(v.log_end_offset)),
            el("td", { class: "num" }, number(v.lag)),
            el("td", {}, v.last_fetch_timestamp_ms > 0 ? new Date(v.last_fetch_timestamp_ms).toISOString() : "–"),
          ),
        ),
      );
  const healthy = o.offline_count === 0 && o.under_replicated_count === 0;
  view(
    el("h1", {}, "Cluster overview"),
    el(
      "div",
      { class: "cards" },
      stat("Brokers", o.brokers.filter((b) => !b.fenced).length + " / " + o.brokers.length, o.brokers.some((b) => b.fenced) ? "bad" : "good"),
      stat("Active controller", o.controller_id >= 0 ? o.controller_id : "none", o.controller_id >= 0 ? "good" : "bad"),
      stat("Topics", o.topics_count),
      stat("Partitions", o.partitions_count),
      stat("Offline", o.offline_count, o.offline_count ? "bad" : "good", "stat-offline"),
      stat("Under-replicated", o.under_replicated_count, o.under_replicated_count ? "bad" : "good", "stat-under-replicated"),
      stat("Health", healthy ? "healthy" : "degraded", healthy ? "good" : "bad", "stat-health"),
    ),
    el("h2", {}, "Brokers"),
    table(
      ["Broker", "Host", "Rack", "State"],
      o.brokers.map((b) =>
        el(
          "tr",
          { class: b.fenced ? "problem" : null },
          el("td", {}, b.broker_id),
          el("td", {}, `${b.host}:${b.port}`),
          el("td", {}, b.rack || "–"),
          el("td", {}, b.fenced ? "fenced" : b.in_controlled_shutdown ? "shutting down" : "running"),
        ),
      ),
      { id: "brokers" },
    ),
    el("h2", {}, "Controllers and quorum"),
    el("p", { class: "muted" }, "Voters: ", o.controllers.map((c) => `${c.node_id} (${c.host}:${c.port})`).join(", ")),
    quorum,
    el("h2", {}, "Partitions with problems"),
    o.problems.length
      ? table(
          ["Topic", "Partition", "Leader", "Replicas", "ISR", "ELR", "Problem"],
          o.problems.map((p) =>
            el(
              "tr",
              { class: "problem" },
              el("td", {}, el("a", { href: `#/topic/${enc(p.topic_name)}` }, p.topic_name)),
              el("td", {}, p.partition_id),
              el("td", {}, p.leader === null ? "none" : p.leader),
              el("td", {}, list(p.replicas)),
              el("td", {}, list(p.isr)),
              el("td", {}, list(p.elr.length ? p.elr : p.last_known_elr)),
              el("td", {}, p.offline ? "offline" : "under-replicated"),
            ),
          ),
          { id: "problems" },
        )
      : el("p", { class: "muted", id: "problems" }, "None: every partition has a leader and its full ISR."),
  );
}

function stat(label, n, kind, id) {
  return el("div", { class: `stat ${kind || ""}`, id }, el("div", { class: "muted" }, label), el("div", { class: "n" }, n));
}

// ---- topics ----

async function topicsPage() {
  const topics = await api("GET", "/topics");
  const form = el(
    "form",
    { class: "inline", id: "create-topic" },
    field("Name", el("input", { id: "create-topic-name", required: true })),
    field("Partitions", el("input", { id: "create-topic-partitions", type: "number", min: 1, placeholder: "default" })),
    field("Replication factor", el("input", { id: "create-topic-replication", type: "number", min: 1, placeholder: "default" })),
    field("Configs (name=value, one a line)", el("textarea", { id: "create-topic-configs" })),
    el("button", { type: "submit", id: "create-topic-submit" }, "Create topic"),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { topic_name: value("create-topic-name") };
    if (value("create-topic-partitions")) body.partitions_count = Number(value("create-topic-partitions"));
    if (value("create-topic-replication")) body.replication_factor = Number(value("create-topic-replication"));
    const configs = pairs(value("create-topic-configs"));
    if (configs.length) body.configs = configs.map(([name, v]) => ({ name, value: v }));
    try {
      await api("POST", "/topics", body);
      navigate(`#/topic/${enc(body.topic_name)}`, `Topic ${body.topic_name} created.`);
    } catch (e) {
      failed(e, `create topic ${body.topic_name}`);
    }
  });
  view(
    el("h1", {}, "Topics"),
    el("div", { class: "card" }, el("h2", {}, "Create a topic"), form),
    table(
      ["Name", "Partitions", "Replication", "Internal"],
      topics.data.map((t) =>
        el(
          "tr",
          { "data-topic": t.topic_name },
          el("td", {}, el("a", { href: `#/topic/${enc(t.topic_name)}` }, t.topic_name)),
          el("td", { class: "num" }, t.partitions_count),
          el("td", { class: "num" }, t.replication_factor),
          el("td", {}, t.is_internal ? "yes" : ""),
        ),
      ),
      { id: "topics" },
    ),
  );
}

function pairs(text) {
  return text
    .split("\n")
    .map((line) => line.trim())
    .filter(Boolean)
    .map((line) => {
      const at = line.indexOf("=");
      if (at < 1) throw new Error(`"${line}" is not name=value`);
      return [line.slice(0, at).trim(), line.slice(at + 1)];
    });
}

async function topicPage(name) {
  const [details, configs] = await Promise.all([api("GET", `/topics/${enc(name)}/details`), api("GET", `/topics/${enc(name)}/configs`)]);
  const alter = el(
    "form",
    { class: "inline", id: "alter-config" },
    field("Config", el("input", { id: "alter-config-name", list: "config-names", required: true })),
    field("Value", el("input", { id: "alter-config-value" })),
    el("button", { type: "submit" }, "Set"),
    el("datalist", { id: "config-names" }, configs.data.map((c) => el("option", { value: c.name }))),
  );
  alter.addEventListener("submit", async (event) => {
    event.preventDefault();
    await act(() => api("PUT", `/topics/${enc(name)}/configs/${enc(value("alter-config-name"))}`, { value: value("alter-config-value") }), `Config ${value("alter-config-name")} set.`, `alter the configs of topic ${name}`);
  });
  const grow = el(
    "form",
    { class: "inline", id: "add-partitions" },
    field("New partition count", el("input", { id: "add-partitions-count", type: "number", min: details.partitions.length + 1, required: true })),
    el("button", { type: "submit" }, "Add partitions"),
  );
  grow.addEventListener("submit", async (event) => {
    event.preventDefault();
    await act(() => api("PATCH", `/topics/${enc(name)}`, { partitions_count: Number(value("add-partitions-count")) }), "Partitions added.", `add partitions to topic ${name}`);
  });
  const confirm = el("input", { id: "delete-confirm", placeholder: name, autocomplete: "off" });
  const remove = el("button", { class: "danger", type: "submit", id: "delete-topic", disabled: true }, "Delete topic");
  confirm.addEventListener("input", () => (remove.disabled = confirm.value !== name));
  const deletion = el("form", { class: "inline", id: "delete-form" }, field(`Type "${name}" to confirm`, confirm), remove);
  deletion.addEventListener("submit", async (event) => {
    event.preventDefault();
    if (confirm.value !== name) return;
    try {
      await api("DELETE", `/topics/${enc(name)}`);
      navigate("#/topics", `Topic ${name} deleted.`);
    } catch (e) {
      failed(e, `delete topic ${name}`);
    }
  });
  view(
    el("h1", {}, `Topic ${name}`, details.is_internal ? " (internal)" : ""),
    el("p", {}, el("a", { href: `#/browse/${enc(name)}` }, "Browse its messages"), " · ", el("a", { href: `#/produce/${enc(name)}` }, "Produce to it")),
    el("h2", {}, "Partitions"),
    details.sizes_error ? el("p", { class: "muted" }, `Sizes not shown: ${details.sizes_error}`) : null,
    table(
      ["Partition", "Leader", "Replicas", "ISR", "ELR", "Start", "End", "Size"],
      details.partitions.map((p) =>
        el(
          "tr",
          { class: p.offline || p.under_replicated ? "problem" : null },
          el("td", {}, p.partition_id),
          el("td", {}, p.leader === null ? "none" : p.leader),
          el("td", {}, list(p.replicas)),
          el("td", {}, list(p.isr)),
          el("td", {}, list(p.elr)),
          el("td", { class: "num" }, number(p.log_start_offset)),
          el("td", { class: "num" }, number(p.log_end_offset)),
          el("td", { class: "num" }, size(p.size_bytes)),
        ),
      ),
      { id: "partitions" },
    ),
    el("h2", {}, "Configs"),
    el("div", { class: "card" }, alter),
    table(
      ["Name", "Value", "Source", ""],
      configs.data.map((c) =>
        el(
          "tr",
          { "data-config": c.name },
          el("td", {}, c.name),
          el("td", {}, el("code", {}, c.is_sensitive ? "(sensitive)" : c.value ?? "")),
          el("td", {}, el("span", { class: c.source === "DYNAMIC_TOPIC_CONFIG" ? "tag good" : "tag" }, c.source)),
          el(
            "td",
            {},
            c.source === "DYNAMIC_TOPIC_CONFIG" && !c.is_read_only
              ? el("button", { class: "secondary", type: "button", onclick: () => act(() => api("DELETE", `/topics/${enc(name)}/configs/${enc(c.name)}`), `Config ${c.name} reset.`, `alter the configs of topic ${name}`) }, "Reset")
              : null,
          ),
        ),
      ),
      { id: "configs" },
    ),
    el("h2", {}, "Partitions count"),
    el("div", { class: "card" }, grow),
    el("h2", {}, "Delete"),
    el("div", { class: "card" }, deletion),
  );
}

async function act(work, done, what) {
  try {
    await work();
    await render();
    banner("ok", done);
  } catch (e) {
    failed(e, what);
  }
}

// ---- messages ----

async function topicOptions(id, selected) {
  const topics = await api("GET", "/topics");
  return el(
    "select",
    { id },
    topics.data.filter((t) => !t.is_internal).map((t) => el("option", { value: t.topic_name, selected: t.topic_name === selected }, t.topic_name)),
  );
}

async function browsePage(selected) {
  const topic = await topicOptions("search-topic", selected);
  const start = el("select", { id: "search-start" }, ["earliest", "end", "offset", "timestamp"].map((s) => el("option", { value: s }, s)));
  const form = el(
    "form",
    { id: "search-form" },
    el(
      "div",
      { class: "row" },
      field("Topic", topic),
      field("Partitions (empty: all)", el("input", { id: "search-partitions", placeholder: "0,1" })),
      field("From", start),
      field("Offset", el("input", { id: "search-offset", type: "number", min: 0 })),
      field("Time (ISO 8601)", el("input", { id: "search-timestamp", placeholder: "2026-01-31T12:00:00Z" })),
      field("Last N (from end)", el("input", { id: "search-tail", type: "number", min: 1, value: 100 })),
    ),
    el(
      "div",
      { class: "row" },
      field("Key (exact)", el("input", { id: "search-key" })),
      field("Value contains", el("input", { id: "search-value" })),
      field("JSON path", el("input", { id: "search-json-path", placeholder: "$.order.id" })),
      field("JSON value", el("input", { id: "search-json-value", placeholder: '"A-17" or 17' })),
      field("Header", el("input", { id: "search-header" })),
      field("Header value", el("input", { id: "search-header-value" })),
    ),
    el(
      "div",
      { class: "row" },
      field("Show as", el("select", { id: "search-render" }, ["text", "json", "hex", "schema"].map((m) => el("option", { value: m }, m === "schema" ? "schema registry" : m)))),
      field("Matches per page", el("input", { id: "search-max", type: "number", min: 1, max: 1000, value: 50 })),
      field("Scan at most", el("input", { id: "search-scan", type: "number", min: 1, value: 1000000 })),
      field("Time limit (s)", el("input", { id: "search-time", type: "number", min: 1, max: 600, value: 30 })),
      field("Records per request", el("input", { id: "search-chunk", type: "number", min: 1, max: 10000000, value: 200000 })),
      el("button", { type: "submit", id: "search-submit" }, "Search"),
    ),
  );
  const results = el("div", { id: "search-results" });
  let last = null;
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    last = searchBody();
    await runSearch(last, results, false);
  });
  view(el("h1", {}, "Messages"), el("div", { class: "card" }, form), results);
  if (selected) form.requestSubmit();
}

function searchBody() {
  const filter = {};
  if (value("search-key")) filter.key = value("search-key");
  if (value("search-value")) filter.value_contains = value("search-value");
  if (value("search-json-path")) {
    filter.json_path = value("search-json-path");
    const wanted = value("search-json-value");
    if (wanted) {
      try {
        filter.json_value = JSON.parse(wanted);
      } catch (_) {
        filter.json_value = wanted;
      }
    }
  }
  if (value("search-header")) filter.header = value("search-header");
  if (value("search-header-value")) filter.header_value = value("search-header-value");
  const body = { start: value("search-start"), filter, decode: value("search-render") === "schema" };
  const partitions = value("search-partitions");
  if (partitions) body.partitions = partitions.split(",").map((p) => Number(p.trim()));
  if (body.start === "offset") body.offset = Number(value("search-offset") || 0);
  if (body.start === "timestamp") body.timestamp = value("search-timestamp");
  if (body.start === "end") body.tail = Number(value("search-tail") || 100);
  return {
    topic: value("search-topic"),
    body,
    render: value("search-render"),
    wanted: Math.min(1000, Math.max(1, Number(value("search-max") || 50))),
    budget: Math.max(1, Number(value("search-scan") || 1000000)),
    limitMs: 1000 * Math.max(1, Number(value("search-time") || 30)),
    chunk: Math.max(1, Number(value("search-chunk") || 200000)),
    parts: {}, // partition -> {start, next, end}: where the search began, stands and ends, for its progress
  };
}

// A search is a run of bounded requests (each scans at most "Records per request" and goes on from the previous
// one's cursor) until it has its matches, every partition is searched to its end, it has scanned its limit, or its
// time limit is up; the progress is redrawn after each.
async function runSearch(search, results, more) {
  const started = Date.now();
  const run = { found: [], scanned: 0, throttled: 0, stopped: "end", cursor: search.cursor || null, halted: false };
  const bar = el("progress", { id: "search-progress", max: 100, value: 0 });
  const line = el("span", { id: "search-progress-text" }, "Searching…");
  const stop = el("button", { type: "button", class: "secondary", id: "search-stop", onclick: () => (run.halted = true) }, "Stop");
  results.replaceChildren(el("div", { class: "card", id: "search-running" }, el("p", { class: "status" }, line), bar, " ", stop));
  try {
    for (;;) {
      const left = search.limitMs - (Date.now() - started);
      if (left < 1) {
        run.stopped = "timeout";
        break;
      }
      const body = {
        ...search.body,
        max_matches: search.wanted - run.found.length,
        max_scanned: Math.min(search.chunk, search.budget - run.scanned, 10000000),
        timeout_ms: Math.min(60000, Math.ceil(left)),
      };
      if (run.cursor) body.cursor = run.cursor;
      const page = await api("POST", `/topics/${enc(search.topic)}/records:search`, body);
      for (const p of page.partitions) {
        const known = search.parts[p.partition_id];
        search.parts[p.partition_id] = { start: known ? known.start : p.start_offset, next: p.next_offset, end: p.end_offset };
      }
      run.found = run.found.concat(page.data);
      run.scanned += page.scanned;
      run.throttled += page.throttled_ms || 0;
      run.cursor = page.cursor;
      showProgress(search, run, bar, line, Date.now() - started);
      if (!run.cursor) run.stopped = "end";
      else if (run.found.length >= search.wanted) run.stopped = "max_matches";
      else if (run.scanned >= search.budget) run.stopped = "max_scanned";
      else if (run.halted) run.stopped = "stopped";
      else continue;
      break;
    }
  } catch (e) {
    failed(e, `read topic ${search.topic}`);
    return;
  }
  const page = { data: run.found, scanned: run.scanned, elapsed_ms: Date.now() - started, stopped: run.stopped, cursor: run.cursor };
  showPage(search, page, results, more, el("div", { class: "card", id: "search-done" }, el("p", { class: "status" }, line), bar));
}

function showProgress(search, run, bar, line, elapsedMs) {
  let done = 0;
  let total = 0;
  for (const p of Object.values(search.parts)) {
    done += Math.max(0, p.next - p.start);
    total += Math.max(0, p.end - p.start);
  }
  const percent = total ? Math.min(100, Math.floor((100 * done) / total)) : 100;
  bar.value = percent;
  Object.assign(bar.dataset, { done, total, percent });
  const held = run.throttled ? ` · held ${(run.throttled / 1000).toFixed(1)} s by the fetch quota` : "";
  line.textContent =
    `Scanned offsets ${number(done)} of ${number(total)} (${percent}%) · ${run.found.length} matches · ` +
    `${(elapsedMs / 1000).toFixed(1)} s of ${search.limitMs / 1000} s${held}`;
}

function showPage(search, page, results, more, progress) {
  const rows = page.data.map((r) =>
    el(
      "tr",
      { "data-partition": r.partition_id, "data-offset": r.offset, class: "record" },
      el("td", {}, el("input", { type: "checkbox", class: "pick", "data-partition": r.partition_id, "data-offset": r.offset })),
      el("td", { class: "num" }, r.partition_id),
      el("td", { class: "num" }, r.offset),
      el("td", {}, r.timestamp),
      el("td", { class: "key" }, rendered(r.key, search.render, r.key_decoded)),
      el("td", { class: "value" }, rendered(r.value, search.render, r.value_decoded)),
      el("td", { class: "headers" }, el("pre", {}, headerText(r.headers))),
    ),
  );
  const status = el(
    "p",
    { class: "status", id: "search-status", "data-matches": page.data.length, "data-scanned": page.scanned },
    `${page.data.length} matches · ${number(page.scanned)} records scanned in ${page.elapsed_ms} ms · stopped: ${page.stopped}`,
  );
  const next = page.cursor
    ? el("button", { type: "button", class: "secondary", id: "search-next", onclick: () => runSearch({ ...search, cursor: page.cursor }, results, true) }, "Next page")
    : el("span", { class: "muted" }, "Every partition searched to its end.");
  const republish = el(
    "form",
    { class: "inline", id: "republish-selected" },
    field("Republish the selected records to topic", el("input", { id: "republish-destination", required: true })),
    el("label", { class: "check" }, el("input", { type: "checkbox", id: "republish-same-partition" }), " same partition"),
    el("button", { type: "submit", id: "republish-submit" }, "Republish"),
  );
  republish.addEventListener("submit", async (event) => {
    event.preventDefault();
    const records = Array.from(results.querySelectorAll("input.pick:checked"), (box) => ({
      partition_id: Number(box.dataset.partition),
      offset: Number(box.dataset.offset),
    }));
    if (!records.length) return banner("error", "Select the records to republish first.");
    try {
      const done = await api("POST", `/topics/${enc(search.topic)}/records:republish`, {
        destination: value("republish-destination"),
        records,
        same_partition: document.getElementById("republish-same-partition").checked,
      });
      banner("ok", `Republished ${done.republished} records to ${done.destination}` + (done.missing.length ? ` (${done.missing.length} no longer exist)` : "."));
    } catch (e) {
      failed(e, `republish to ${value("republish-destination")}`);
    }
  });
  const body = table(["", "Partition", "Offset", "Timestamp", "Key", "Value", "Headers"], rows, { id: "search-table" });
  results.replaceChildren(progress, status, body, el("div", { class: "row" }, next), el("div", { class: "card" }, republish));
  if (more) banner("ok", "Next page loaded.");
}

// ---- produce and republish a range ----

async function producePage(selected) {
  const topic = await topicOptions("produce-topic", selected);
  const form = el(
    "form",
    { id: "produce-form", class: "card" },
    el("h2", {}, "Produce a record"),
    el(
      "div",
      { class: "row" },
      field("Topic", topic),
      field("Partition (empty: by key)", el("input", { id: "produce-partition", type: "number", min: 0 })),
      field("Key", el("input", { id: "produce-key" })),
      field("Value as", el("select", { id: "produce-type" }, el("option", { value: "STRING" }, "text"), el("option", { value: "JSON" }, "JSON"))),
    ),
    el(
      "div",
      { class: "row" },
      field("Value", el("textarea", { id: "produce-value" })),
      field("Headers (name=value, one a line)", el("textarea", { id: "produce-headers" })),
      el("button", { type: "submit", id: "produce-submit" }, "Produce"),
    ),
  );
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const type = value("produce-type");
      const text = document.getElementById("produce-value").value;
      const body = {
        value: { type, data: type === "JSON" ? JSON.parse(text) : text },
        headers: pairs(value("produce-headers")).map(([name, v]) => ({ name, value: base64Of(v) })),
      };
      if (value("produce-key")) body.key = { type: "STRING", data: value("produce-key") };
      if (value("produce-partition")) body.partition_id = Number(value("produce-partition"));
      const done = await api("POST", `/topics/${enc(value("produce-topic"))}/records`, body);
      banner("ok", `Produced to ${done.topic_name} partition ${done.partition_id} at offset ${done.offset}.`);
      document.getElementById("view").dataset.produced = `${done.partition_id}:${done.offset}`;
    } catch (e) {
      failed(e, `produce to ${value("produce-topic")}`);
    }
  });
  const source = await topicOptions("range-topic", selected);
  const range = el(
    "form",
    { id: "republish-range", class: "card" },
    el("h2", {}, "Republish an offset range"),
    el(
      "div",
      { class: "row" },
      field("From topic", source),
      field("Partition", el("input", { id: "range-partition", type: "number", min: 0, value: 0, required: true })),
      field("Start offset", el("input", { id: "range-start", type: "number", min: 0, required: true })),
      field("End offset (excluded)", el("input", { id: "range-end", type: "number", min: 1, required: true })),
      field("To topic", el("input", { id: "range-destination", required: true })),
      el("label", { class: "check" }, el("input", { type: "checkbox", id: "range-same-partition" }), " same partition"),
      el("button", { type: "submit", id: "range-submit" }, "Republish"),
    ),
  );
  range.addEventListener("submit", async (event) => {
    event.preventDefault();
    try {
      const done = await api("POST", `/topics/${enc(value("range-topic"))}/records:republish`, {
        destination: value("range-destination"),
        partition_id: Number(value("range-partition")),
        start_offset: Number(value("range-start")),
        end_offset: Number(value("range-end")),
        same_partition: document.getElementById("range-same-partition").checked,
      });
      banner("ok", `Republished ${done.republished} records to ${done.destination}.`);
    } catch (e) {
      failed(e, `republish to ${value("range-destination")}`);
    }
  });
  view(el("h1", {}, "Produce"), form, range);
}

// ---- consumer groups ----

async function groupsPage() {
  const groups = await api("GET", "/consumer-groups");
  view(
    el("h1", {}, "Consumer groups"),
    groups.data.length
      ? table(
          ["Group", "State", "Type", "Coordinator"],
          groups.data.map((g) =>
            el(
              "tr",
              { "data-group": g.consumer_group_id },
              el("td", {}, el("a", { href: `#/group/${enc(g.consumer_group_id)}` }, g.consumer_group_id)),
              el("td", {}, g.state),
              el("td", {}, g.type),
              el("td", {}, g.coordinator.related.split("/").pop()),
            ),
          ),
          { id: "groups" },
        )
      : el("p", { class: "muted" }, "No consumer groups (or none you may describe)."),
  );
}

async function groupPage(id) {
  const path = `/consumer-groups/${enc(id)}`;
  const about = el("p", {});
  const membersBox = el("div", {});
  const lagBody = el("tbody", {});
  const total = el("span", { id: "group-total-lag" }, "…");
  const updated = el("span", { class: "muted", id: "lag-updated" });
  async function refresh() {
    try {
      const [group, members, lags] = await Promise.all([api("GET", path), api("GET", `${path}/consumers`), api("GET", `${path}/lags`)]);
      const assignments = await Promise.all(members.data.map((m) => api("GET", `${path}/consumers/${enc(m.consumer_id)}/assignments`)));
      about.replaceChildren(el("span", { class: "tag", id: "group-state" }, group.state), " ", group.type, group.partition_assignor ? ` · assignor ${group.partition_assignor}` : "");
      membersBox.replaceChildren(
        members.data.length
          ? table(
              ["Member", "Client", "Assigned partitions"],
              members.data.map((m, i) =>
                el("tr", {}, el("td", {}, m.consumer_id), el("td", {}, m.client_id), el("td", {}, assignments[i].data.map((a) => `${a.topic_name}-${a.partition_id}`).join(", ") || "–")),
              ),
              { id: "members" },
            )
          : el("p", { class: "muted", id: "members" }, "No members: the group is stopped."),
      );
      lagBody.replaceChildren(
        ...lags.data.map((x) =>
          el(
            "tr",
            { "data-topic": x.topic_name, "data-partition": x.partition_id },
            el("td", {}, x.topic_name),
            el("td", { class: "num" }, x.partition_id),
            el("td", { class: "num" }, number(x.current_offset)),
            el("td", { class: "num" }, number(x.log_end_offset)),
            el("td", { class: "num lag" }, number(x.lag)),
            el("td", {}, x.consumer_id || "–"),
          ),
        ),
      );
      const sum = lags.data.reduce((s, x) => s + x.lag, 0);
      total.textContent = String(sum);
      total.dataset.lag = String(sum);
      updated.textContent = ` · updated ${new Date().toLocaleTimeString("en-GB")}`;
    } catch (e) {
      failed(e, `describe group ${id}`);
    }
  }
  const to = el("select", { id: "reset-to" }, ["earliest", "latest", "offset", "timestamp"].map((t) => el("option", { value: t }, t)));
  const reset = el(
    "form",
    { class: "inline", id: "reset-form" },
    field("Reset to", to),
    field("Offset", el("input", { id: "reset-offset", type: "number", min: 0 })),
    field("Time (ISO 8601)", el("input", { id: "reset-timestamp" })),
    field("Topics (comma; empty: all committed)", el("input", { id: "reset-topics" })),
    el("label", { class: "check" }, el("input", { type: "checkbox", id: "reset-dry-run" }), " dry run"),
    el("button", { type: "submit", id: "reset-submit" }, "Reset offsets"),
  );
  const resetResult = el("div", { id: "reset-result" });
  reset.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { to: value("reset-to"), dry_run: document.getElementById("reset-dry-run").checked };
    if (body.to === "offset") body.offset = Number(value("reset-offset") || 0);
    if (body.to === "timestamp") body.timestamp = value("reset-timestamp");
    if (value("reset-topics")) body.topics = value("reset-topics").split(",").map((t) => t.trim());
    try {
      const done = await api("POST", `${path}/offsets:reset`, body);
      resetResult.replaceChildren(
        table(
          ["Topic", "Partition", "Committed", "New offset"],
          done.data.map((x) => el("tr", {}, el("td", {}, x.topic_name), el("td", { class: "num" }, x.partition_id), el("td", { class: "num" }, number(x.previous_offset)), el("td", { class: "num" }, x.offset))),
        ),
      );
      banner("ok", done.dry_run ? "Dry run: nothing committed." : `Offsets of ${id} reset to ${body.to}.`);
      await refresh();
    } catch (e) {
      failed(e, `reset the offsets of group ${id}`);
    }
  });
  view(
    el("h1", {}, `Consumer group ${id}`),
    about,
    el("h2", {}, "Members"),
    membersBox,
    el("h2", {}, "Lag ", el("span", { class: "muted" }, "(total "), total, el("span", { class: "muted" }, ")"), updated),
    el(
      "table",
      { id: "lags" },
      el("thead", {}, el("tr", {}, ["Topic", "Partition", "Committed", "End", "Lag", "Member"].map((h) => el("th", {}, h)))),
      lagBody,
    ),
    el("h2", {}, "Reset offsets"),
    el("p", { class: "muted" }, "Only a group without members: stop its consumers first."),
    el("div", { class: "card" }, reset, resetResult),
  );
  await refresh();
  every(2000, refresh);
}

// ---- ACLs, SCRAM users, quotas ----

async function securityPage() {
  const sections = await Promise.allSettled([api("GET", "/acls"), api("GET", "/user-scram-credentials"), api("GET", "/client-quotas")]);
  const [acls, users, quotas] = sections.map((s) => (s.status === "fulfilled" ? s.value : s.reason));
  const refusedNote = (e) => el("p", { class: "muted" }, `Not shown: ${e.message} (HTTP ${e.status})`);
  const aclFields = [
    ["resource_type", ["TOPIC", "GROUP", "CLUSTER", "TRANSACTIONAL_ID"]],
    ["resource_name", null],
    ["pattern_type", ["LITERAL", "PREFIXED"]],
    ["principal", null],
    ["host", null],
    ["operation", ["ALL", "READ", "WRITE", "CREATE", "DELETE", "ALTER", "DESCRIBE", "CLUSTER_ACTION", "DESCRIBE_CONFIGS", "ALTER_CONFIGS", "IDEMPOTENT_WRITE"]],
    ["permission", ["ALLOW", "DENY"]],
  ];
  const aclForm = el(
    "form",
    { class: "inline", id: "acl-form" },
    aclFields.map(([name, options]) =>
      field(
        name.replace("_", " "),
        options
          ? el("select", { id: `acl-${name}` }, options.map((o) => el("option", { value: o }, o)))
          : el("input", { id: `acl-${name}`, value: name === "host" ? "*" : name === "principal" ? "User:" : name === "resource_name" ? "" : "", required: true }),
      ),
    ),
    el("button", { type: "submit", id: "acl-submit" }, "Create ACL"),
  );
  aclForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = Object.fromEntries(aclFields.map(([name]) => [name, value(`acl-${name}`)]));
    await act(() => api("POST", "/acls", body), "ACL created.", "create ACLs");
  });
  const userForm = el(
    "form",
    { class: "inline", id: "user-form" },
    field("User", el("input", { id: "user-name", required: true })),
    field("Password", el("input", { id: "user-password", type: "password", required: true, autocomplete: "new-password" })),
    field("Mechanism", el("select", { id: "user-mechanism" }, el("option", {}, "SCRAM-SHA-256"), el("option", {}, "SCRAM-SHA-512"))),
    el("button", { type: "submit" }, "Create or replace"),
  );
  userForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    await act(
      () => api("POST", "/user-scram-credentials", { user: value("user-name"), password: document.getElementById("user-password").value, mechanism: value("user-mechanism") }),
      `Credential of ${value("user-name")} saved.`,
      "alter SCRAM credentials",
    );
  });
  const quotaForm = el(
    "form",
    { class: "inline", id: "quota-form" },
    field("Entity", el("select", { id: "quota-type" }, el("option", { value: "user" }, "user"), el("option", { value: "client-id" }, "client id"))),
    field("Name (empty: the default)", el("input", { id: "quota-name" })),
    field("Quota", el("select", { id: "quota-key" }, ["producer_byte_rate", "consumer_byte_rate", "request_percentage", "controller_mutation_rate"].map((k) => el("option", {}, k)))),
    field("Value (empty: remove)", el("input", { id: "quota-value", type: "number", min: 0, step: "any" })),
    el("button", { type: "submit" }, "Apply"),
  );
  quotaForm.addEventListener("submit", async (event) => {
    event.preventDefault();
    const body = { entity: [{ entity_type: value("quota-type"), name: value("quota-name") || null }] };
    if (value("quota-value")) body.set = { [value("quota-key")]: Number(value("quota-value")) };
    else body.remove = [value("quota-key")];
    await act(() => api("POST", "/client-quotas:alter", body), "Quota applied.", "alter client quotas");
  });
  const aclQuery = (a) =>
    `/acls?${new URLSearchParams({ resource_type: a.resource_type, resource_name: a.resource_name, pattern_type: a.pattern_type, principal: a.principal, host: a.host, operation: a.operation, permission: a.permission })}`;
  view(
    el("h1", {}, "Security"),
    el("h2", {}, "ACLs"),
    el("div", { class: "card" }, aclForm),
    acls instanceof Error
      ? refusedNote(acls)
      : table(
          ["Principal", "Permission", "Operation", "Resource", "Pattern", "Host", ""],
          acls.data.map((a) =>
            el(
              "tr",
              {},
              el("td", {}, a.principal),
              el("td", {}, a.permission),
              el("td", {}, a.operation),
              el("td", {}, `${a.resource_type}:${a.resource_name}`),
              el("td", {}, a.pattern_type),
              el("td", {}, a.host),
              el("td", {}, el("button", { class: "secondary", type: "button", onclick: () => act(() => api("DELETE", aclQuery(a)), "ACL deleted.", "delete ACLs") }, "Delete")),
            ),
          ),
          { id: "acls" },
        ),
    el("h2", {}, "SCRAM users"),
    el("div", { class: "card" }, userForm),
    users instanceof Error
      ? refusedNote(users)
      : table(
          ["User", "Mechanisms", ""],
          users.data.map((u) =>
            el(
              "tr",
              {},
              el("td", {}, u.user),
              el("td", {}, u.credentials.map((c) => `${c.mechanism} (${c.iterations} iterations)`).join(", ")),
              el(
                "td",
                {},
                u.credentials.map((c) =>
                  el("button", { class: "secondary", type: "button", onclick: () => act(() => api("DELETE", `/user-scram-credentials/${enc(u.user)}?mechanism=${enc(c.mechanism)}`), `Credential deleted.`, "delete SCRAM credentials") }, `Delete ${c.mechanism}`),
                ),
              ),
            ),
          ),
          { id: "users" },
        ),
    el("h2", {}, "Client quotas"),
    el("div", { class: "card" }, quotaForm),
    quotas instanceof Error
      ? refusedNote(quotas)
      : table(
          ["Entity", "Quotas"],
          quotas.data.map((q) =>
            el(
              "tr",
              {},
              el("td", {}, q.entity.map((c) => `${c.entity_type}=${c.name === null ? "<default>" : c.name}`).join(", ")),
              el("td", {}, Object.entries(q.values).map(([k, v]) => `${k}=${v}`).join(", ")),
            ),
          ),
          { id: "quotas" },
        ),
  );
}

// ---- metrics ----

const COLOURS = ["#2f6fad", "#c0392b", "#2e7d4f", "#9a6400", "#7b3fa0", "#00838f", "#ad1457", "#546e7a"];

function sum(byTopic) {
  return Object.entries(byTopic).reduce((s, [topic, n]) => (topic.startsWith("__") ? s : s + n), 0);
}

async function metricsPage() {
  const holder = el("div", { id: "charts" });
  view(el("h1", {}, "Metrics"), el("p", { class: "muted" }, "From each broker's own metrics, every 2 s: rates between two polls, lag as the coordinators last measured it."), holder);
  async function poll() {
    try {
      const now = await api("GET", "/brokers/-/metrics");
      const totals = { time: Date.now(), bytes_in: 0, bytes_out: 0, messages_in: 0, lag: {} };
      for (const b of now.data) {
        totals.bytes_in += sum(b.bytes_in);
        totals.bytes_out += sum(b.bytes_out);
        totals.messages_in += sum(b.messages_in);
        for (const [group, lag] of Object.entries(b.group_lag)) totals.lag[group] = (totals.lag[group] || 0) + lag;
      }
      state.history.push(totals);
      if (state.history.length > 90) state.history.shift();
      draw(holder);
    } catch (e) {
      failed(e, "read the metrics");
    }
  }
  state.history = [];
  await poll();
  every(2000, poll);
}

function rates(key) {
  const h = state.history;
  const out = [];
  for (let i = 1; i < h.length; i++) {
    const seconds = (h[i].time - h[i - 1].time) / 1000;
    if (seconds > 0) out.push([h[i].time, Math.max(0, (h[i][key] - h[i - 1][key]) / seconds)]);
  }
  return out;
}

function draw(holder) {
  const groups = new Set(state.history.flatMap((h) => Object.keys(h.lag)));
  holder.replaceChildren(
    chart("Throughput (bytes/s)", [
      { name: "in", points: rates("bytes_in") },
      { name: "out", points: rates("bytes_out") },
    ], "chart-throughput"),
    chart("Records in (records/s)", [{ name: "records", points: rates("messages_in") }], "chart-records"),
    chart(
      "Consumer lag (records)",
      Array.from(groups, (g) => ({ name: g, points: state.history.filter((h) => g in h.lag).map((h) => [h.time, h.lag[g]]) })),
      "chart-lag",
    ),
  );
}

function chart(title, series, id) {
  const width = 1200;
  const height = 190;
  const pad = { left: 64, right: 16, top: 12, bottom: 24 };
  const points = series.flatMap((s) => s.points);
  const box = el("div", { class: "chart", id }, el("strong", {}, title));
  if (!points.length) {
    box.append(el("p", { class: "muted" }, "Waiting for a second sample…"));
    return box;
  }
  const t0 = Math.min(...points.map((p) => p[0]));
  const t1 = Math.max(t0 + 1, ...points.map((p) => p[0]));
  const top = Math.max(1, ...points.map((p) => p[1]));
  const x = (t) => pad.left + ((t - t0) / (t1 - t0)) * (width - pad.left - pad.right);
  const y = (v) => height - pad.bottom - (v / top) * (height - pad.top - pad.bottom);
  const picture = svg(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": title },
    svg("line", { class: "axis", x1: pad.left, y1: height - pad.bottom, x2: width - pad.right, y2: height - pad.bottom }),
    svg("line", { class: "axis", x1: pad.left, y1: pad.top, x2: pad.left, y2: height - pad.bottom }),
    svg("text", { x: pad.left - 6, y: pad.top + 8, "text-anchor": "end" }, compact(top)),
    svg("text", { x: pad.left - 6, y: height - pad.bottom, "text-anchor": "end" }, "0"),
    svg("text", { x: width - pad.right, y: height - 6, "text-anchor": "end" }, new Date(t1).toLocaleTimeString("en-GB")),
    svg("text", { x: pad.left, y: height - 6 }, new Date(t0).toLocaleTimeString("en-GB")),
    series.map((s, i) => [
      svg("polyline", {
        fill: "none",
        stroke: COLOURS[i % COLOURS.length],
        "stroke-width": 2,
        points: s.points.map((p) => `${x(p[0]).toFixed(1)},${y(p[1]).toFixed(1)}`).join(" "),
      }),
      s.points.map((p) => svg("circle", { cx: x(p[0]).toFixed(1), cy: y(p[1]).toFixed(1), r: 2.5, fill: COLOURS[i % COLOURS.length] })),
    ]),
  );
  const legend = el(
    "div",
    { class: "legend" },
    series.map((s, i) => {
      const last = s.points.length ? s.points[s.points.length - 1][1] : 0;
      const item = el("span", { "data-series": s.name, "data-last": last, "data-points": s.points.length }, `${s.name}: ${compact(last)}`);
      item.style.setProperty("--swatch", COLOURS[i % COLOURS.length]);
      return item;
    }),
  );
  box.append(picture, legend);
  return box;
}

function compact(n) {
  if (n >= 1e9) return (n / 1e9).toFixed(1) + "G";
  if (n >= 1e6) return (n / 1e6).toFixed(1) + "M";
  if (n >= 1e3) return (n / 1e3).toFixed(1) + "k";
  return n >= 10 || n === 0 ? Math.round(n).toString() : n.toFixed(1);
}

document.addEventListener("DOMContentLoaded", () => start().catch(failed));
