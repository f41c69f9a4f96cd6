// Metrics tab: four uPlot charts (throughput, latency split, failures, pending) of the series
// GET /api/v1/models/{name}/metrics answers, one line per version so a switch shows both.
// The page embeds the first answer; each "metrics" push (a scrape was stored) fetches it
// again, and polling every scrape interval covers a closed websocket.
(function () {
  "use strict";
  var VERSION_COLOURS = ["#0172ad", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0e7490"];
  // Each phase's legend label names the version too: one whole label per msgid.
  var PHASES = [
    ["queue_ms", gettext("%(version)s queue"), "#c2410c"],
    ["compute_input_ms", gettext("%(version)s compute input"), "#7c3aed"],
    ["compute_infer_ms", gettext("%(version)s compute infer"), "#0172ad"],
    ["compute_output_ms", gettext("%(version)s compute output"), "#15803d"],
  ];
  var DASHES = [undefined, [6, 4], [2, 3], [10, 3, 2, 3]];
  var charts = {};
  var shapes = {};
  var lastLive = 0;
  var box, clientSide;

  function fmt(unit, digits) {
    return function (u, v) { return v == null ? "–" : v.toFixed(digits) + " " + unit; };
  }
  // A value followed by a word rather than a unit: the word order is the translation's.
  function fmtWords(text, digits) {
    return function (u, v) { return v == null ? "–" : interpolate(text, { n: v.toFixed(digits) }, true); };
  }
  function named(text, name) { return interpolate(text, { version: name }, true); }
  function colour(i) { return VERSION_COLOURS[i % VERSION_COLOURS.length]; }

  // One shared x array (every t of every version) and, per version, a column aligned to it.
  function table(data) {
    var seen = {};
    var xs = [];
    var rows = {};
    data.versions.forEach(function (v) { rows[v] = {}; });
    data.points.forEach(function (p) {
      if (!seen[p.t]) { seen[p.t] = true; xs.push(p.t); }
      (rows[p.version] = rows[p.version] || {})[p.t] = p;
    });
    xs.sort(function (a, b) { return a - b; });
    return {
      xs: xs,
      column: function (version, key) {
        return xs.map(function (t) { var p = rows[version][t]; return p ? p[key] : null; });
      },
    };
  }

  function specs(data) {
    var v = data.versions;
    var tp = [], lat = [], fail = [], pend = [];
    v.forEach(function (version, i) {
      var name = "v" + version;
      if (clientSide) {
        tp.push({ version: version, key: "client_requests_per_s", label: named(gettext("%(version)s calls"), name), stroke: colour(i), unit: "/s", digits: 2 });
        lat.push({ version: version, key: "client_latency_ms", label: named(gettext("%(version)s call latency"), name), stroke: colour(i), unit: "ms", digits: 2, span: true });
        fail.push({ version: version, key: "client_failures_per_s", label: named(gettext("%(version)s failed calls"), name), stroke: colour(i), unit: "/s", digits: 2 });
      } else {
        tp.push({ version: version, key: "requests_per_s", label: named(gettext("%(version)s requests"), name), stroke: colour(i), unit: "req/s", digits: 2 });
        tp.push({ version: version, key: "inferences_per_s", label: named(gettext("%(version)s inferences"), name), stroke: colour(i), dash: [6, 4], unit: "inf/s", digits: 2 });
        PHASES.forEach(function (phase) {
          lat.push({ version: version, key: phase[0], label: named(phase[1], name), stroke: phase[2], dash: DASHES[i % DASHES.length], unit: "ms", digits: 3, span: true });
        });
        fail.push({ version: version, key: "failures_per_s", label: named(gettext("%(version)s failures"), name), stroke: colour(i), unit: "/s", digits: 2 });
      }
      pend.push({ version: version, key: "pending", label: named(gettext("%(version)s pending"), name), stroke: colour(i), words: gettext("%(n)s requests"), digits: 0 });
    });
    return {
      "chart-throughput": { axis: clientSide ? gettext("calls/s") : gettext("per second"), series: tp },
      "chart-latency": { axis: gettext("milliseconds"), series: lat },
      "chart-failures": { axis: gettext("failures/s"), series: fail },
      "chart-pending": { axis: gettext("requests waiting"), series: pend },
    };
  }

  function empty(el, text) {
    if (charts[el.id]) { charts[el.id].destroy(); delete charts[el.id]; delete shapes[el.id]; }
    var note = document.createElement("p");
    note.className = "chart-empty";
    note.textContent = text;
    el.replaceChildren(note);
  }

  function drawOne(el, spec, tab, data) {
    var shape = spec.series.map(function (s) { return s.label; }).join("|");
    var values = [tab.xs];
    spec.series.forEach(function (s) { values.push(tab.column(s.version, s.key)); });
    if (charts[el.id] && shapes[el.id] === shape) {
      charts[el.id].setData(values);
      return;
    }
    if (charts[el.id]) charts[el.id].destroy();
    el.replaceChildren();
    var series = [{}].concat(spec.series.map(function (s) {
      return {
        // An average latency does not exist where nothing was served: join across the gap.
        label: s.label, stroke: s.stroke, dash: s.dash, width: 1.75, spanGaps: !!s.span,
        points: { show: data.points.length < 40, size: 4 }, value: s.words ? fmtWords(s.words, s.digits) : fmt(s.unit, s.digits),
      };
    }));
    charts[el.id] = new uPlot({
      width: Math.max(260, el.clientWidth),
      height: 220,
      scales: { x: { time: true }, y: { range: function (u, min, max) { return [0, max > 0 ? max * 1.1 : 1]; } } },
      axes: [{ label: gettext("local time"), labelSize: 20 }, { label: spec.axis, size: 64 }],
      series: series,
      legend: { live: true },
    }, values, el);
    shapes[el.id] = shape;
  }

  function draw(data) {
    if (typeof uPlot === "undefined") return;
    var tab = table(data);
    var all = specs(data);
    Object.keys(all).forEach(function (id) {
      var el = document.getElementById(id);
      if (!el) return;
      if (!tab.xs.length) {
        empty(el, interpolate(gettext("No data in %(range)s yet. Numbers appear two scrapes (about %(seconds)s s) after Triton serves the model and the worker and beat run."),
          { range: data.range, seconds: 2 * data.scrape_seconds }, true));
        return;
      }
      drawOne(el, all[id], tab, data);
    });
    box.setAttribute("data-points", String(data.points.length));
    box.setAttribute("data-total-requests", String(data.totals.requests));
    box.setAttribute("data-total-client", String(data.totals.client_requests));
    box.setAttribute("data-versions", data.versions.join(","));
  }

  function refresh() {
    fetch(box.getAttribute("data-api"), { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then(function (r) { return r.ok ? r.json() : Promise.reject(new Error("HTTP " + r.status)); })
      .then(function (data) { box.removeAttribute("data-error"); draw(data); })
      .catch(function (err) { box.setAttribute("data-error", String(err)); });
  }

  document.addEventListener("DOMContentLoaded", function () {
    box = document.getElementById("metrics-charts");
    var node = document.getElementById("metrics-data");
    if (!box || !node) return;
    clientSide = box.getAttribute("data-client-side") === "1";
    draw(JSON.parse(node.textContent));
    var poll = Math.max(1, Number(box.getAttribute("data-poll")) || 10) * 1000;
    document.body.addEventListener("live:metrics", function () { lastLive = Date.now(); refresh(); });
    setInterval(function () { if (Date.now() - lastLive > poll * 1.5) refresh(); }, poll);
    window.addEventListener("resize", function () {
      Object.keys(charts).forEach(function (id) {
        var el = document.getElementById(id);
        if (el) charts[id].setSize({ width: Math.max(260, el.clientWidth), height: 220 });
      });
    });
  });
})();
