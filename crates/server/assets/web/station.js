// Throng station page: lists the public mounts from /api/v1/status, then keeps titles,
// listener counts and the mount list current from the event stream /api/v1/events
// (Server-Sent Events: `mount`, `title`, `listeners`, `mount_stop`). Without the event stream
// (an older server, a proxy that drops it) it polls /api/v1/status every 10 s instead.
// Mounts with a `whep_url` get a "Low latency" button playing them over WebRTC (WHEP,
// draft-ietf-wish-whep): an RTCPeerConnection's offer POSTed to /whep/<mount>, the 201's SDP
// answer applied, the resource (Location) DELETEd on stop. The session playing is
// `window.throngWhep` ({ mount, pc, resource }), for tests and debugging.
// Replace it with <webroot>/static/station.js.
"use strict";
(function () {
  var list = document.getElementById("mount-list");
  var statusLine = document.getElementById("status-line");
  var template = document.getElementById("mount-card");
  var cards = new Map();
  var pollTimer = null;

  function text(el, value) {
    var v = value === undefined || value === null ? "" : String(value);
    if (el.textContent !== v) el.textContent = v;
  }

  function formatName(contentType, subtype) {
    var ct = (contentType || "").toLowerCase();
    if (ct.indexOf("mpeg") >= 0) return "MP3";
    if (ct.indexOf("aac") >= 0) return "AAC";
    if (ct.indexOf("ogg") >= 0 || ct.indexOf("opus") >= 0) return subtype ? "Ogg " + subtype : "Ogg";
    if (ct.indexOf("webm") >= 0) return "WebM";
    if (ct.indexOf("flac") >= 0) return "FLAC";
    return ct || "—";
  }

  function updateEmpty() {
    if (cards.size === 0) {
      text(statusLine, "No stream is live right now. This page updates by itself when one starts.");
    } else {
      text(statusLine, "");
    }
  }

  function setTitle(card, title, artist) {
    var t = title || "";
    var a = artist || "";
    text(card.querySelector(".now-title"), t || "—");
    text(card.querySelector(".now-artist"), a && t.indexOf(a) !== 0 ? a : "");
  }

  function setListeners(card, n) {
    text(card.querySelector(".listeners"), n === undefined || n === null ? "0" : n);
  }

  // A mount name as a URL path: each segment percent-encoded (`/my radio?.mp3` has a space
  // and a `?` that must not start a query).
  function pathOf(name) {
    return name.split("/").map(encodeURIComponent).join("/");
  }

  var whep = null; // { mount, pc, resource, card }

  function whepButton(card, on) {
    var b = card.querySelector(".rtc");
    b.setAttribute("aria-pressed", on ? "true" : "false");
    text(b, on ? "Stop low latency" : "Low latency");
  }

  // Ends the WHEP session playing, if any: closes the peer connection and DELETEs the resource.
  function stopWhep() {
    if (!whep) return;
    var w = whep;
    whep = null;
    window.throngWhep = null;
    try { w.pc.close(); } catch (_) {}
    if (w.audio) { w.audio.srcObject = null; w.audio.remove(); }
    if (w.resource) fetch(w.resource, { method: "DELETE" }).catch(function () {});
    whepButton(w.card, false);
  }

  function startWhep(card, name, path) {
    stopWhep();
    cards.forEach(function (other) {
      var a = other.querySelector(".audio");
      if (!a.paused) a.pause();
    });
    var pc = new RTCPeerConnection();
    var audio = document.createElement("audio");
    audio.className = "rtc-audio";
    audio.autoplay = true;
    audio.volume = Number(card.querySelector(".volume").value);
    card.appendChild(audio);
    var w = { mount: name, pc: pc, resource: null, card: card, audio: audio };
    whep = w;
    window.throngWhep = w;
    whepButton(card, true);
    pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = function (e) {
      audio.srcObject = e.streams && e.streams[0] ? e.streams[0] : new MediaStream([e.track]);
      var p = audio.play();
      if (p && p.catch) p.catch(function () {});
    };
    pc.createOffer()
      .then(function (offer) { return pc.setLocalDescription(offer); })
      .then(function () {
        return fetch("/whep" + path, {
          method: "POST",
          headers: { "Content-Type": "application/sdp" },
          body: pc.localDescription.sdp,
        });
      })
      .then(function (r) {
        if (r.status !== 201) throw new Error("WHEP " + r.status);
        var loc = r.headers.get("Location");
        if (loc) w.resource = new URL(loc, location.href).href;
        return r.text();
      })
      .then(function (sdp) {
        if (whep !== w) { if (w.resource) fetch(w.resource, { method: "DELETE" }).catch(function () {}); return; }
        return pc.setRemoteDescription({ type: "answer", sdp: sdp });
      })
      .catch(function () { if (whep === w) stopWhep(); });
    pc.addEventListener("connectionstatechange", function () {
      if (whep === w && (pc.connectionState === "failed" || pc.connectionState === "closed")) stopWhep();
    });
  }

  window.addEventListener("pagehide", stopWhep);

  function makeCard(mount) {
    var node = template.content.firstElementChild.cloneNode(true);
    var name = mount.mount;
    var path = pathOf(name);
    node.dataset.mount = name;
    var audio = node.querySelector(".audio");
    var button = node.querySelector(".play");
    var playText = node.querySelector(".play-text");
    audio.src = path;
    var rtc = node.querySelector(".rtc");
    rtc.addEventListener("click", function () {
      if (whep && whep.card === node) stopWhep();
      else startWhep(node, name, path);
    });
    button.addEventListener("click", function () {
      if (audio.paused) {
        stopWhep();
        cards.forEach(function (other) {
          var a = other.querySelector(".audio");
          if (a !== audio && !a.paused) a.pause();
        });
        // A fresh connection each time: a paused live stream would resume from stale data.
        audio.src = path + "?t=" + Date.now();
        var p = audio.play();
        if (p && p.catch) p.catch(function () {});
      } else {
        audio.pause();
      }
    });
    var volume = node.querySelector(".volume");
    volume.addEventListener("input", function () {
      audio.volume = Number(volume.value);
      if (whep && whep.card === node) whep.audio.volume = Number(volume.value);
    });
    audio.addEventListener("waiting", function () { button.classList.add("buffering"); });
    audio.addEventListener("playing", function () { button.classList.remove("buffering"); });
    audio.addEventListener("play", function () {
      button.setAttribute("aria-pressed", "true");
      text(playText, "Pause");
    });
    audio.addEventListener("pause", function () {
      button.classList.remove("buffering");
      button.setAttribute("aria-pressed", "false");
      text(playText, "Play");
    });
    node.querySelector(".m3u").href = path + ".m3u";
    node.querySelector(".xspf").href = path + ".xspf";
    node.querySelector(".direct").href = path;
    return node;
  }

  // `fromEvent`: `m` is an event's mount state rather than a status document's entry.
  function upsertMount(m, fromEvent) {
    if (!m || !m.mount) return;
    var card = cards.get(m.mount);
    if (!card) {
      card = makeCard(m);
      cards.set(m.mount, card);
      list.appendChild(card);
    }
    card.classList.remove("ended");
    var label = m.name || m.mount;
    text(card.querySelector(".mount-name"), label);
    card.querySelector(".audio").setAttribute("aria-label", "Player of " + label);
    card.querySelector(".volume").setAttribute("aria-label", "Volume of " + label);
    card.querySelector(".play").setAttribute("aria-label", "Play " + label);
    text(card.querySelector(".mount-desc"), m.description && m.description !== "Unspecified description" ? m.description : "");
    setTitle(card, m.title, m.artist);
    setListeners(card, m.listeners);
    text(card.querySelector(".format"), formatName(m.content_type, m.subtype));
    var kbps = m.bitrate !== undefined ? m.bitrate : m.bitrate_kbps;
    text(card.querySelector(".bitrate"), kbps ? kbps + " kbit/s" : "—");
    var genre = m.genre && m.genre !== "various" ? m.genre : "";
    text(card.querySelector(".genre"), genre);
    card.querySelector(".genre-row").hidden = !genre;
    // Status documents say `hls_url` when the mount is served as HLS; events do not carry it,
    // so an event leaves the link as the last status document set it.
    var hls = card.querySelector(".hls");
    if (m.hls_url) { hls.href = m.hls_url; hls.hidden = false; } else if (!fromEvent) { hls.hidden = true; }
    // Status documents say `whep_url` (null when the mount has none); events may not carry it.
    if ("whep_url" in m) card.querySelector(".rtc").hidden = !(m.whep_url && window.RTCPeerConnection);
    updateEmpty();
  }

  function removeMount(name) {
    var card = cards.get(name);
    if (!card) return;
    var audio = card.querySelector(".audio");
    if (!audio.paused) audio.pause();
    if (whep && whep.card === card) stopWhep();
    card.remove();
    cards.delete(name);
    updateEmpty();
  }

  function applyStatus(doc) {
    var server = doc.server || {};
    if (server.id) {
      text(document.getElementById("station-name"), server.id);
      document.title = server.id;
    }
    text(document.getElementById("station-location"), server.location && server.location !== "Earth" ? server.location : "");
    text(document.getElementById("server-version"), server.version || "");
    var seen = new Set();
    (doc.mounts || []).forEach(function (m) { seen.add(m.mount); upsertMount(m); });
    return seen;
  }

  function loadStatus(prune) {
    return fetch("/api/v1/status", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (doc) {
        var seen = applyStatus(doc);
        if (prune) cards.forEach(function (_, name) { if (!seen.has(name)) removeMount(name); });
        updateEmpty();
      })
      .catch(function () { text(statusLine, "The server cannot be reached; retrying…"); });
  }

  function startPolling() {
    if (pollTimer === null) pollTimer = setInterval(function () { loadStatus(true); }, 10000);
  }

  function parse(e) {
    try { return JSON.parse(e.data); } catch (_) { return null; }
  }

  // A mount that appeared after the page loaded: its HLS and WebRTC links are only in the
  // status document (HLS once its first segment is cut), so read that again a little later.
  var linksTimer = null;
  function refreshLinksSoon() {
    if (linksTimer !== null) return;
    linksTimer = setTimeout(function () { linksTimer = null; loadStatus(false); }, 6000);
  }

  function connectEvents() {
    if (!window.EventSource) { startPolling(); return; }
    var opened = false;
    var es = new EventSource("/api/v1/events");
    es.addEventListener("open", function () {
      // A reconnect: mounts that ended meanwhile sent no `mount_stop` to this page.
      if (opened) loadStatus(true);
      opened = true;
      if (pollTimer !== null) { clearInterval(pollTimer); pollTimer = null; }
    });
    es.addEventListener("mount", function (e) {
      var m = parse(e);
      var isNew = m && m.mount && !cards.has(m.mount);
      upsertMount(m, true);
      if (isNew) refreshLinksSoon();
    });
    es.addEventListener("title", function (e) {
      var d = parse(e);
      var card = d && cards.get(d.mount);
      if (card) setTitle(card, d.title, d.artist);
    });
    es.addEventListener("listeners", function (e) {
      var d = parse(e);
      var card = d && cards.get(d.mount);
      if (card) setListeners(card, d.listeners);
    });
    es.addEventListener("mount_stop", function (e) {
      var d = parse(e);
      if (d) removeMount(d.mount);
    });
    es.addEventListener("error", function () {
      // Never opened: no event stream here; poll the status document instead. Once opened,
      // the browser reconnects by itself (`retry:`), resuming with Last-Event-ID.
      if (!opened) { es.close(); startPolling(); }
    });
  }

  loadStatus(false).then(connectEvents);
})();
