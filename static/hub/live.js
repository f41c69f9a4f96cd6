// Live updates: one websocket per page. Elements with data-live-topic="X" subscribe to X;
// each event is re-dispatched on <body> as "live:X", which htmx triggers listen for
// (hx-trigger="live:X from:body"). Polling in those triggers covers a closed socket.
(function () {
  "use strict";
  function topics() {
    var found = {};
    document.querySelectorAll("[data-live-topic]").forEach(function (el) {
      el.getAttribute("data-live-topic").split(/\s+/).forEach(function (t) { if (t) found[t] = true; });
    });
    return Object.keys(found);
  }
  function connect(wanted, delay) {
    var scheme = location.protocol === "https:" ? "wss://" : "ws://";
    var socket = new WebSocket(scheme + location.host + "/ws/live/");
    socket.onopen = function () { delay = 1000; socket.send(JSON.stringify({ subscribe: wanted })); };
    socket.onmessage = function (message) {
      var event;
      try { event = JSON.parse(message.data); } catch (e) { return; }
      if (event.topic) {
        document.body.dispatchEvent(new CustomEvent("live:" + event.topic, { detail: event.data }));
      }
    };
    socket.onclose = function () {
      // Back off up to 30 s; the page keeps polling meanwhile.
      setTimeout(function () { connect(wanted, Math.min(delay * 2, 30000)); }, delay);
    };
  }
  document.addEventListener("DOMContentLoaded", function () {
    var wanted = topics();
    if (wanted.length && "WebSocket" in window) connect(wanted, 1000);
  });
})();
