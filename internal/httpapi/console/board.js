// The public board follows main's public events (GET /v1/events needs no
// key there, so EventSource serves) and, a moment after each, puts in the
// board the server renders anew: the page keeps one renderer, the
// server's. Without script the board reloads itself every few seconds.
"use strict";
(() => {
  if (!window.EventSource || !window.fetch) return;
  const kinds = ["task.enqueued", "task.claimed", "task.succeeded", "task.failed", "task.dead", "task.canceled",
    "task.cancel_requested", "task.released", "task.paused", "task.resumed", "task.retried", "record.written", "gap"];
  let pending = null;
  let busy = false;

  function freshness(text) {
    const span = document.getElementById("freshness");
    if (span) span.textContent = text;
  }

  async function refresh() {
    pending = null;
    if (busy) {
      pending = setTimeout(refresh, 500);
      return;
    }
    busy = true;
    try {
      const res = await fetch(location.pathname, {headers: {Accept: "text/html"}, credentials: "omit", cache: "no-store"});
      if (!res.ok) return;
      const doc = new DOMParser().parseFromString(await res.text(), "text/html");
      const next = doc.querySelector("main");
      const now = document.querySelector("main");
      if (next && now) {
        now.replaceWith(document.adoptNode(next));
        freshness("live");
      }
    } catch {
      // The next event tries again.
    } finally {
      busy = false;
    }
  }

  function soon() {
    if (!pending) pending = setTimeout(refresh, 400);
  }

  const source = new EventSource("/v1/events");
  for (const kind of kinds) source.addEventListener(kind, soon);
  source.addEventListener("open", () => freshness("live"));
  source.addEventListener("error", () => freshness("reconnecting…"));
})();
