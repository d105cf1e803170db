// Tendril dashboard: progressive enhancement only. Every page works without
// this file. Untrusted text is inserted with textContent; the only HTML
// inserted is what the server rendered and sanitised ("html" and "card").
(function () {
  "use strict";
  var csrf = (document.querySelector('meta[name="csrf-token"]') || {}).content || "";
  var i18n = (document.getElementById("i18n") || { dataset: {} }).dataset;

  function el(tag, cls, text) {
    var e = document.createElement(tag);
    if (cls) e.className = cls;
    if (text !== undefined) e.textContent = text;
    return e;
  }

  function post(url, body) {
    return fetch(url, {
      method: "POST", credentials: "same-origin", body: body,
      headers: { "X-CSRF-Token": csrf, "Accept": "application/json" }
    });
  }

  // ---- Chat ----
  var form = document.getElementById("chat-form");
  var transcript = document.getElementById("transcript");
  if (form && transcript) {
    var send = document.getElementById("send");
    var stop = document.getElementById("stop");
    var approvals = document.getElementById("inline-approvals");
    var current = null;

    function message(role, label) {
      var empty = transcript.querySelector(".empty");
      if (empty) empty.remove();
      var m = el("div", "msg " + role);
      m.appendChild(el("span", "who", label));
      transcript.appendChild(m);
      return m;
    }

    function finish() {
      if (current && current.es) current.es.close();
      current = null;
      send.disabled = false;
      stop.hidden = true;
    }

    form.addEventListener("submit", function (ev) {
      ev.preventDefault();
      if (current) return;
      var data = new URLSearchParams(new FormData(form));
      var text = data.get("message");
      if (!text) return;
      var u = message("user", i18n.you);
      u.appendChild(el("div", "msg-text", text));
      var a = message("assistant", i18n.assistant);
      a.setAttribute("aria-busy", "true");
      var tools = el("div", "tools");
      var body = el("div", "msg-text reply streaming", "");
      var status = el("small", "status", i18n.thinking);
      a.appendChild(tools); a.appendChild(body); a.appendChild(status);
      send.disabled = true;
      post("/chat/turns", data).then(function (r) { return r.json().then(function (j) { return { ok: r.ok, j: j }; }); })
        .then(function (res) {
          if (!res.ok || !res.j.ok) throw new Error(res.j.message || "request failed");
          form.reset();
          stop.hidden = false;
          var es = new EventSource(res.j.events);
          current = { es: es, stop: res.j.stop };
          var toolEls = {};
          es.onmessage = function (e) {
            var m = JSON.parse(e.data);
            if (m.type === "delta") {
              body.textContent += m.text;
            } else if (m.type === "tool") {
              var t = toolEls[m.id];
              if (!t) {
                t = el("div", "tool");
                t.appendChild(el("span", "tool-name", i18n.tool + ": " + m.name));
                toolEls[m.id] = t;
                tools.appendChild(t);
              }
              if (m.phase === "call") t.appendChild(el("pre", "args", m.args));
              if (m.phase === "result") {
                var r = el("pre", "result" + (m.is_error ? " error" : ""), m.result);
                t.appendChild(el("span", "tool-name", i18n.result));
                t.appendChild(r);
              }
              if (m.phase === "pending") t.appendChild(el("small", "warn", i18n.waiting + " (" + m.request_id + ")"));
            } else if (m.type === "final") {
              a.removeAttribute("aria-busy");
              status.textContent = "";
              if (m.html !== undefined) { body.classList.remove("streaming"); body.innerHTML = m.html; }
              if (m.card) approvals.insertAdjacentHTML("beforeend", m.card);
              if (!m.ok && !m.card) status.textContent = (m.stopped ? "" : i18n.failed + ": ") + m.message;
              if (!m.ok && m.card) status.textContent = i18n.waiting;
              a.dataset.done = m.ok ? "ok" : (m.stopped ? "stopped" : (m.card ? "pending" : "error"));
              finish();
            }
          };
          es.onerror = function () { if (!current) es.close(); };
        })
        .catch(function (err) { status.textContent = i18n.failed + ": " + err.message; a.dataset.done = "error"; finish(); });
    });

    stop.addEventListener("click", function () {
      if (current && current.stop) post(current.stop, new URLSearchParams());
    });

    // Replies that arrive later (a turn resumed after an approval).
    var actor = transcript.dataset.actor;
    if (actor && window.EventSource) {
      var ds = new EventSource("/chat/deliveries?actor=" + encodeURIComponent(actor));
      ds.onmessage = function (e) {
        var m = JSON.parse(e.data);
        var d = message("assistant delivered", i18n.delivered);
        var b = el("div", "msg-text reply");
        b.innerHTML = m.html;
        d.appendChild(b);
      };
    }
  }

  // ---- Countdowns (approval expiry, YOLO window) ----
  // Looked up on every tick: an approval card inserted by the chat after
  // the page loaded counts down too.
  if (document.querySelector("[data-expires]") || form) {
    var tick = function () {
      var now = Date.now() / 1000;
      document.querySelectorAll("[data-expires]").forEach(function (t) {
        var left = Math.round(Number(t.dataset.expires) - now);
        var base = t.dataset.base || (t.dataset.base = t.textContent);
        if (left <= 0) { t.textContent = base + " (0s)"; t.classList.add("error"); return; }
        var m = Math.floor(left / 60), s = left % 60;
        t.textContent = base + " (" + (m ? m + "m " : "") + s + "s)";
      });
    };
    tick();
    setInterval(tick, 1000);
  }

  // ---- State: the "Numbers" toggle ----
  var toggle = document.getElementById("numbers-toggle");
  if (toggle) {
    toggle.addEventListener("click", function (ev) {
      ev.preventDefault();
      var fig = document.getElementById("figure"), num = document.getElementById("numbers");
      var show = num.hidden;
      num.hidden = !show;
      fig.hidden = show;
      toggle.setAttribute("aria-pressed", show ? "true" : "false");
    });
    toggle.addEventListener("keydown", function (ev) { if (ev.key === " ") { ev.preventDefault(); toggle.click(); } });
  }

  // ---- Settings: live log ----
  var log = document.getElementById("log");
  if (log && log.dataset.stream && window.EventSource) {
    var ls = new EventSource(log.dataset.stream);
    ls.onmessage = function (e) {
      log.appendChild(document.createTextNode(JSON.parse(e.data).line + "\n"));
      log.scrollTop = log.scrollHeight;
    };
  }
})();
