// Throng admin web UI. Two things, both optional (every form works without JavaScript):
// 1. Confirmation: a button with `data-confirm` (Kick, Disconnect the source, Delete user,
//    Move all listeners) acts on the second press only: the first turns it into its question
//    (e.g. "Kick 12?") for 5 s; pressing again then submits, waiting lets it go back.
// 2. Live counts: the event stream /api/v1/events (`listeners`, `title`, and the `mount`
//    snapshot sent on each (re)connect) keeps the listener
//    counts and titles of the overview's rows (`tr[data-mount]`) and of a mount's page
//    (`#listener-count`, `#current-title`) current without a reload.
// Replace it with <webroot>/static/admin.js.
"use strict";
(function () {
  document.addEventListener("click", function (e) {
    var b = e.target.closest && e.target.closest("button[data-confirm]");
    if (!b) return;
    if (b.dataset.armed === "1") return; // the second press: let the form submit
    e.preventDefault();
    b.dataset.armed = "1";
    b.dataset.label = b.textContent;
    b.textContent = b.dataset.confirm;
    b.classList.add("confirming");
    setTimeout(function () {
      if (b.dataset.armed !== "1") return;
      b.dataset.armed = "";
      b.textContent = b.dataset.label;
      b.classList.remove("confirming");
    }, 5000);
  });

  if (!window.EventSource) return;
  var here = new URLSearchParams(location.search).get("mount");
  function rowOf(mount) {
    var rows = document.querySelectorAll("tr[data-mount]");
    for (var i = 0; i < rows.length; i++) if (rows[i].dataset.mount === mount) return rows[i];
    return null;
  }
  function set(el, v) { if (el && el.textContent !== String(v)) el.textContent = String(v); }
  function parse(e) { try { return JSON.parse(e.data); } catch (_) { return null; } }
  var es = new EventSource("/api/v1/events");
  function listeners(d) {
    var row = rowOf(d.mount);
    if (row) set(row.querySelector("[data-listeners]"), d.listeners);
    if (d.mount === here) set(document.getElementById("listener-count"), d.listeners);
  }
  function title(d) {
    var row = rowOf(d.mount);
    if (row) set(row.querySelector("[data-title]"), d.title || "");
    if (d.mount === here) set(document.getElementById("current-title"), d.title || "");
  }
  es.addEventListener("listeners", function (e) { var d = parse(e); if (d) listeners(d); });
  es.addEventListener("title", function (e) { var d = parse(e); if (d) title(d); });
  // The snapshot on (re)connect: whatever changed between the page's load and the stream's.
  es.addEventListener("mount", function (e) {
    var d = parse(e);
    if (d) { listeners(d); title(d); }
  });
  es.addEventListener("error", function () { if (es.readyState === EventSource.CLOSED) es.close(); });
})();
