// Throng Go-live page (/admin/ui/golive): publish an input of this computer to a mount over
// WebRTC with WHIP (RFC 9725). Standards only (getUserMedia, enumerateDevices, WebAudio,
// RTCPeerConnection, fetch), no build step; works in Chromium and Firefox.
// 1. Input: the device list (labels appear once the page may use the microphone); a choice
//    reopens the input. The level meter shows its peak level (an AnalyserNode).
// 2. Go live: an RTCPeerConnection sending the input's track; its offer is POSTed to
//    /whip/<mount> with the source user and password (HTTP Basic); the 201's SDP answer is
//    applied and its Location kept. Stop DELETEs that resource, with the same credentials.
// 3. A connection that fails or stays disconnected for 3 s is replaced by a new POST with the
//    same credentials: the server keeps the mount and its listeners through it.
// 4. Listeners: the mount's count from /api/v1/status every 2 s.
// State for tests and scripts: window.throngGoLive = { state, lastStatus, resource, pc, stream,
// audio (the meter's AudioContext) }.
// Replace it with <webroot>/static/golive.js.
"use strict";
(function () {
  var $ = function (id) { return document.getElementById(id); };
  var mountInput = $("gl-mount"), userInput = $("gl-user"), passInput = $("gl-password");
  var deviceSelect = $("gl-device"), meter = $("gl-level"), stateLine = $("gl-state");
  var startButton = $("gl-start"), stopButton = $("gl-stop"), listenersOut = $("gl-listeners");
  if (!startButton) return;

  var g = { state: "off", lastStatus: null, resource: null, pc: null, stream: null };
  window.throngGoLive = g;
  var audioCtx = null, analyser = null, sourceNode = null, wanted = false, retryTimer = null;

  function setState(state, text) {
    g.state = state;
    stateLine.dataset.state = state;
    stateLine.textContent = text;
    startButton.disabled = state === "connecting" || state === "live" || state === "reconnecting";
    stopButton.disabled = !startButton.disabled;
  }

  function mountName() {
    var m = mountInput.value.trim();
    return m.charAt(0) === "/" ? m : "/" + m;
  }

  // HTTP Basic of UTF-8 credentials (btoa alone takes Latin-1 only).
  function basic(user, password) {
    var bytes = new TextEncoder().encode(user + ":" + password);
    var s = "";
    for (var i = 0; i < bytes.length; i++) s += String.fromCharCode(bytes[i]);
    return "Basic " + btoa(s);
  }

  // ---- Input and level meter ---------------------------------------------------------------

  function listDevices() {
    if (!navigator.mediaDevices || !navigator.mediaDevices.enumerateDevices) return Promise.resolve();
    return navigator.mediaDevices.enumerateDevices().then(function (devices) {
      var chosen = deviceSelect.value;
      var inputs = devices.filter(function (d) { return d.kind === "audioinput"; });
      deviceSelect.textContent = "";
      inputs.forEach(function (d, i) {
        var o = document.createElement("option");
        o.value = d.deviceId;
        o.textContent = d.label || "Input " + (i + 1);
        deviceSelect.appendChild(o);
      });
      if (!inputs.length) {
        var none = document.createElement("option");
        none.value = "";
        none.textContent = "No input found";
        deviceSelect.appendChild(none);
      }
      if (chosen && inputs.some(function (d) { return d.deviceId === chosen; })) deviceSelect.value = chosen;
    });
  }

  function openInput() {
    if (!navigator.mediaDevices || !navigator.mediaDevices.getUserMedia) {
      setState("error", "This browser cannot capture audio here (it needs HTTPS or localhost).");
      return Promise.reject(new Error("no getUserMedia"));
    }
    var id = deviceSelect.value;
    var audio = { echoCancellation: false, noiseSuppression: false, autoGainControl: false };
    if (id) audio.deviceId = { exact: id };
    return navigator.mediaDevices.getUserMedia({ audio: audio }).then(function (stream) {
      if (g.stream) g.stream.getTracks().forEach(function (t) { t.stop(); });
      g.stream = stream;
      meterOn(stream);
      return listDevices().then(function () { return stream; });
    });
  }

  function meterOn(stream) {
    var AC = window.AudioContext || window.webkitAudioContext;
    if (!AC) return;
    if (!audioCtx) {
      audioCtx = new AC();
      analyser = audioCtx.createAnalyser();
      analyser.fftSize = 1024;
      g.audio = audioCtx;
      draw();
    }
    if (audioCtx.state === "suspended") audioCtx.resume().catch(function () {});
    if (sourceNode) sourceNode.disconnect();
    sourceNode = audioCtx.createMediaStreamSource(stream);
    sourceNode.connect(analyser);
  }

  function draw() {
    var buf = new Float32Array(analyser.fftSize);
    var shown = 0;
    (function frame() {
      analyser.getFloatTimeDomainData(buf);
      var peak = 0;
      for (var i = 0; i < buf.length; i++) peak = Math.max(peak, Math.abs(buf[i]));
      // Falls back slowly, as a level meter does.
      shown = Math.max(peak, shown * 0.9);
      meter.value = Math.min(1, shown);
      // rAF pauses in a hidden tab; the timer keeps the meter alive there (and headless).
      setTimeout(frame, 50);
    })();
  }

  // Browsers start an AudioContext suspended until the user acts on the page (Firefox's
  // autoplay policy): any press resumes the meter.
  document.addEventListener("pointerdown", function () {
    if (audioCtx && audioCtx.state === "suspended") audioCtx.resume().catch(function () {});
  });

  deviceSelect.addEventListener("change", function () {
    openInput().then(function (stream) {
      if (!g.pc) return;
      var sender = g.pc.getSenders()[0];
      if (sender) sender.replaceTrack(stream.getAudioTracks()[0]);
    }).catch(function (e) { setState(g.state, "Input: " + e.message); });
  });

  // ---- WHIP --------------------------------------------------------------------------------

  function publish() {
    var mount = mountName();
    var track = g.stream && g.stream.getAudioTracks()[0];
    if (!track) return Promise.reject(new Error("no input"));
    var pc = new RTCPeerConnection();
    g.pc = pc;
    pc.addTransceiver(track, { direction: "sendonly", streams: [g.stream] });
    pc.addEventListener("connectionstatechange", function () {
      if (g.pc !== pc || !wanted) return;
      var s = pc.connectionState;
      if (s === "connected") setState("live", "Live on " + mount);
      if (s === "failed") reconnect(0);
      if (s === "disconnected") reconnect(3000);
    });
    return pc.createOffer()
      .then(function (offer) { return pc.setLocalDescription(offer); })
      .then(function () {
        return fetch("/whip" + mount, {
          method: "POST",
          headers: {
            "Content-Type": "application/sdp",
            "Authorization": basic(userInput.value, passInput.value),
          },
          body: pc.localDescription.sdp,
        });
      })
      .then(function (r) {
        g.lastStatus = r.status;
        if (r.status !== 201) {
          return r.text().then(function (t) {
            var why = r.status === 401 ? "wrong source user or password" : t.trim();
            var e = new Error(r.status + ": " + why);
            e.status = r.status;
            throw e;
          });
        }
        var loc = r.headers.get("Location");
        g.resource = loc ? new URL(loc, location.href).href : null;
        return r.text();
      })
      .then(function (sdp) {
        if (g.pc !== pc || !wanted) { pc.close(); return; }
        return pc.setRemoteDescription({ type: "answer", sdp: sdp });
      })
      .catch(function (e) {
        if (g.pc === pc) g.pc = null;
        pc.close();
        throw e;
      });
  }

  function reconnect(after) {
    if (retryTimer) return;
    setState("reconnecting", "Connection lost: reconnecting…");
    retryTimer = setTimeout(function () {
      retryTimer = null;
      var old = g.pc;
      if (!wanted || (old && old.connectionState === "connected")) return;
      if (old) old.close();
      g.pc = null;
      publish().catch(function (e) {
        if (!wanted) return;
        if (e.status === 401 || e.status === 403 || e.status === 404) {
          wanted = false;
          setState("error", "Could not go live again: " + e.message);
        } else {
          reconnect(2000);
        }
      });
    }, after);
  }

  startButton.addEventListener("click", function () {
    if (!mountInput.value.trim()) { setState("error", "Which mount?"); return; }
    wanted = true;
    setState("connecting", "Connecting…");
    var ready = g.stream ? Promise.resolve(g.stream) : openInput();
    ready.then(publish).catch(function (e) {
      wanted = false;
      setState("error", "Not live: " + e.message);
    });
  });

  stopButton.addEventListener("click", function () {
    wanted = false;
    if (retryTimer) { clearTimeout(retryTimer); retryTimer = null; }
    var resource = g.resource;
    g.resource = null;
    if (g.pc) { g.pc.close(); g.pc = null; }
    setState("off", "Off air");
    // The publish's credentials end it (the server refuses a DELETE without them).
    if (resource) fetch(resource, { method: "DELETE", headers: deleteHeaders() }).catch(function () {});
  });

  function deleteHeaders() {
    return { "Authorization": basic(userInput.value, passInput.value) };
  }

  window.addEventListener("pagehide", function () {
    if (g.resource && wanted) fetch(g.resource, { method: "DELETE", keepalive: true, headers: deleteHeaders() }).catch(function () {});
  });

  // ---- Listeners ---------------------------------------------------------------------------

  function pollListeners() {
    fetch("/api/v1/status", { cache: "no-store" })
      .then(function (r) { return r.json(); })
      .then(function (doc) {
        var name = mountName();
        var m = (doc.mounts || []).filter(function (x) { return x.mount === name; })[0];
        listenersOut.textContent = m ? String(m.listeners) : "– (not live)";
      })
      .catch(function () {});
  }
  pollListeners();
  setInterval(pollListeners, 2000);

  // Device labels appear once the page may use an input; ask for it up front.
  openInput().catch(function () { listDevices(); });
})();
