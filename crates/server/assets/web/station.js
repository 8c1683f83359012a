// Throng station page: lists the public mounts from /api/v1/status, then keeps titles,
// listener counts and the mount list current from the event stream /api/v1/events
// (Server-Sent Events: `mount`, `title`, `listeners`, `mount_stop`). Without the event stream
// (an older server, a proxy that drops it) it polls /api/v1/status every 10 s instead.
//
// The player follows the station: a card that is playing is never torn down when its mount
// stops (the server moves its listeners to a fallback on the same URL, and the source may come
// back); any drop (an error, the stream ending, time standing still) reconnects with backoff
// (1, 2, 4, 8, 15 s, then every 15 s), saying "Reconnecting…", and at once when the mount
// reappears. Deliveries: ICY (the mount's own URL), HLS (native on Safari and iOS, else the
// vendored hls.js from /static/vendor/hls.min.js, loaded when first needed), WebRTC (WHEP,
// draft-ietf-wish-whep) when the listener picks "Low latency": an RTCPeerConnection's offer
// POSTed to /whep/<mount>, the 201's SDP answer applied, the resource (Location) DELETEd on
// stop. "Auto" is native HLS on Safari/iOS when the mount has HLS, else ICY. The Media Session
// API carries station, title, artist and artwork to lock screens and headsets.
//
// For tests and debugging: `window.throngWhep` ({ mount, pc, resource }) is the WebRTC session
// playing; `window.throngPlayer` is the active player ({ mount, delivery, state, attempts }).
// `/?embed=<mount>` shows that one mount's player alone (the page behind the embed snippet).
// All links are relative or built from the address the visitor used, never `hostname`.
// Replace it with <webroot>/static/station.js.
"use strict";
(function () {
  var list = document.getElementById("mount-list");
  var statusLine = document.getElementById("status-line");
  var template = document.getElementById("mount-card");
  var cards = new Map(); // mount name -> card element
  var players = new WeakMap(); // card element -> its Player
  var state = new Map(); // mount name -> last known facts (for fields events do not carry)
  var pollTimer = null;
  var station = { name: "", description: "", logo: "", url: "" };
  var embedOnly = new URLSearchParams(location.search).get("embed");
  if (embedOnly) document.body.classList.add("embed");

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

  function clock(unix) {
    var d = new Date(unix * 1000);
    var opts = { hour: "2-digit", minute: "2-digit" };
    if (Date.now() - d.getTime() > 20 * 3600 * 1000) { opts.month = "short"; opts.day = "numeric"; }
    return d.toLocaleString([], opts);
  }

  function stationName() {
    return station.name || location.hostname || "Radio";
  }

  function updateEmpty() {
    if (cards.size === 0) {
      text(statusLine, embedOnly
        ? "This stream is not live right now. This player updates by itself when it starts."
        : "No stream is live right now. This page updates by itself when one starts.");
    } else {
      text(statusLine, "");
    }
  }

  // A mount name as a URL path: each segment percent-encoded (`/my radio?.mp3` has a space
  // and a `?` that must not start a query).
  function pathOf(name) {
    return name.split("/").map(encodeURIComponent).join("/");
  }

  // The path (and query) of an absolute URL from the status document: the page's links stay on
  // the host the visitor typed, whatever `hostname` says.
  function localPath(url) {
    try { var u = new URL(url, location.href); return u.pathname + u.search; } catch (_) { return url; }
  }

  // ---- Media Session -----------------------------------------------------------------------

  function artworkOf(card) {
    var s = state.get(card.dataset.mount) || {};
    var src = s.artwork || station.logo;
    if (!src) return [];
    return [{ src: new URL(src, location.href).href, sizes: "512x512" }];
  }

  function updateMediaSession() {
    if (!("mediaSession" in navigator)) return;
    var p = active;
    if (!p) { navigator.mediaSession.playbackState = "none"; return; }
    var s = state.get(p.name) || {};
    var title = s.title || s.label || p.name;
    try {
      navigator.mediaSession.metadata = new window.MediaMetadata({
        title: title,
        artist: s.artist || s.label || p.name,
        album: stationName(),
        artwork: artworkOf(p.card),
      });
    } catch (_) {}
    navigator.mediaSession.playbackState = p.state === "idle" ? "paused" : "playing";
  }

  if ("mediaSession" in navigator) {
    var handlers = {
      play: function () { if (lastPlayer) lastPlayer.start(lastPlayer.mode); },
      pause: function () { if (active) active.stop(); },
      stop: function () { if (active) active.stop(); },
    };
    Object.keys(handlers).forEach(function (k) {
      try { navigator.mediaSession.setActionHandler(k, handlers[k]); } catch (_) {}
    });
  }

  // ---- Deliveries --------------------------------------------------------------------------

  var isApple = /iP(hone|ad|od)|Macintosh/.test(navigator.userAgent) &&
    !/Chrome|Chromium|Edg|Firefox|Android/.test(navigator.userAgent);
  function nativeHls(audio) {
    return isApple && !!audio.canPlayType("application/vnd.apple.mpegurl");
  }

  var hlsScript = null;
  function loadHlsJs() {
    if (window.Hls) return Promise.resolve(window.Hls);
    if (!hlsScript) {
      hlsScript = new Promise(function (resolve, reject) {
        var s = document.createElement("script");
        s.src = "/static/vendor/hls.min.js";
        s.onload = function () { window.Hls ? resolve(window.Hls) : reject(new Error("hls.js")); };
        s.onerror = function () { hlsScript = null; reject(new Error("hls.js did not load")); };
        document.head.appendChild(s);
      });
    }
    return hlsScript;
  }

  // Backoff before reconnect attempt n (0-based), in milliseconds.
  function backoff(n) {
    return [1000, 2000, 4000, 8000][n] || 15000;
  }

  var active = null; // the player that is playing or trying to
  var lastPlayer = null;

  // One card's player. `mode`: "auto", "hls" or "webrtc"; `state`: "idle", "connecting",
  // "playing" or "reconnecting".
  function Player(card, name) {
    this.card = card;
    this.name = name;
    this.path = pathOf(name);
    this.audio = card.querySelector(".audio");
    this.mode = "auto";
    this.delivery = null; // "icy", "hls-native", "hls.js" or "webrtc"
    this.state = "idle";
    this.attempts = 0;
    this.timer = null;
    this.hls = null;
    this.whep = null;
    this.lastTime = -1;
    this.stillSince = 0;
    this.session = 0; // bumped by every connect and stop: late callbacks of older ones are ignored
    this.ownPauses = 0; // pauses this code asked for, whose (queued) `pause` events are not the listener's
    var self = this;
    var a = this.audio;
    a.addEventListener("playing", function () { self.onPlaying(); });
    a.addEventListener("waiting", function () { self.render(); });
    a.addEventListener("ended", function () { self.dropped("the stream ended"); });
    a.addEventListener("error", function () {
      if (a.getAttribute("src")) self.dropped("error " + (a.error && a.error.code));
    });
    // A pause nobody here asked for (a headset button, the browser's own controls) stops.
    a.addEventListener("pause", function () {
      if (self.ownPauses > 0) { self.ownPauses--; return; }
      if (self.state !== "idle" && self.delivery !== "webrtc" && !a.ended && !a.error) self.stop();
    });
  }

  Player.prototype.set = function (s, why) {
    this.state = s;
    this.why = why || "";
    this.render();
  };

  Player.prototype.render = function () {
    var b = this.card.querySelector(".play");
    var on = this.state !== "idle";
    b.setAttribute("aria-pressed", on ? "true" : "false");
    text(b.querySelector(".play-text"), on ? "Pause" : "Play");
    b.classList.toggle("buffering", this.state === "connecting" || this.state === "reconnecting" ||
      (this.state === "playing" && this.delivery !== "webrtc" && this.audio.readyState < 3));
    var msg = "";
    if (this.state === "connecting") msg = "Connecting…";
    else if (this.state === "reconnecting") msg = "Reconnecting…";
    else if (this.state === "playing") {
      msg = { icy: "Playing", "hls-native": "Playing over HLS", "hls.js": "Playing over HLS", webrtc: "Playing with low latency (WebRTC)" }[this.delivery] || "Playing";
      if (this.card.classList.contains("ended")) msg += " · the source is off air, staying tuned";
    } else if (this.card.classList.contains("ended")) {
      msg = (state.get(this.name) || {}).fallback ? "Off air: its fallback plays meanwhile" : "Off air";
    }
    var st = this.card.querySelector(".play-state");
    text(st, msg);
    st.dataset.state = this.state;
    this.card.dataset.state = this.state;
    var rtc = this.card.querySelector(".rtc");
    var lowLatency = on && this.mode === "webrtc";
    rtc.setAttribute("aria-pressed", lowLatency ? "true" : "false");
    text(rtc, lowLatency ? "Stop low latency" : "Low latency");
    this.card.querySelector(".hls-mode").setAttribute("aria-pressed", on && this.mode === "hls" ? "true" : "false");
    if (active === this) updateMediaSession();
  };

  Player.prototype.start = function (mode) {
    if (active && active !== this) active.stop();
    active = this;
    lastPlayer = this;
    window.throngPlayer = this;
    this.mode = mode || "auto";
    this.attempts = 0;
    this.connect();
  };

  Player.prototype.teardown = function () {
    this.session++;
    clearTimeout(this.timer);
    this.timer = null;
    if (this.hls) { try { this.hls.destroy(); } catch (_) {} this.hls = null; }
    if (this.whep) { stopWhep(this.whep); this.whep = null; }
    if (!this.audio.paused) { this.ownPauses++; this.audio.pause(); }
    this.audio.removeAttribute("src");
    try { this.audio.load(); } catch (_) {}
  };

  Player.prototype.stop = function () {
    this.teardown();
    this.delivery = null;
    if (active === this) active = null;
    this.set("idle");
    if ("mediaSession" in navigator) navigator.mediaSession.playbackState = "paused";
    if (!cards.has(this.name) || this.card.classList.contains("ended")) {
      // The mount ended while this card was kept for its listener: it can go now.
      if (!embedOnly) dropCard(this.name);
    }
  };

  Player.prototype.connect = function () {
    this.teardown();
    var session = this.session;
    var self = this;
    var s = state.get(this.name) || {};
    var hlsPath = s.hls_url ? localPath(s.hls_url) : null;
    this.lastTime = -1;
    this.stillSince = Date.now();
    this.set(this.attempts > 0 ? "reconnecting" : "connecting");
    var a = this.audio;
    a.volume = Number(this.card.querySelector(".volume").value);
    function play() {
      var p = a.play();
      if (p && p.catch) p.catch(function (e) {
        if (session !== self.session) return;
        if (e && e.name === "NotAllowedError") self.stop(); // no autoplay: wait for a click
        else self.dropped(e && e.name);
      });
    }
    if (this.mode === "webrtc") {
      this.delivery = "webrtc";
      this.whep = startWhep(this, session);
      return;
    }
    var wantHls = hlsPath && (this.mode === "hls" || (this.mode === "auto" && nativeHls(a)));
    if (wantHls && nativeHls(a)) {
      this.delivery = "hls-native";
      a.src = hlsPath;
      play();
    } else if (wantHls) {
      this.delivery = "hls.js";
      loadHlsJs().then(function (Hls) {
        if (session !== self.session) return;
        if (!Hls.isSupported()) throw new Error("no MediaSource");
        var h = new Hls({ liveDurationInfinity: true, lowLatencyMode: false });
        self.hls = h;
        h.on(Hls.Events.ERROR, function (_, d) {
          if (session === self.session && d && d.fatal) self.dropped("hls " + d.type);
        });
        h.on(Hls.Events.MANIFEST_PARSED, function () { if (session === self.session) play(); });
        h.loadSource(hlsPath);
        h.attachMedia(a);
      }).catch(function (e) {
        if (session !== self.session) return;
        // hls.js cannot run here: ICY instead.
        self.mode = "auto";
        self.dropped(String(e && e.message));
      });
    } else {
      this.delivery = "icy";
      // A fresh connection each time: a paused live stream would resume from stale data.
      a.src = this.path + "?t=" + Date.now();
      play();
    }
  };

  Player.prototype.onPlaying = function () {
    if (this.state === "idle") return;
    this.attempts = 0;
    this.set("playing");
  };

  // The connection is lost or never came: try again after the backoff (the listener still
  // wants to listen: only `stop` ends that).
  Player.prototype.dropped = function (why) {
    if (this.state === "idle") return;
    var self = this;
    this.teardown();
    var session = this.session;
    var delay = backoff(this.attempts);
    this.attempts++;
    this.set("reconnecting", why);
    this.timer = setTimeout(function () {
      if (session === self.session) self.connect();
    }, delay);
  };

  // The mount is (back) on the air: a player waiting to reconnect tries now.
  Player.prototype.mountBack = function () {
    if (this.state === "reconnecting" && this.timer !== null) this.connect();
  };

  // Called every second: time standing still for 10 s while playing is a silent drop (a
  // stalled connection fires no error).
  Player.prototype.watch = function () {
    if (this.state !== "playing" || this.delivery === "webrtc") return;
    var t = this.audio.currentTime;
    if (t !== this.lastTime) { this.lastTime = t; this.stillSince = Date.now(); return; }
    if (Date.now() - this.stillSince > 10000) this.dropped("no audio for 10 s");
  };

  setInterval(function () { if (active) active.watch(); }, 1000);
  window.addEventListener("online", function () { if (active) active.mountBack(); });

  // ---- WebRTC (WHEP) -------------------------------------------------------------------

  // Ends a WHEP session: closes the peer connection and DELETEs the resource.
  function stopWhep(w) {
    if (window.throngWhep === w) window.throngWhep = null;
    w.closed = true;
    try { w.pc.close(); } catch (_) {}
    if (w.audio) { w.audio.srcObject = null; w.audio.remove(); }
    if (w.resource) fetch(w.resource, { method: "DELETE" }).catch(function () {});
  }

  function startWhep(player, session) {
    var card = player.card;
    var pc = new RTCPeerConnection();
    var audio = document.createElement("audio");
    audio.className = "rtc-audio";
    audio.autoplay = true;
    audio.volume = Number(card.querySelector(".volume").value);
    card.appendChild(audio);
    var w = { mount: player.name, pc: pc, resource: null, card: card, audio: audio, closed: false };
    window.throngWhep = w;
    pc.addTransceiver("audio", { direction: "recvonly" });
    pc.ontrack = function (e) {
      audio.srcObject = e.streams && e.streams[0] ? e.streams[0] : new MediaStream([e.track]);
      var p = audio.play();
      if (p && p.catch) p.catch(function () {});
    };
    audio.addEventListener("playing", function () { if (session === player.session) player.onPlaying(); });
    pc.createOffer()
      .then(function (offer) { return pc.setLocalDescription(offer); })
      .then(function () {
        return fetch("/whep" + player.path, {
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
        if (w.closed) { if (w.resource) fetch(w.resource, { method: "DELETE" }).catch(function () {}); return; }
        return pc.setRemoteDescription({ type: "answer", sdp: sdp });
      })
      .catch(function (e) { if (!w.closed && session === player.session) player.dropped(String(e && e.message)); });
    pc.addEventListener("connectionstatechange", function () {
      if (!w.closed && session === player.session && (pc.connectionState === "failed" || pc.connectionState === "closed")) {
        player.dropped("WebRTC " + pc.connectionState);
      }
    });
    return w;
  }

  window.addEventListener("pagehide", function () { if (active) active.stop(); });

  // ---- Cards -------------------------------------------------------------------------------

  function setTitle(card, title, artist, artwork) {
    var t = title || "";
    var a = artist || "";
    text(card.querySelector(".now-title"), t || "—");
    text(card.querySelector(".now-artist"), a && t.indexOf(a) !== 0 ? a : "");
    var cover = card.querySelector(".cover");
    var src = artwork || station.logo || "";
    if (src) { if (cover.getAttribute("src") !== src) cover.src = src; cover.hidden = false; } else { cover.hidden = true; cover.removeAttribute("src"); }
  }

  function renderHistory(card, history) {
    var ol = card.querySelector(".history");
    ol.textContent = "";
    (history || []).slice(0, 10).forEach(function (h) {
      var li = document.createElement("li");
      var time = document.createElement("time");
      time.dateTime = new Date(h.at_unix * 1000).toISOString();
      time.textContent = clock(h.at_unix);
      var t = document.createElement("span");
      t.textContent = h.title;
      li.appendChild(time);
      li.appendChild(t);
      ol.appendChild(li);
    });
    card.querySelector(".history-box").hidden = !(history && history.length);
  }

  function setListeners(card, n) {
    text(card.querySelector(".listeners"), n === undefined || n === null ? "0" : n);
  }

  function shareUrl(name) {
    return location.origin + "/#" + encodeURIComponent(name);
  }

  function makeCard(mount) {
    var node = template.content.firstElementChild.cloneNode(true);
    var name = mount.mount;
    var path = pathOf(name);
    node.dataset.mount = name;
    node.id = "mount-" + name.replace(/[^A-Za-z0-9_-]/g, "_");
    var player = new Player(node, name);
    players.set(node, player);
    // The mount's address before any play (preload="none": nothing is fetched until Play).
    player.audio.src = path;
    node.querySelector(".play").addEventListener("click", function () {
      if (player.state === "idle") player.start(player.mode === "webrtc" ? "auto" : player.mode);
      else player.stop();
    });
    node.querySelector(".rtc").addEventListener("click", function () {
      if (player.state !== "idle" && player.mode === "webrtc") player.stop();
      else player.start("webrtc");
    });
    node.querySelector(".hls-mode").addEventListener("click", function () {
      if (player.state !== "idle" && player.mode === "hls") player.start("auto");
      else player.start("hls");
    });
    var volume = node.querySelector(".volume");
    volume.addEventListener("input", function () {
      player.audio.volume = Number(volume.value);
      if (player.whep && player.whep.audio) player.whep.audio.volume = Number(volume.value);
    });
    node.querySelector(".m3u").href = path + ".m3u";
    node.querySelector(".xspf").href = path + ".xspf";
    node.querySelector(".direct").href = path;
    var share = node.querySelector(".share");
    share.addEventListener("click", function () {
      var url = shareUrl(name);
      var s = state.get(name) || {};
      if (navigator.share) {
        navigator.share({ title: (s.label || name) + " · " + stationName(), url: url }).catch(function () {});
      } else if (navigator.clipboard) {
        navigator.clipboard.writeText(url).then(function () { text(share, "Link copied"); setTimeout(function () { text(share, "Share"); }, 2000); }, function () {});
      }
    });
    var embed = location.origin + "/?embed=" + encodeURIComponent(name);
    node.querySelector(".embed-code").value =
      '<iframe src="' + embed + '" title="' + name.replace(/[^\w ./-]/g, "") + ' player" width="360" height="260" style="border:0" allow="autoplay"></iframe>';
    return node;
  }

  function dropCard(name) {
    var card = cards.get(name);
    if (!card) return;
    card.remove();
    cards.delete(name);
    updateEmpty();
  }

  // `fromEvent`: `m` is an event's mount state rather than a status document's entry.
  function upsertMount(m, fromEvent) {
    if (!m || !m.mount) return;
    if (embedOnly && m.mount !== embedOnly) return;
    var s = state.get(m.mount) || {};
    // Facts only the status document carries stay as it last set them.
    Object.keys(m).forEach(function (k) { if (m[k] !== undefined) s[k] = m[k]; });
    // The codec is known once its headers came: a later document without it keeps the label.
    if (m.subtype) s.subtype_seen = m.subtype;
    if (!s.subtype && s.subtype_seen) s.subtype = s.subtype_seen;
    s.label = m.name && m.name !== "Unspecified name" ? m.name : m.mount;
    state.set(m.mount, s);
    var card = cards.get(m.mount);
    if (!card) {
      card = makeCard(m);
      cards.set(m.mount, card);
      list.appendChild(card);
    }
    var wasEnded = card.classList.contains("ended");
    card.classList.remove("ended");
    text(card.querySelector(".mount-name"), s.label);
    text(card.querySelector(".mount-path"), m.mount);
    card.querySelector(".audio").setAttribute("aria-label", "Player of " + s.label);
    card.querySelector(".volume").setAttribute("aria-label", "Volume of " + s.label);
    card.querySelector(".play").setAttribute("aria-label", "Play " + s.label);
    text(card.querySelector(".mount-desc"), s.description && s.description !== "Unspecified description" ? s.description : "");
    setTitle(card, s.title, s.artist, s.artwork);
    setListeners(card, s.listeners);
    text(card.querySelector(".format"), formatName(s.content_type, s.subtype));
    var kbps = m.bitrate !== undefined ? m.bitrate : m.bitrate_kbps;
    if (kbps !== undefined) s.kbps = kbps;
    text(card.querySelector(".bitrate"), s.kbps ? s.kbps + " kbit/s" : "—");
    var genre = s.genre && s.genre !== "various" ? s.genre : "";
    text(card.querySelector(".genre"), genre);
    card.querySelector(".genre-row").hidden = !genre;
    if (!fromEvent) {
      var since = m.stream_start_unix;
      text(card.querySelector(".since"), since ? clock(since) : "");
      card.querySelector(".since-row").hidden = !since;
      renderHistory(card, m.history);
    }
    // An event's mount state has no history or start time: a (re)started mount gets them
    // from the status document read right after (`refreshLinksSoon`).
    // Status documents say `hls_url` when the mount is served as HLS; events do not carry it,
    // so an event leaves the link as the last status document set it.
    var hls = card.querySelector(".hls");
    var hlsMode = card.querySelector(".hls-mode");
    if (s.hls_url) {
      hls.href = localPath(s.hls_url);
      hls.hidden = false;
      hlsMode.hidden = false;
    } else if (!fromEvent) {
      hls.hidden = true;
      hlsMode.hidden = true;
    }
    // Status documents say `whep_url` (null when the mount has none); events may not carry it.
    if ("whep_url" in m) card.querySelector(".rtc").hidden = !(m.whep_url && window.RTCPeerConnection);
    if (wasEnded || fromEvent) players.get(card).mountBack();
    players.get(card).render();
    updateEmpty();
  }

  // The mount stopped. A card whose player is on keeps playing (a fallback serves the same
  // URL; if nothing does, it reconnects until the mount is back), and a mount with a fallback
  // stays listenable at its URL: such cards are marked off air only.
  function mountStopped(name) {
    var card = cards.get(name);
    if (!card) return;
    var s = state.get(name) || {};
    if (players.get(card).state !== "idle" || embedOnly || s.fallback) {
      card.classList.add("ended");
      players.get(card).render();
      return;
    }
    dropCard(name);
  }

  function applyStation(doc) {
    var server = doc.server || {};
    var st = doc.station || {};
    station = { name: st.name || "", description: st.description || "", logo: st.logo || "", url: st.url || "" };
    var name = stationName();
    text(document.getElementById("station-name"), name);
    document.title = embedOnly ? embedOnly + " · " + name : name;
    text(document.getElementById("station-description"), station.description);
    text(document.getElementById("station-location"), server.location && server.location !== "Earth" ? server.location : "");
    text(document.getElementById("server-version"), server.version || "");
    var link = document.getElementById("station-link");
    if (station.url) link.href = station.url; else link.removeAttribute("href");
    var logo = document.getElementById("station-logo");
    if (station.logo) { logo.src = station.logo; logo.hidden = false; } else { logo.hidden = true; }
  }

  function applyStatus(doc) {
    applyStation(doc);
    var seen = new Set();
    (doc.mounts || []).forEach(function (m) { seen.add(m.mount); upsertMount(m); });
    return seen;
  }

  function loadStatus(prune) {
    return fetch("/api/v1/status", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (doc) {
        var seen = applyStatus(doc);
        if (prune) cards.forEach(function (_, name) { if (!seen.has(name)) mountStopped(name); });
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

  // A mount that appeared after the page loaded: its HLS and WebRTC links, history and start
  // time are only in the status document (HLS once its first segment is cut), so read that
  // now and again a little later.
  var linksTimer = null;
  function refreshLinksSoon() {
    loadStatus(false);
    if (linksTimer !== null) return;
    linksTimer = setTimeout(function () { linksTimer = null; loadStatus(false); }, 6000);
  }

  function connectEvents() {
    if (!window.EventSource) { startPolling(); return; }
    var opened = false;
    var es = new EventSource("/api/v1/events");
    es.addEventListener("open", function () {
      // Mounts that ended between the last status read (the page's first, or the one before
      // a reconnect) and this subscription sent no `mount_stop` to this page: read it again.
      loadStatus(true);
      opened = true;
      if (pollTimer !== null) { clearInterval(pollTimer); pollTimer = null; }
    });
    es.addEventListener("mount", function (e) {
      var m = parse(e);
      var card = m && m.mount && cards.get(m.mount);
      var isNew = m && m.mount && (!card || card.classList.contains("ended"));
      upsertMount(m, true);
      if (isNew) refreshLinksSoon();
    });
    es.addEventListener("title", function (e) {
      var d = parse(e);
      var card = d && cards.get(d.mount);
      if (!card) return;
      var s = state.get(d.mount) || {};
      s.title = d.title;
      s.artist = d.artist;
      s.artwork = d.artwork || null;
      if (d.title && (!s.history || !s.history[0] || s.history[0].title !== d.title)) {
        s.history = [{ title: d.title, at_unix: d.at_unix || Math.floor(Date.now() / 1000), artwork: d.artwork }].concat(s.history || []).slice(0, 10);
        renderHistory(card, s.history);
      }
      setTitle(card, d.title, d.artist, d.artwork);
      if (active && active.name === d.mount) updateMediaSession();
    });
    es.addEventListener("listeners", function (e) {
      var d = parse(e);
      var card = d && cards.get(d.mount);
      if (card) setListeners(card, d.listeners);
    });
    es.addEventListener("mount_stop", function (e) {
      var d = parse(e);
      if (d) mountStopped(d.mount);
    });
    es.addEventListener("error", function () {
      // Never opened: no event stream here; poll the status document instead. Once opened,
      // the browser reconnects by itself (`retry:`), resuming with Last-Event-ID.
      if (!opened) { es.close(); startPolling(); }
    });
  }

  loadStatus(false).then(function () {
    // A shared link (`/#/live.mp3`) scrolls to its mount's card.
    if (location.hash.length > 1) {
      var card = cards.get(decodeURIComponent(location.hash.slice(1)));
      if (card) card.scrollIntoView();
    }
    connectEvents();
  });
})();
