// The Tessera console. It holds no data of its own: every read and action
// is a call of the JSON API with the key the operator pasted, kept in this
// tab's sessionStorage and sent as a bearer header (never a cookie), so
// the server checks each one as it checks any client's. The page follows
// the namespace's live event stream (GET /v1/events) with fetch(), which
// can send the header where EventSource cannot.
//
// Everything shown is built as DOM nodes with text content: no markup is
// ever made from data. Bidirectional control characters in free text are
// shown as marked escapes instead of being obeyed.
"use strict";
(() => {
  const KEY = "tessera.key";
  const STATES = ["waiting", "gated", "ready", "scheduled", "leased", "paused", "succeeded", "dead", "canceled"];
  const app = document.getElementById("app");

  // ---- DOM ----------------------------------------------------------

  // el builds an element: attrs sets attributes (on* keys are listeners),
  // children are nodes or strings (text, never markup).
  function el(tag, attrs, ...children) {
    const node = document.createElement(tag);
    for (const [name, value] of Object.entries(attrs || {})) {
      if (value === undefined || value === null || value === false) continue;
      if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
      else if (name === "class") node.className = value;
      else node.setAttribute(name, value === true ? "" : String(value));
    }
    append(node, children);
    return node;
  }

  function append(node, children) {
    for (const child of children.flat(Infinity)) {
      if (child === undefined || child === null || child === false) continue;
      node.append(child instanceof Node ? child : document.createTextNode(String(child)));
    }
    return node;
  }

  // A bidi control: an embedding, override or isolate (U+202A–U+202E,
  // U+2066–U+2069).
  const BIDI = /[\u202A-\u202E\u2066-\u2069]/g;

  // text is s as nodes: its bidi controls as marked escapes.
  function text(s) {
    s = String(s ?? "");
    const frag = document.createDocumentFragment();
    let last = 0;
    for (const m of s.matchAll(BIDI)) {
      frag.append(document.createTextNode(s.slice(last, m.index)));
      const code = m[0].codePointAt(0).toString(16).toUpperCase().padStart(4, "0");
      frag.append(el("span", {class: "bidi", title: "a bidirectional control character, shown instead of obeyed"}, "\\u" + code));
      last = m.index + m[0].length;
    }
    frag.append(document.createTextNode(s.slice(last)));
    return frag;
  }

  // plain is s as one string with its bidi controls written as escapes,
  // for where only text may go (an <option>).
  function plain(s) {
    return String(s ?? "").replace(BIDI, (c) => "\\u" + c.codePointAt(0).toString(16).toUpperCase().padStart(4, "0"));
  }

  // isolated is free text (a title) set apart from what surrounds it.
  function isolated(s, cls) {
    return el("bdi", {class: cls}, text(s));
  }

  function stateBadge(state) {
    return el("span", {class: "state s-" + state, "data-state": state}, state);
  }

  // ago says how long before now (the browser's clock unless given)
  // iso was.
  function ago(iso, now) {
    if (!iso) return "—";
    const ms = (now ?? Date.now()) - Date.parse(iso);
    const future = ms < 0;
    const s = Math.abs(ms) / 1000;
    const said = s < 1 ? "now" : s < 60 ? Math.round(s) + " s" : s < 3600 ? Math.round(s / 60) + " min" :
      s < 172800 ? Math.round(s / 3600) + " h" : Math.round(s / 86400) + " days";
    if (said === "now") return "just now";
    return future ? "in " + said : said + " ago";
  }

  // stamp is the one way a time is written out: UTC, to the second.
  function stamp(iso) {
    return new Date(iso).toISOString().slice(0, 19).replace("T", " ") + " UTC";
  }

  // when shows a time as how long ago it was, its stamp on hover; at, in
  // feeds and trails, shows the stamp, how long ago on hover.
  function when(iso, now) {
    return iso ? el("time", {datetime: iso, title: stamp(iso)}, ago(iso, now)) : "—";
  }

  function at(iso) {
    return el("time", {datetime: iso, title: ago(iso)}, stamp(iso));
  }

  // names holds the display names the key may read: its own principal's,
  // and every principal's for an admin key (its principals list).
  const names = new Map();
  let namesRead = 0;

  async function readNames() {
    names.set(me.principal.id, me.principal.display_name || me.principal.id);
    if (!isAdmin() || Date.now() - namesRead < 60000) return;
    namesRead = Date.now();
    try {
      const page = await api("GET", "/v1/admin/principals?limit=200");
      page.principals.forEach((p) => names.set(p.id, p.display_name || p.id));
    } catch (e) {
      // Names are a convenience: ids show meanwhile.
    }
  }

  // who shows a principal by its display name, the id on hover; a
  // principal whose name the key may not read shows as its id.
  function who(id) {
    if (!id) return "—";
    return names.has(id) ? el("span", {class: "who", title: id}, isolated(names.get(id))) : el("code", {title: id}, id);
  }

  function short(id) {
    return el("code", {title: id}, id && id.length > 10 ? "…" + id.slice(-8) : id);
  }

  function seconds(v) {
    if (v === null || v === undefined) return "—";
    return v < 60 ? Math.round(v) + " s" : v < 3600 ? Math.round(v / 60) + " min" : (v / 3600).toFixed(1) + " h";
  }

  // ---- the API ------------------------------------------------------

  let key = sessionStorage.getItem(KEY);
  let me = null;

  class APIError extends Error {
    constructor(status, code, message) {
      super(message);
      this.status = status;
      this.code = code;
    }
  }

  function nsPath(ns, path) {
    return (ns && ns !== "main" ? "/ns/" + encodeURIComponent(ns) : "") + path;
  }

  function query(params) {
    const q = new URLSearchParams();
    for (const [k, v] of Object.entries(params || {})) if (v !== undefined && v !== null && v !== "") q.set(k, v);
    const s = q.toString();
    return s ? "?" + s : "";
  }

  async function api(method, path, body) {
    const headers = {Authorization: "Bearer " + key, Accept: "application/json"};
    const init = {method, headers, credentials: "omit", cache: "no-store"};
    if (body !== undefined) {
      headers["Content-Type"] = "application/json";
      init.body = JSON.stringify(body);
    }
    const res = await fetch(path, init);
    if (res.status === 204) return null;
    const data = await res.json().catch(() => null);
    if (!res.ok) {
      const e = data && data.error;
      throw new APIError(res.status, e ? e.code : "internal", e ? e.message : res.status + " " + res.statusText);
    }
    return data;
  }

  // can says whether the key may do action (read, enqueue, …) in ns; the
  // server checks again whatever this says.
  function can(action, ns) {
    if (!me) return false;
    const scopes = me.scopes || [];
    if (scopes.includes("admin")) return true;
    const grant = scopes.includes("namespace:*") || scopes.includes("namespace:" + ns);
    return grant && scopes.includes(action);
  }
  const isAdmin = () => !!me && (me.scopes || []).includes("admin");

  // ---- messages -----------------------------------------------------

  let flash = null; // {kind, text} shown at the top of the next view

  function alertBox(err) {
    const msg = err instanceof APIError ? err.message + " (" + err.status + " " + err.code + ")" : String(err && err.message || err);
    return el("div", {class: "alert", role: "alert"}, msg);
  }

  function say(kind, message) {
    const box = el("div", {class: kind === "error" ? "alert" : "notice", role: kind === "error" ? "alert" : "status"}, message);
    const content = document.querySelector(".content");
    if (content) content.prepend(box);
    return box;
  }

  // ---- the event stream ---------------------------------------------

  // stream follows one namespace's events; view.onEvent hears them.
  const stream = {ns: null, ctrl: null, last: null, live: false, wait: 1000};

  function follow(ns) {
    if (stream.ns === ns && stream.ctrl) return;
    if (stream.ctrl) stream.ctrl.abort();
    stream.ns = ns;
    stream.last = null;
    stream.ctrl = new AbortController();
    run(ns, stream.ctrl.signal);
  }

  function setLive(on) {
    stream.live = on;
    const dot = document.querySelector(".live");
    if (dot) {
      dot.classList.toggle("on", on);
      dot.title = on ? "following the namespace's events" : "not connected to the event stream";
      dot.lastChild.textContent = on ? "live" : "offline";
    }
  }

  async function run(ns, signal) {
    while (!signal.aborted) {
      try {
        const headers = {Authorization: "Bearer " + key, Accept: "text/event-stream"};
        if (stream.last) headers["Last-Event-ID"] = stream.last;
        const res = await fetch(nsPath(ns, "/v1/events"), {headers, signal, credentials: "omit", cache: "no-store"});
        if (!res.ok) {
          const data = await res.json().catch(() => null);
          if (res.status === 401 || res.status === 403) {
            setLive(false);
            return; // the views say why when they read
          }
          throw new Error(data && data.error ? data.error.message : String(res.status));
        }
        setLive(true);
        stream.wait = 1000;
        await readEvents(res.body, signal);
      } catch (e) {
        if (signal.aborted) return;
      }
      setLive(false);
      await new Promise((resolve) => setTimeout(resolve, stream.wait));
      stream.wait = Math.min(stream.wait * 2, 30000);
    }
  }

  async function readEvents(body, signal) {
    const reader = body.pipeThrough(new TextDecoderStream()).getReader();
    let buf = "";
    while (!signal.aborted) {
      const {value, done} = await reader.read();
      if (done) return;
      buf += value;
      let end;
      while ((end = buf.indexOf("\n\n")) >= 0) {
        const block = buf.slice(0, end);
        buf = buf.slice(end + 2);
        dispatch(block);
      }
    }
  }

  function dispatch(block) {
    let id = null, kind = "message", data = "";
    for (const line of block.split("\n")) {
      if (line.startsWith(":")) continue;
      const i = line.indexOf(":");
      const field = i < 0 ? line : line.slice(0, i);
      const value = i < 0 ? "" : line.slice(i + 1).replace(/^ /, "");
      if (field === "id") id = value;
      else if (field === "event") kind = value;
      else if (field === "data") data += (data ? "\n" : "") + value;
    }
    if (!data) return;
    if (id) stream.last = id;
    let ev;
    try {
      ev = JSON.parse(data);
    } catch {
      return;
    }
    if (kind === "gap") ev = {kind: "gap", gap: ev};
    if (kind === "error") return;
    if (view && view.onEvent) view.onEvent(ev);
  }

  // ---- routing ------------------------------------------------------

  let view = null; // the view on screen: {onEvent}
  let timers = [];

  function route() {
    const hash = location.hash.replace(/^#/, "") || "/";
    const [path, qs] = hash.split("?");
    const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
    return {parts, params: new URLSearchParams(qs || "")};
  }

  function go(hash) {
    if (location.hash === hash) render();
    else location.hash = hash;
  }

  function later(fn, ms) {
    const t = setTimeout(fn, ms);
    timers.push(t);
    return t;
  }

  // debounce returns fn delayed until calls stop for ms.
  function debounce(fn, ms) {
    let t = null;
    return (...args) => {
      clearTimeout(t);
      t = later(() => fn(...args), ms);
    };
  }

  async function render() {
    timers.forEach(clearTimeout);
    timers = [];
    view = null;
    if (!key) return renderLogin();
    if (!me) {
      try {
        me = await api("GET", "/v1/me");
      } catch (e) {
        if (e.status === 401) {
          forget("That key was not accepted: it is unknown, expired or revoked.");
          return;
        }
        app.replaceChildren(el("main", {class: "narrow"}, alertBox(e)));
        return;
      }
    }
    await readNames();
    const {parts, params} = route();
    let ns = "main";
    let page = "overview";
    let arg = null;
    if (parts[0] === "ns" && parts[1]) {
      ns = parts[1];
      page = parts[2] || "overview";
      arg = parts[3] || null;
    } else if (parts[0] === "admin") {
      page = "admin";
      ns = stream.ns || homeNamespace();
    } else {
      ns = homeNamespace();
    }
    const content = el("div", {class: "content"});
    app.replaceChildren(layout(ns, page), content);
    if (flash) {
      content.append(el("div", {class: flash.kind === "error" ? "alert" : "notice", role: "status"}, flash.text));
      flash = null;
    }
    follow(ns);
    setLive(stream.live);
    const views = {overview: overviewView, tasks: tasksView, task: taskView, audit: auditView, admin: adminView};
    const make = views[page] || overviewView;
    try {
      view = await make(content, ns, arg, params);
    } catch (e) {
      content.append(alertBox(e));
    }
  }

  function homeNamespace() {
    if (isAdmin()) return "main";
    const grants = (me.scopes || []).filter((s) => s.startsWith("namespace:") && s !== "namespace:*");
    return grants.length ? grants[0].slice("namespace:".length) : "main";
  }

  function forget(why) {
    key = null;
    me = null;
    names.clear();
    namesRead = 0;
    sessionStorage.removeItem(KEY);
    if (stream.ctrl) stream.ctrl.abort();
    stream.ctrl = null;
    stream.ns = null;
    flash = why ? {kind: "error", text: why} : null;
    go("#/");
  }

  // ---- views --------------------------------------------------------

  function renderLogin() {
    const input = el("input", {type: "password", name: "key", autocomplete: "off", spellcheck: "false", placeholder: "tsk_…", "aria-label": "key"});
    const form = el("form", {class: "login", onsubmit: (e) => {
      e.preventDefault();
      const k = input.value.trim();
      if (!k) return;
      key = k;
      me = null;
      names.clear();
      namesRead = 0;
      sessionStorage.setItem(KEY, k);
      render();
    }},
    el("h1", {}, "Tessera console"),
    flash ? el("div", {class: "alert", role: "alert"}, flash.text) : null,
    el("p", {}, "Paste a key to see what it may see, and do what it may do."),
    input,
    el("button", {type: "submit"}, "Open the console"),
    el("p", {class: "meta"}, "The key stays in this tab (sessionStorage) and goes to this server alone, as an Authorization header. " +
      "No cookie is set: other sites cannot act with it. Closing the tab forgets it."),
    el("p", {class: "meta"}, el("a", {href: "/board"}, "The public board"), " needs no key."));
    flash = null;
    app.replaceChildren(form);
    input.focus();
  }

  function layout(ns, page) {
    const link = (hash, label, on) => el("a", {href: hash, class: on ? "on" : null}, label);
    const picker = namespacePicker(ns);
    return el("header", {class: "top"},
      el("a", {class: "brand", href: "#/ns/" + encodeURIComponent(ns)}, "Tessera console"),
      picker,
      el("nav", {},
        link("#/ns/" + encodeURIComponent(ns), "Queues", page === "overview"),
        link("#/ns/" + encodeURIComponent(ns) + "/tasks", "Tasks", page === "tasks" || page === "task"),
        link("#/ns/" + encodeURIComponent(ns) + "/audit", "Audit", page === "audit"),
        isAdmin() ? link("#/admin", "Keys & principals", page === "admin") : null,
        el("a", {href: "/board"}, "Board")),
      el("span", {class: "who"},
        el("span", {class: "live", title: "not connected to the event stream"}, el("i"), "offline"),
        el("span", {title: "key " + me.key_id + " · scopes " + (me.scopes || []).join(" ")},
          isolated(me.principal.display_name || me.principal.id), " · ", (me.scopes || []).join(" ")),
        el("button", {type: "button", onclick: () => forget(null)}, "Forget key")));
  }

  function namespacePicker(ns) {
    const choose = (name) => {
      if (name && name !== ns) go("#/ns/" + encodeURIComponent(name));
    };
    const scopes = me.scopes || [];
    const known = scopes.filter((s) => s.startsWith("namespace:") && s !== "namespace:*").map((s) => s.slice(10));
    if (!known.includes(ns)) known.unshift(ns);
    const select = el("select", {"aria-label": "namespace", onchange: (e) => choose(e.target.value)},
      known.map((n) => el("option", {value: n, selected: n === ns}, n)));
    if (isAdmin()) {
      api("GET", "/v1/admin/namespaces?limit=200").then((page) => {
        for (const n of page.namespaces || []) {
          if (!known.includes(n.name)) {
            known.push(n.name);
            select.append(el("option", {value: n.name}, n.name));
          }
        }
      }).catch(() => {});
    }
    if (isAdmin() || scopes.includes("namespace:*")) {
      const other = el("input", {type: "text", size: 12, placeholder: "other namespace", "aria-label": "other namespace",
        onchange: (e) => choose(e.target.value.trim())});
      return el("span", {}, select, " ", other);
    }
    return select;
  }

  // overviewView: the namespace's queues and what is happening now.
  async function overviewView(content, ns) {
    const table = el("div", {class: "scroll"});
    const fleets = el("div", {id: "fleets"});
    const feed = el("ol", {class: "feed", "aria-label": "live events"});
    content.append(el("h1", {}, "Queues of ", el("code", {}, ns)), table, fleets,
      el("h2", {}, "Happening now"), el("p", {class: "meta"}, "Events as they commit, newest first."),
      el("div", {class: "card"}, feed));
    // Each queue's fleet as last read ({f} or {err}; null: it has none).
    // A reload reads again the fleets of the queues the stream's events
    // touched that have one, and of queues not read yet; every 30 s (an
    // unmatched lane's wait grows with no event to say so) and after a
    // gap, every queue's: a fleet read is a keyed read, audited, so the
    // page makes no more of them than it shows.
    const known = new Map();
    let touched = new Set(), everything = true;
    const load = async () => {
      const seen = touched, all = everything;
      touched = new Set();
      everything = false;
      const page = await api("GET", nsPath(ns, "/v1/queues"));
      table.replaceChildren(queuesTable(ns, page));
      const names = page.queues.map((q) => q.queue);
      await Promise.all(names.filter((q) => all || !known.has(q) || (known.get(q) && seen.has(q))).map((q) =>
        api("GET", nsPath(ns, "/v1/queues/" + encodeURIComponent(q) + "/fleet")).then(
          (f) => known.set(q, hasFleet(f) ? {f} : null), (err) => known.set(q, {err}))));
      fleets.replaceChildren(...names.filter((q) => known.get(q)).map((q) => fleetSection(ns, q, known.get(q))));
    };
    await load();
    const reload = debounce(() => load().catch(() => {}), 700);
    const mine = timers; // render starts a new list: this view is gone
    const tick = () => later(() => {
      everything = true;
      load().catch(() => {}).finally(() => timers === mine && tick());
    }, 30000);
    tick();
    return {
      onEvent(ev) {
        if (ev.queue) touched.add(ev.queue);
        if (ev.kind === "gap") {
          everything = true;
          return reload();
        }
        feed.prepend(feedItem(ns, ev));
        while (feed.children.length > 100) feed.lastChild.remove();
        if (ev.kind !== "task.heartbeat") reload();
      },
    };
  }

  // ---- fleets -------------------------------------------------------

  // hasFleet says whether a queue's fleet view shows more than its plain
  // tasks: lanes of a group or requires, groups, or settings.
  function hasFleet(f) {
    return f.lanes.some((l) => l.group !== "" || l.requires.length > 0) || f.groups.length > 0 || f.group_max_running > 0 || !!f.rate;
  }

  // fleetSection shows a queue's fleet (GET …/fleet), or why it could
  // not be read.
  function fleetSection(ns, queue, {f, err}) {
    return el("section", {class: "fleet", "data-fleet": queue},
      el("h2", {}, "Fleet of ", el("code", {}, queue)),
      err ? alertBox(err) : fleetPanel(ns, queue, f));
  }

  function groupName(g) {
    return g === "" ? el("span", {class: "meta"}, "(no group)") : isolated(g, "group");
  }

  function requiresList(r) {
    return r.length ? r.map((c, i) => [i ? " " : "", el("code", {}, text(c))]) : el("span", {class: "meta"}, "nothing");
  }

  function rateText(r) {
    return r ? r.per_second + " a second, bursts of " + r.burst : "no limit";
  }

  function minutes(s) {
    if (s < 60) return "under a minute";
    const m = Math.floor(s / 60);
    if (m < 120) return m + (m === 1 ? " minute" : " minutes");
    return Math.floor(m / 60) + " hours";
  }

  // fleetPanel tells its times against the server's clock as of the
  // read (the fleet's time), as its ages are.
  function fleetPanel(ns, queue, f) {
    const now = Date.parse(f.time);
    const capOf = (g) => (g.max_running !== undefined && g.max_running !== null ? g.max_running : f.group_max_running);
    const lanes = f.lanes.map((l) => el("tr", {"data-lane": l.group + "|" + l.requires.join(" "), class: l.unmatched ? "unmatched" : null},
      el("td", {}, groupName(l.group)),
      el("td", {}, requiresList(l.requires)),
      el("td", {class: "num lane-ready"}, String(l.ready)),
      el("td", {class: "num"}, seconds(l.oldest_ready_age_seconds)),
      el("td", {class: "lane-match"}, l.unmatched ?
        el("span", {class: "unmatched-mark", title: "no claimant seen on this queue in the last 5 minutes has every capability these tasks require"},
          "ready, unmatched for " + minutes(l.unmatched_seconds || 0)) :
        l.oldest_ready_age_seconds === null || l.oldest_ready_age_seconds === undefined ? "" :
        l.matched_at ? el("span", {class: "meta", title: "one was seen " + ago(l.matched_at, now)}, "a claimant seen can take them") :
          el("span", {class: "meta not-judged", title: "no claimant that could take them was seen yet; they are marked unmatched once they wait " + minutes(300)},
            "not judged yet"))));
    const groups = f.groups.map((g) => {
      const cap = capOf(g);
      const cooling = g.cooldown_until && Date.parse(g.cooldown_until) > now;
      return el("tr", {"data-group": g.group},
        el("td", {}, groupName(g.group)),
        el("td", {class: "num group-running"}, g.running + " / " + (cap > 0 ? cap : "no cap")),
        el("td", {}, rateText(g.rate)),
        el("td", {class: "group-cooldown"}, cooling ? [at(g.cooldown_until), " (", ago(g.cooldown_until, now), ")"] : "—"),
        el("td", {}, when(g.last_granted_at, now)));
    });
    return el("div", {},
      el("dl", {class: "facts fleet-settings"},
        el("dt", {}, "each group's live leases"), el("dd", {class: "setting-cap"}, f.group_max_running > 0 ? "at most " + f.group_max_running : "no cap"),
        el("dt", {}, "the queue's rate"), el("dd", {class: "setting-rate"}, rateText(f.rate))),
      can("enqueue", ns) ? settingsForm(ns, queue, f) : null,
      el("h3", {}, "Lanes"),
      el("p", {class: "meta"}, "Ready tasks by group and required capabilities (scheduled ones included)."),
      lanes.length ? el("div", {class: "scroll"}, el("table", {class: "lanes"},
        el("thead", {}, el("tr", {}, el("th", {}, "group"), el("th", {}, "requires"), el("th", {class: "num"}, "ready"),
          el("th", {class: "num"}, "oldest ready waits"), el("th", {}, "claimants"))),
        el("tbody", {}, lanes))) : el("p", {class: "meta"}, "No lanes."),
      el("h3", {}, "Groups"),
      groups.length ? el("div", {class: "scroll"}, el("table", {class: "groups"},
        el("thead", {}, el("tr", {}, el("th", {}, "group"), el("th", {class: "num"}, "running / cap"), el("th", {}, "rate"),
          el("th", {}, "cooldown until"), el("th", {}, "last granted"))),
        el("tbody", {}, groups))) : el("p", {class: "meta"}, "No groups."),
      el("h3", {}, "Claimants seen"),
      f.claimants.length ? el("ul", {class: "claimants"}, f.claimants.map((c) => el("li", {},
        c.capabilities.length ? requiresList(c.capabilities) : el("span", {class: "meta"}, "no capabilities"), " ", el("span", {class: "meta"}, "last claimed ", when(c.seen_at, now))))) :
        el("p", {class: "meta"}, "None in the last 24 h."));
  }

  // settingsForm sets a queue's group_max_running and rate (PUT
  // …/settings), for a key that may enqueue.
  function settingsForm(ns, queue, f) {
    const cap = el("input", {type: "number", name: "group_max_running", min: 0, step: 1, value: f.group_max_running, size: 6});
    const perSecond = el("input", {type: "number", name: "per_second", min: 0, step: "any", value: f.rate ? f.rate.per_second : "", placeholder: "no limit", size: 6});
    const burst = el("input", {type: "number", name: "burst", min: 0, step: 1, value: f.rate ? f.rate.burst : "", placeholder: "auto", size: 6});
    const form = el("form", {class: "filters fleet-form", onsubmit: async (e) => {
      e.preventDefault();
      const body = {group_max_running: Number(cap.value) || 0};
      if (Number(perSecond.value) > 0) body.rate = {per_second: Number(perSecond.value), burst: Number(burst.value) || 0};
      try {
        await api("PUT", nsPath(ns, "/v1/queues/" + encodeURIComponent(queue) + "/settings"), body);
        flash = {kind: "notice", text: "Settings of " + queue + " saved."};
        render();
      } catch (err) {
        say("error", err.message);
      }
    }},
    el("label", {}, "each group's live leases (0: no cap)", cap),
    el("label", {}, "rate a second", perSecond),
    el("label", {}, "burst", burst),
    el("button", {type: "submit", class: "quiet"}, "Save settings"));
    return form;
  }

  function feedItem(ns, ev) {
    return el("li", {},
      at(ev.time),
      el("span", {class: "kind"}, ev.kind),
      ev.task_id ? el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/task/" + encodeURIComponent(ev.task_id)}, short(ev.task_id)) : null,
      ev.title ? isolated(ev.title, "title") : el("code", {}, text(ev.target)),
      ev.queue ? el("span", {class: "meta"}, "queue ", ev.queue) : null,
      ev.state ? stateBadge(ev.state) : null);
  }

  function queuesTable(ns, page) {
    if (!page.queues.length) return el("p", {class: "card"}, "No queues yet: enqueue a task and its queue shows up here.");
    const act = can("enqueue", ns);
    const rows = page.queues.map((q) => {
      const tasksOf = (state) => "#/ns/" + encodeURIComponent(ns) + "/tasks" + query({queue: q.queue, state});
      const count = (state) => {
        const n = q.counts[state] || 0;
        // A gated task waits on a person, not a worker: its count stands out.
        return el("td", {class: "num" + (n ? (state === "gated" ? " attention" : "") : " zero"), "data-count": state},
          n ? el("a", {href: tasksOf(state)}, String(n)) : "0");
      };
      const total = q.throughput.reduce((n, m) => n + m.succeeded + m.failed + m.dead, 0);
      return el("tr", {"data-queue": q.queue},
        el("td", {}, el("a", {href: tasksOf("")}, el("code", {}, q.queue)), q.paused ? el("span", {class: "badge paused", title: "paused " + (q.paused_at || "")}, "paused") : null),
        STATES.map(count),
        el("td", {class: "num"}, String(q.live_leases)),
        el("td", {class: "num" + (q.lapsed_leases ? "" : " zero")}, String(q.lapsed_leases)),
        el("td", {class: "num"}, seconds(q.oldest_ready_age_seconds)),
        el("td", {class: "nowrap"}, sparkline(q.throughput), " ", el("span", {class: "meta"}, total + " in 15 min")),
        act ? el("td", {}, queueActions(ns, q)) : null);
    });
    // Scrolled rather than cut off where the window is narrower than
    // its columns; its actions wrap before that.
    return el("div", {class: "scroll"}, el("table", {class: "queues"},
      el("thead", {}, el("tr", {}, el("th", {}, "queue"), STATES.map((s) => el("th", {class: "num"}, s)),
        el("th", {class: "num"}, "live leases"), el("th", {class: "num"}, "lapsed"), el("th", {class: "num"}, "oldest ready waits"),
        el("th", {}, "runs ended a minute"), act ? el("th", {}, "") : null)),
      el("tbody", {}, rows)));
  }

  // sparkline draws ended runs a minute: succeeded below, failed and
  // dead above them.
  function sparkline(minutes) {
    const ns = "http://www.w3.org/2000/svg";
    const max = Math.max(1, ...minutes.map((m) => m.succeeded + m.failed + m.dead));
    const svg = document.createElementNS(ns, "svg");
    const w = 5, h = 22;
    svg.setAttribute("class", "spark");
    svg.setAttribute("width", String(minutes.length * w));
    svg.setAttribute("height", String(h));
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", "runs ended each of the last 15 minutes");
    minutes.forEach((m, i) => {
      const ok = Math.round((m.succeeded / max) * h);
      const bad = Math.round(((m.failed + m.dead) / max) * h);
      const bar = (cls, y, height) => {
        const r = document.createElementNS(ns, "rect");
        r.setAttribute("class", cls);
        r.setAttribute("x", String(i * w));
        r.setAttribute("y", String(y));
        r.setAttribute("width", String(w - 1));
        r.setAttribute("height", String(height));
        svg.append(r);
      };
      if (!ok && !bad) bar("none", h - 1, 1);
      if (ok) bar("ok", h - ok, ok);
      if (bad) bar("bad", h - ok - bad, bad);
    });
    return svg;
  }

  function queueActions(ns, q) {
    const base = nsPath(ns, "/v1/queues/" + encodeURIComponent(q.queue));
    const box = el("span", {class: "actions"});
    const pause = el("button", {type: "button", class: "quiet", onclick: async () => {
      try {
        await api("POST", base + (q.paused ? "/resume" : "/pause"));
        say("notice", "Queue " + q.queue + (q.paused ? " resumed." : " paused: claims on it get nothing until it is resumed."));
      } catch (e) {
        say("error", e.message);
      }
    }}, q.paused ? "Resume" : "Pause");
    const purge = el("button", {type: "button", class: "danger quiet", onclick: () => {
      const finished = (q.counts.succeeded || 0) + (q.counts.dead || 0) + (q.counts.canceled || 0);
      const confirm = el("div", {class: "confirm"},
        "Delete the ", String(finished), " finished tasks of ", el("code", {}, q.queue), " (succeeded, dead, canceled) with their runs? ",
        el("button", {type: "button", class: "danger", onclick: async () => {
          try {
            const out = await api("POST", base + "/purge", {});
            say("notice", "Purged " + out.purged + " tasks of " + q.queue + (out.more ? "; more remain: purge again." : "."));
          } catch (e) {
            say("error", e.message);
          }
          confirm.remove();
        }}, "Purge"), " ",
        el("button", {type: "button", class: "quiet", onclick: () => confirm.remove()}, "Keep them"));
      box.after(confirm);
    }}, "Purge finished");
    return append(box, [pause, purge]);
  }

  // tasksView: tasks by filter, with paging and changes in bulk.
  async function tasksView(content, ns, _arg, params) {
    const f = Object.fromEntries(["queue", "state", "title", "created_after", "created_before", "cursor"].map((k) => [k, params.get(k) || ""]));
    const input = (name, label, attrs) => el("label", {}, label, el("input", Object.assign({name, value: f[name]}, attrs)));
    const localTime = (iso) => (iso ? new Date(Date.parse(iso) - new Date().getTimezoneOffset() * 60000).toISOString().slice(0, 16) : "");
    const form = el("form", {class: "filters", onsubmit: (e) => {
      e.preventDefault();
      const data = new FormData(form);
      const q = {};
      for (const [k, v] of data.entries()) {
        if (!v) continue;
        q[k] = k.startsWith("created_") ? new Date(v).toISOString() : v;
      }
      go("#/ns/" + encodeURIComponent(ns) + "/tasks" + query(q));
    }},
    input("queue", "queue", {size: 12}),
    el("label", {}, "state", el("select", {name: "state"}, el("option", {value: ""}, "any"),
      STATES.map((s) => el("option", {value: s, selected: s === f.state}, s)))),
    input("title", "title contains", {size: 18}),
    el("label", {}, "made after", el("input", {type: "datetime-local", name: "created_after", value: localTime(f.created_after)})),
    el("label", {}, "made before", el("input", {type: "datetime-local", name: "created_before", value: localTime(f.created_before)})),
    el("button", {type: "submit"}, "Filter"),
    el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/tasks"}, "clear"));
    const list = el("div", {class: "scroll"});
    const pager = el("div", {class: "pager"});
    content.append(el("h1", {}, "Tasks of ", el("code", {}, ns)), form);
    if (can("enqueue", ns)) content.append(bulkBar(ns, f));
    content.append(list, pager);

    const filter = {queue: f.queue, state: f.state, title: f.title, created_after: f.created_after, created_before: f.created_before};
    const rows = new Map();
    const load = async () => {
      const page = await api("GET", nsPath(ns, "/v1/tasks") + query(Object.assign({}, filter, {cursor: f.cursor, limit: 50})));
      rows.clear();
      list.replaceChildren(tasksTable(ns, page.tasks, rows));
      pager.replaceChildren();
      append(pager, [
        f.cursor ? el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/tasks" + query(filter)}, "← newest") : null,
        page.next_cursor ? el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/tasks" + query(Object.assign({}, filter, {cursor: page.next_cursor}))}, "older →") : null]);
    };
    await load();
    const reload = debounce(() => load().catch(() => {}), 800);
    return {
      onEvent(ev) {
        const row = ev.task_id && rows.get(ev.task_id);
        if (row && ev.state) {
          // The row's state, as the event left it: no read needed.
          const cell = row.querySelector("td.state-cell");
          cell.replaceChildren(stateBadge(ev.state));
          cell.dataset.updatedBy = "event";
          row.classList.remove("flash");
          void row.offsetWidth;
          row.classList.add("flash");
        }
        if (!row && !f.cursor && (ev.kind === "task.enqueued" || ev.kind === "gap" || ev.kind === "queue.purged")) reload();
      },
    };
  }

  function tasksTable(ns, tasks, rows) {
    if (!tasks.length) return el("p", {class: "card"}, "No task matches.");
    return el("table", {},
      el("thead", {}, el("tr", {}, ["task", "title", "queue", "state", "attempts", "made", "updated"].map((h) => el("th", {}, h)))),
      el("tbody", {}, tasks.map((t) => {
        const row = el("tr", {"data-task": t.id},
          el("td", {}, el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/task/" + encodeURIComponent(t.id)}, short(t.id))),
          el("td", {}, isolated(t.title, "title")),
          el("td", {}, el("code", {}, t.queue)),
          el("td", {class: "state-cell"}, stateBadge(t.state)),
          el("td", {class: "num"}, t.attempts + " / " + t.max_attempts),
          el("td", {}, when(t.created_at)),
          el("td", {}, when(t.updated_at)));
        rows.set(t.id, row);
        return row;
      })));
  }

  // bulkBar changes every task the filter selects: a dry run counts them,
  // the operator confirms that count, and the change carries it, so what
  // was confirmed is what changes.
  function bulkBar(ns, f) {
    const selection = {};
    for (const k of ["queue", "state", "title", "created_after", "created_before"]) if (f[k]) selection[k] = f[k];
    const bar = el("div", {class: "bar"}, el("span", {class: "meta"}, "With every task this filter selects (1,000 at most a time):"));
    const start = (action) => async () => {
      bar.querySelectorAll(".confirm").forEach((n) => n.remove());
      try {
        const counted = await api("POST", nsPath(ns, "/v1/tasks/bulk"), Object.assign({action, dry_run: true}, selection));
        const n = counted.count;
        if (!n) {
          bar.append(el("div", {class: "confirm"}, "No task this filter selects can be ", action === "retry" ? "retried." : "canceled."));
          return;
        }
        const confirm = el("div", {class: "confirm", "data-count": n},
          (action === "retry" ? "Retry " : "Cancel ") + n + " task" + (n === 1 ? "" : "s") + (counted.more ? " (the newest; more remain)" : "") + "? ",
          el("button", {type: "button", class: action === "cancel" ? "danger" : null, "data-confirm": action, onclick: async () => {
            try {
              const done = await api("POST", nsPath(ns, "/v1/tasks/bulk"), Object.assign({action, expect: n}, selection));
              flash = {kind: "notice", text: (action === "retry" ? "Retried " : "Canceled ") + done.changed.length + " tasks." + (done.more ? " More remain: do it again." : "")};
              render();
            } catch (e) {
              confirm.replaceChildren(alertBox(e));
            }
          }}, (action === "retry" ? "Retry " : "Cancel ") + n), " ",
          el("button", {type: "button", class: "quiet", onclick: () => confirm.remove()}, "Back"));
        bar.append(confirm);
      } catch (e) {
        bar.append(el("div", {class: "confirm"}, alertBox(e)));
      }
    };
    append(bar, [" ", el("button", {type: "button", class: "quiet", "data-bulk": "retry", onclick: start("retry")}, "Retry all…"), " ",
      el("button", {type: "button", class: "danger quiet", "data-bulk": "cancel", onclick: start("cancel")}, "Cancel all…")]);
    return bar;
  }

  // taskView: one task, its runs, its trail, what it wrote, what is next.
  async function taskView(content, ns, id) {
    const box = el("div");
    content.append(box);
    let fallback = null;
    // A waiting task moves when a parent finishes, which is the parent's
    // event: the page follows its parents' events too.
    let follows = new Set([id]);
    // The answer forms of open gates, kept across the page's reloads so
    // an event about the task does not wipe what the operator typed.
    const forms = new Map();
    const load = async (by) => {
      const [task, trail] = await Promise.all([
        api("GET", nsPath(ns, "/v1/tasks/" + encodeURIComponent(id))),
        api("GET", nsPath(ns, "/v1/tasks/" + encodeURIComponent(id) + "/trail")),
      ]);
      follows = new Set([id, ...(task.dependency ? task.dependency.after : [])]);
      box.replaceChildren(taskPage(ns, task, trail, (action) => {
        // The change shows when the stream says it happened; if no event
        // comes (the stream is down), the page reads the task again.
        clearTimeout(fallback);
        fallback = later(() => load("read").catch(() => {}), 4000);
      }, {forms, answered: () => load("answer").catch(() => {})}));
      const badge = box.querySelector("#task-state");
      if (badge) badge.dataset.updatedBy = by;
    };
    await load("read");
    const reload = debounce((by) => load(by).catch(() => {}), 150);
    return {
      onEvent(ev) {
        if (follows.has(ev.task_id) || ev.kind === "gap") {
          clearTimeout(fallback);
          reload("event");
        }
      },
    };
  }

  function nextStep(t) {
    switch (t.state) {
      case "waiting":
        return ["waiting on ", String(t.dependency ? t.dependency.waiting_on : "its"), " parent task(s) to finish"];
      case "scheduled":
        return t.attempts > 0 ? ["next attempt (", String(t.attempts + 1), " of ", String(t.max_attempts), ") ", when(t.run_at), " — the backoff of a failed run"] : ["scheduled to run ", when(t.run_at)];
      case "ready":
        return ["waiting to be claimed since ", when(t.run_at)];
      case "leased":
        return t.lease ? ["leased by ", who(t.lease.holder), "; the lease expires ", when(t.lease.expires_at), t.cancel_requested ? " — cancel requested: the holder is told at its next heartbeat" : ""] : ["leased"];
      case "gated": {
        const open = (t.gates || []).filter((g) => !g.answer);
        const due = open.map((g) => g.timeout_at).filter(Boolean).sort((x, y) => Date.parse(x) - Date.parse(y))[0];
        return ["waiting for a person to answer ", String(open.length), open.length === 1 ? " gate" : " gates",
          " (below); no worker can claim it until then", due ? ["; the first times out ", when(due)] : ""];
      }
      case "paused":
        return ["paused: not claimed until resumed"];
      case "dead":
        return ["dead: its attempts (", String(t.attempts), " of ", String(t.max_attempts), ") are spent. Retry gives them back."];
      case "canceled":
        return ["canceled. Retry makes it ready again."];
      case "succeeded":
        return ["done."];
    }
    return [t.state];
  }

  function taskPage(ns, t, trail, changed, gating) {
    const act = can("enqueue", ns);
    const change = (verb, label, cls) => el("button", {type: "button", class: cls, "data-action": verb, onclick: async (e) => {
      e.target.disabled = true;
      try {
        await api("POST", nsPath(ns, "/v1/tasks/" + encodeURIComponent(t.id) + "/" + verb));
        say("notice", label + ": sent. The page follows the change as it happens.");
        changed(verb);
      } catch (err) {
        say("error", err.message);
        e.target.disabled = false;
      }
    }}, label);
    const actions = [];
    if (act) {
      if (t.state === "dead" || t.state === "canceled") actions.push(change("retry", "Retry"));
      if (t.state === "ready" || t.state === "scheduled") actions.push(change("pause", "Pause", "quiet"));
      if (t.state === "paused") actions.push(change("resume", "Resume", "quiet"));
      if (!["succeeded", "dead", "canceled"].includes(t.state) && !t.cancel_requested) actions.push(change("cancel", "Cancel", "danger"));
    }
    // Gates that wait for an answer come first; answered ones are history.
    const gates = (t.gates || []).length ? gatesSection(ns, t, gating) : null;
    const waits = t.state === "gated" && (t.gates || []).some((g) => !g.answer);
    const records = trail.events.filter((e) => e.kind === "record.written");
    const blobs = trail.events.filter((e) => e.kind === "blob.stored");
    return el("div", {},
      el("p", {class: "meta"}, el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/tasks" + query({queue: t.queue})}, "← tasks of ", t.queue)),
      el("h1", {}, isolated(t.title, "title"), " ", el("span", {id: "task-state", class: "state s-" + t.state, "data-state": t.state}, t.state)),
      actions.length ? el("div", {class: "actions"}, actions) : null,
      t.error ? el("div", {class: "alert", id: "task-error"}, el("strong", {}, "Last error: "), text(t.error)) : null,
      waits ? gates : null,
      el("div", {class: "grid"},
        el("div", {class: "card"}, el("dl", {class: "facts"},
          el("dt", {}, "id"), el("dd", {}, el("code", {}, t.id)),
          el("dt", {}, "queue"), el("dd", {}, el("code", {}, t.queue)),
          el("dt", {}, "next"), el("dd", {id: "task-next"}, nextStep(t)),
          el("dt", {}, "attempts"), el("dd", {}, t.attempts + " of " + t.max_attempts),
          el("dt", {}, "priority"), el("dd", {}, String(t.priority)),
          el("dt", {}, "labels"), el("dd", {}, (t.labels || []).join(", ") || "—"),
          el("dt", {}, "made"), el("dd", {}, when(t.created_at), " by ", who(t.created_by)),
          el("dt", {}, "updated"), el("dd", {}, when(t.updated_at)),
          el("dt", {}, "run at"), el("dd", {}, when(t.run_at)),
          t.dependency ? [el("dt", {}, "after"), el("dd", {id: "task-after"}, t.dependency.after.map((p, i) => [i ? ", " : "",
            el("a", {href: "#/ns/" + encodeURIComponent(ns) + "/task/" + encodeURIComponent(p)}, short(p))]),
            " (", t.dependency.on_parent_failure === "run" ? "runs" : "canceled", " if one fails",
            t.parent_results ? "; its claims carry their results" : "", ")")] : null,
          t.unique_key ? [el("dt", {}, "unique key"), el("dd", {id: "task-unique-key"}, el("code", {}, t.unique_key))] : null,
          t.debounce_key ? [el("dt", {}, "debounce key"), el("dd", {id: "task-debounce-key"}, el("code", {}, t.debounce_key))] : null)),
        el("div", {class: "card"}, el("strong", {}, "Brief"), t.brief ? el("pre", {}, text(t.brief)) : el("p", {class: "meta"}, "none"),
          el("strong", {}, "Payload"), el("pre", {}, text(pretty(t.payload))),
          t.result ? [el("strong", {}, "Result"), el("pre", {}, text(pretty(t.result)))] : null,
          t.progress ? [el("strong", {}, "Progress"), el("pre", {}, text(pretty(t.progress)))] : null,
          t.checkpoint ? [el("strong", {}, "Checkpoint (attempt " + t.checkpoint.attempt + ", ", when(t.checkpoint.at), ")"),
            el("pre", {id: "task-checkpoint"}, text(pretty(t.checkpoint.value)))] : null)),
      waits ? null : gates,
      el("h2", {}, "Runs"),
      (t.runs || []).length ? el("div", {class: "scroll"}, el("table", {},
        el("thead", {}, el("tr", {}, ["run", "attempt", "holder", "started", "ended", "outcome", "error"].map((h) => el("th", {}, h)))),
        el("tbody", {}, t.runs.map((r) => el("tr", {},
          el("td", {}, short(r.run_id)), el("td", {class: "num"}, String(r.attempt)), el("td", {}, who(r.holder)),
          el("td", {}, when(r.started_at)), el("td", {}, r.ended_at ? when(r.ended_at) : "running"),
          el("td", {}, r.outcome || "—"), el("td", {class: "run-error"}, text(r.error || ""))))))) : el("p", {class: "meta"}, "Never claimed."),
      el("h2", {}, "Records its runs wrote"),
      records.length ? el("ul", {}, records.map((e) => recordItem(ns, e))) : el("p", {class: "meta"}, "None in the last 24 h."),
      el("h2", {}, "Blobs its runs stored"),
      blobs.length ? el("ul", {}, blobs.map((e) => blobItem(ns, e))) : el("p", {class: "meta"}, "None in the last 24 h."),
      el("h2", {}, "Trail"),
      el("p", {class: "meta"}, "What happened to it since ", when(trail.since), ", oldest first."),
      el("div", {class: "card"}, el("ol", {class: "feed", id: "trail"}, trail.events.map((e) => trailItem(e)),
        (trail.notes || []).map((n) => el("li", {}, at(n.time),
          el("span", {class: "kind"}, n.kind), text(n.body || ""))))));
  }

  // ---- gates ----------------------------------------------------------

  const ANSWERED = {accept: "accepted", decline: "declined", cancel: "canceled", timeout: "timed out"};

  // gatesSection shows a task's gates, open and answered; an open gate of
  // a gated task gets its answer form, for a key that may enqueue.
  function gatesSection(ns, t, gating) {
    const open = new Set(t.gates.filter((g) => !g.answer).map((g) => g.key));
    for (const k of [...gating.forms.keys()]) if (!open.has(k)) gating.forms.delete(k);
    return el("section", {id: "task-gates"},
      el("h2", {}, "Gates"),
      el("p", {class: "meta"}, t.state === "gated" ? "Questions the task waits on; it is ready once each is answered." :
        "Questions the task waited on, and their answers."),
      t.gates.map((g) => gateCard(ns, t, g, gating)));
  }

  function gateCard(ns, t, g, gating) {
    const a = g.answer;
    const timeout = g.timeout_at ? [when(g.timeout_at), g.on_timeout === "continue" ? " — then the task runs on without the answer" :
      " — then the task fails"] : "never";
    let answering = null;
    if (!a && t.state === "gated") {
      if (!can("enqueue", ns)) answering = el("p", {class: "meta"}, "Answering needs a key that may enqueue.");
      else {
        if (!gating.forms.has(g.key)) gating.forms.set(g.key, gateForm(ns, t, g, gating.answered));
        answering = gating.forms.get(g.key);
      }
    } else if (!a) {
      answering = el("p", {class: "meta"}, "Not answered; the task is " + t.state + ", so it no longer waits for one.");
    }
    return el("div", {class: "card gate" + (a ? "" : " open"), "data-gate": g.key, "data-kind": g.kind},
      el("div", {class: "gate-head"},
        el("p", {class: "gate-message"}, text(g.message)),
        el("span", {class: "badge"}, g.kind), el("code", {class: "meta", title: "the gate's key"}, text(g.key))),
      el("dl", {class: "facts"},
        el("dt", {}, "opened"), el("dd", {}, when(g.opened_at), g.run_id ? [", by run ", short(g.run_id)] : ", when the task was made"),
        a ? null : [el("dt", {}, "times out"), el("dd", {}, timeout)],
        g.kind === "url" ? [el("dt", {}, "link"), el("dd", {}, gateLink(g.url))] : null,
        el("dt", {}, "answer"), el("dd", {class: "gate-answer", "data-action": a ? a.action : null}, a ?
          [el("span", {class: "answer a-" + a.action}, ANSWERED[a.action] || a.action), " ", when(a.at),
            a.answered_by ? [" by ", who(a.answered_by)] : ""] : el("span", {class: "meta"}, "none yet"))),
      a && a.content !== undefined && a.content !== null ? el("pre", {class: "gate-content"}, text(pretty(a.content))) : null,
      answering);
  }

  // gateLink is a url gate's link: opened apart from the console, with no
  // handle back to it. The server stores http(s) URLs alone; anything
  // else shows as text.
  function gateLink(url) {
    if (!/^https?:\/\//i.test(url || "")) return el("code", {}, text(url));
    return el("a", {class: "gate-url", href: url, target: "_blank", rel: "noopener noreferrer"}, text(url));
  }

  // gateForm answers an open gate. The server is the one judge of an
  // answer (the form has novalidate): its error, which names the field,
  // shows by the form, and that field is marked.
  function gateForm(ns, t, g, answered) {
    const fields = g.kind === "form" ? schemaFields(g.schema || {}) : [];
    const problem = el("div", {class: "gate-error-slot"});
    const buttons = [];
    const send = async (action) => {
      problem.replaceChildren();
      fields.forEach((f) => f.mark(false));
      const body = {action};
      if (action === "accept" && g.kind === "form") {
        body.content = {};
        for (const f of fields) {
          const v = f.value();
          if (v !== undefined) body.content[f.name] = v;
        }
      }
      buttons.forEach((b) => (b.disabled = true));
      try {
        await api("POST", nsPath(ns, "/v1/tasks/" + encodeURIComponent(t.id) + "/gates/" + encodeURIComponent(g.key)), body);
        say("notice", "Gate “" + g.key + "” answered: " + (ANSWERED[action] || action) + ".");
        answered();
      } catch (err) {
        problem.replaceChildren(el("div", {class: "alert gate-error", role: "alert"}, text(err.message)));
        const named = /^field "([^"]+)"/.exec(err.message || "");
        const bad = named && fields.find((f) => f.name === named[1]);
        if (bad) bad.mark(true);
        buttons.forEach((b) => (b.disabled = false));
      }
    };
    const button = (action, label, cls, title) => {
      const b = el("button", {type: action === "accept" ? "submit" : "button", class: cls, "data-answer": action, title,
        onclick: action === "accept" ? null : () => send(action)}, label);
      buttons.push(b);
      return b;
    };
    const choices = [button("accept", "Accept", null, "answer accept" + (g.kind === "form" ? " with what the form holds" : "")),
      button("decline", "Decline", "quiet", "answer decline: the task runs on and its worker decides what that means")];
    if (g.kind === "form") choices.push(button("cancel", "Cancel", "quiet", "answer cancel: dismiss the question without a choice (the task itself is not canceled)"));
    return el("form", {class: "gate-form", "data-gate": g.key, novalidate: true, onsubmit: (e) => {
      e.preventDefault();
      send("accept");
    }},
    fields.length ? el("div", {class: "gate-fields"}, fields.map((f) => f.node)) : null,
    fields.some((f) => f.required) ? el("p", {class: "meta"}, el("span", {class: "req"}, "*"), " required") : null,
    g.kind === "url" ? el("p", {class: "meta"}, "Follow the link, do what it asks there, then accept; decline if you will not.") : null,
    problem,
    el("div", {class: "actions"}, choices));
  }

  // schemaFields makes the inputs of a form schema (the MCP elicitation
  // subset: a flat object of string, number, integer, boolean and
  // multi-select fields), in the schema's order. Each is {name, required,
  // node, value(), mark(bad)}; value() is undefined for a field left
  // empty, so the server says which required one is missing.
  function schemaFields(schema) {
    const required = new Set(schema.required || []);
    return Object.entries(schema.properties || {}).map(([name, f]) => schemaField(name, f || {}, required.has(name)));
  }

  function schemaField(name, f, required) {
    const label = el("span", {class: "field-name"}, text(f.title || name), required ? el("span", {class: "req", title: "required"}, " *") : null);
    const help = f.description ? el("span", {class: "field-help"}, text(f.description)) : null;
    const attrs = {name, required, "aria-required": required ? "true" : null};
    let input, value, node;
    const options = (list, names, anyOf) => list ? list.map((v, i) => ({value: v, title: names && names[i] !== undefined ? names[i] : v})) :
      (anyOf || []).map((o) => ({value: o.const, title: o.title || o.const}));
    if (f.type === "boolean") {
      input = el("input", Object.assign({type: "checkbox", checked: f.default === true}, attrs));
      value = () => input.checked;
      node = el("label", {class: "field check"}, input, label, help);
    } else if (f.type === "array") {
      const items = f.items || {};
      const picked = new Set(Array.isArray(f.default) ? f.default : []);
      const boxes = options(items.enum, items.enumNames, items.anyOf).map((o) =>
        el("label", {class: "check"}, el("input", {type: "checkbox", name, value: o.value, checked: picked.has(o.value)}), text(o.title)));
      const span = f.minItems || f.maxItems ? el("span", {class: "field-help"}, "choose " +
        (f.minItems && f.maxItems ? f.minItems + " to " + f.maxItems : f.minItems ? "at least " + f.minItems : "at most " + f.maxItems)) : null;
      input = el("fieldset", {class: "multi", "aria-required": required ? "true" : null}, el("legend", {}, label), help, span, boxes);
      value = () => boxes.map((b) => b.firstChild).filter((b) => b.checked).map((b) => b.value);
      node = el("div", {class: "field"}, input);
    } else if (f.type === "string" && (f.enum || f.oneOf)) {
      const opts = options(f.enum, f.enumNames, f.oneOf);
      input = el("select", attrs,
        el("option", {value: "", selected: f.default === undefined}, required ? "choose…" : "—"),
        opts.map((o) => el("option", {value: o.value, selected: o.value === f.default}, plain(o.title))));
      value = () => (input.value === "" ? undefined : input.value);
      node = el("label", {class: "field"}, label, input, help);
    } else if (f.type === "number" || f.type === "integer") {
      input = el("input", Object.assign({type: "number", min: f.minimum, max: f.maximum, step: f.type === "integer" ? 1 : "any",
        value: typeof f.default === "number" ? f.default : null, inputmode: f.type === "integer" ? "numeric" : "decimal"}, attrs));
      value = () => (input.value.trim() === "" ? undefined : Number(input.value));
      const range = f.minimum !== undefined || f.maximum !== undefined ? el("span", {class: "field-help"},
        f.type === "integer" ? "a whole number" : "a number", f.minimum !== undefined ? ", at least " + f.minimum : "",
        f.maximum !== undefined ? ", at most " + f.maximum : "") : null;
      node = el("label", {class: "field"}, label, input, help, range);
    } else {
      const type = {email: "email", uri: "url", date: "date", "date-time": "datetime-local"}[f.format] || "text";
      input = el("input", Object.assign({type, minlength: f.minLength, maxlength: f.maxLength, spellcheck: type === "text" ? null : "false",
        value: typeof f.default === "string" && type !== "datetime-local" ? f.default : null}, attrs));
      // A date-time is RFC 3339 on the wire: the browser's local time,
      // written in UTC.
      value = () => {
        const v = input.value;
        if (v === "") return undefined;
        if (type !== "datetime-local") return v;
        const d = new Date(v);
        return isNaN(d) ? v : d.toISOString().replace(/\.\d{3}Z$/, "Z");
      };
      node = el("label", {class: "field"}, label, input, help, type === "datetime-local" ? el("span", {class: "field-help"}, "your local time") : null);
    }
    return {name, required, node, value, mark(bad) {
      node.classList.toggle("invalid", bad);
      input.setAttribute("aria-invalid", bad ? "true" : "false");
    }};
  }

  function trailItem(e) {
    return el("li", {"data-kind": e.kind},
      at(e.time),
      el("span", {class: "kind"}, e.kind),
      e.state ? stateBadge(e.state) : null,
      e.kind.startsWith("record.") || e.kind.startsWith("blob.") ? el("code", {}, text(e.target)) : null,
      e.by ? el("span", {class: "meta"}, "by ", who(e.by)) : null);
  }

  function pretty(v) {
    if (v === undefined || v === null) return "null";
    return JSON.stringify(v, null, 2);
  }

  function recordItem(ns, e) {
    const slash = e.target.indexOf("/");
    const bucket = e.target.slice(0, slash), rkey = e.target.slice(slash + 1);
    const out = el("div");
    const show = el("button", {type: "button", class: "quiet", onclick: async () => {
      try {
        const r = await api("GET", nsPath(ns, "/v1/records/" + encodeURIComponent(bucket) + "/" + encodeURIComponent(rkey)));
        out.replaceChildren(el("p", {class: "meta"}, "version " + r.version + ", written ", when(r.created_at)), el("pre", {class: "record-value"}, text(pretty(r.value))));
      } catch (err) {
        out.replaceChildren(alertBox(err));
      }
    }}, "show");
    return el("li", {}, el("code", {}, text(e.target)), " ", el("span", {class: "meta"}, when(e.time)), " ", show, out);
  }

  function blobItem(ns, e) {
    const sum = e.target.replace(/^sha256:/, "");
    return el("li", {}, el("a", {href: "#", onclick: async (ev) => {
      ev.preventDefault();
      try {
        // The bytes need the key: fetched with it, handed over as a file.
        const res = await fetch(nsPath(ns, "/v1/blobs/" + sum), {headers: {Authorization: "Bearer " + key}, credentials: "omit"});
        if (!res.ok) throw new Error("the blob could not be read: " + res.status);
        const url = URL.createObjectURL(await res.blob());
        const a = el("a", {href: url, download: sum});
        document.body.append(a);
        a.click();
        a.remove();
        setTimeout(() => URL.revokeObjectURL(url), 10000);
      } catch (err) {
        say("error", err.message);
      }
    }}, el("code", {}, e.target)), " ", el("span", {class: "meta"}, when(e.time)));
  }

  // auditView: the namespace's audit trail and counters (everyone's for
  // an admin key, the key's own otherwise).
  async function auditView(content, ns) {
    const page = isAdmin() ? await api("GET", "/v1/admin/audit" + query({namespace: ns, limit: 200}))
      : await api("GET", nsPath(ns, "/v1/me/audit") + query({limit: 200}));
    content.append(el("h1", {}, "Audit of ", el("code", {}, ns)),
      el("p", {class: "meta"}, isAdmin() ? "Everyone's successful actions of the last 24 h, newest first, and the counters of everything else." :
        "Your key's own actions of the last 24 h, newest first, and its counters."),
      el("div", {class: "scroll"}, el("table", {},
        el("thead", {}, el("tr", {}, ["time", "action", "target", "task", "state", "principal", "status"].map((h) => el("th", {}, h)))),
        el("tbody", {}, page.events.filter((e) => e.namespace === ns).map((e) => el("tr", {},
          el("td", {}, when(e.time)), el("td", {}, el("code", {}, e.action)), el("td", {}, el("code", {}, text(e.target))),
          el("td", {}, e.task_id ? short(e.task_id) : ""), el("td", {}, e.state ? stateBadge(e.state) : ""),
          el("td", {}, who(e.principal_id)), el("td", {class: "num"}, String(e.status))))))),
      el("h2", {}, "Counters"),
      el("div", {class: "scroll"}, el("table", {},
        el("thead", {}, el("tr", {}, ["minute", "action", "outcome", "principal", "count"].map((h) => el("th", {}, h)))),
        el("tbody", {}, page.counters.filter((c) => c.namespace === ns).map((c) => el("tr", {},
          el("td", {}, when(c.minute)), el("td", {}, el("code", {}, c.action)), el("td", {}, c.outcome),
          el("td", {}, who(c.principal_id)), el("td", {class: "num"}, String(c.count))))))));
    return {};
  }

  // adminView: principals and keys (an admin key's).
  async function adminView(content) {
    if (!isAdmin()) {
      content.append(el("p", {class: "alert"}, "Keys and principals are an admin key's to see."));
      return {};
    }
    const [principals, keys] = await Promise.all([api("GET", "/v1/admin/principals?limit=200"), api("GET", "/v1/admin/keys?limit=200")]);
    const kind = el("select", {name: "kind"}, ["agent", "user", "service"].map((k) => el("option", {value: k}, k)));
    const pname = el("input", {name: "display_name", placeholder: "display name", required: true});
    const account = el("input", {name: "account", placeholder: "account (optional)"});
    const newPrincipal = el("form", {class: "filters", onsubmit: async (e) => {
      e.preventDefault();
      try {
        const p = await api("POST", "/v1/admin/principals", {kind: kind.value, display_name: pname.value, account: account.value || undefined});
        flash = {kind: "notice", text: "Principal " + p.display_name + " made: " + p.id};
        namesRead = 0;
        render();
      } catch (err) {
        say("error", err.message);
      }
    }}, el("label", {}, "kind", kind), el("label", {}, "name", pname), el("label", {}, "account", account), el("button", {type: "submit"}, "Create principal"));

    const owner = el("select", {name: "principal_id"}, principals.principals.map((p) => el("option", {value: p.id}, (p.display_name || p.id) + " (" + p.kind + ")")));
    const scopes = el("input", {name: "scopes", size: 40, value: "namespace:main read", "aria-label": "scopes"});
    const secret = el("div");
    const keysTable = el("div", {class: "scroll"}, keyRows(keys.keys));
    const reloadKeys = async () => keysTable.replaceChildren(keyRows((await api("GET", "/v1/admin/keys?limit=200")).keys));
    const newKey = el("form", {class: "filters", onsubmit: async (e) => {
      e.preventDefault();
      try {
        const k = await api("POST", "/v1/admin/keys", {principal_id: owner.value, scopes: scopes.value.split(/[\s,]+/).filter(Boolean)});
        secret.replaceChildren(el("p", {class: "secret"}, "The new key, shown this once: ", el("code", {}, k.key)));
        await reloadKeys();
      } catch (err) {
        say("error", err.message);
      }
    }}, el("label", {}, "for", owner), el("label", {}, "scopes", scopes), el("button", {type: "submit"}, "Create key"));

    function keyRows(list) {
      return el("table", {},
        el("thead", {}, el("tr", {}, ["id", "principal", "scopes", "made", "expires", ""].map((h) => el("th", {}, h)))),
        el("tbody", {}, list.map((k) => el("tr", {"data-key": k.id},
          el("td", {}, el("code", {}, k.id)), el("td", {}, who(k.principal_id)), el("td", {}, (k.scopes || []).join(" ")),
          el("td", {}, when(k.created_at)), el("td", {}, k.expires_at ? when(k.expires_at) : "never"),
          el("td", {}, k.revoked_at ? el("span", {class: "meta"}, "revoked ", when(k.revoked_at)) :
            el("button", {type: "button", class: "danger quiet", onclick: async () => {
              try {
                await api("DELETE", "/v1/admin/keys/" + encodeURIComponent(k.id));
                say("notice", "Key " + k.id + " revoked.");
                await reloadKeys();
              } catch (err) {
                say("error", err.message);
              }
            }}, "Revoke"))))));
    }

    content.append(el("h1", {}, "Keys & principals"),
      el("h2", {}, "Principals"), newPrincipal,
      el("div", {class: "scroll"}, el("table", {},
        el("thead", {}, el("tr", {}, ["id", "name", "kind", "account", "made", "last used"].map((h) => el("th", {}, h)))),
        el("tbody", {}, principals.principals.map((p) => el("tr", {},
          el("td", {}, el("code", {}, p.id)), el("td", {}, isolated(p.display_name)), el("td", {}, p.kind), el("td", {}, text(p.account || "")),
          el("td", {}, when(p.created_at)), el("td", {}, when(p.last_used_at))))))),
      el("h2", {}, "Keys"), newKey, secret, keysTable);
    return {};
  }

  window.addEventListener("hashchange", render);
  render();
})();
