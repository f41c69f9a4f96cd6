// Performance tab: for each checked sweep, throughput (left axis) and p50/p99 latency (right
// axis) against concurrency, or against the offered rate for fixed-rate sweeps, from the JSON
// the runs partial embeds; redrawn when htmx swaps in fresh results, so a running sweep's chart
// grows level by level. Also shows the sweep form's fields for the chosen mode.
(function () {
  "use strict";
  var chart = null;
  var COLOURS = ["#0172ad", "#c2410c", "#15803d", "#7c3aed", "#b45309", "#0e7490"];

  function runs() {
    var node = document.getElementById("perf-data");
    return node ? JSON.parse(node.textContent) : [];
  }
  function checked() {
    var ids = {};
    document.querySelectorAll("[data-run-toggle]").forEach(function (box) { if (box.checked) ids[box.getAttribute("data-run-toggle")] = true; });
    return ids;
  }
  function fmt(unit, digits) {
    return function (u, v) { return v == null ? "–" : v.toFixed(digits) + " " + unit; };
  }
  function modeOf(run) { return run.plan && run.plan.mode === "rate" ? "rate" : "concurrency"; }
  // A fixed-rate level sits at its offered rate, a fixed-concurrency one at its clients.
  function xOf(mode, level) { return mode === "rate" ? level.offered_rps : level.concurrency; }
  // Title, x axis label and the chart's spoken description, per mode (gettext: jsi18n).
  var TITLES = {
    concurrency: [gettext("Throughput and latency by concurrency"), gettext("concurrent clients"),
      gettext("Throughput (requests per second, left axis) and p50/p99 latency (milliseconds, right axis) for each number of concurrent clients")],
    rate: [gettext("Throughput and latency by offered rate"), gettext("offered rate (req/s)"),
      gettext("Achieved and offered throughput (requests per second, left axis) and p50/p99 latency from the scheduled time (milliseconds, right axis) for each offered request rate")],
  };
  // Sweeps of the other mode that are ticked but not drawn: one whole sentence per mode.
  function skippedNote(mode, skipped) {
    var text = mode === "rate" ?
      ngettext("%(n)s ticked sweep at fixed concurrency not drawn: the two kinds have different x axes; untick the others to see it.",
        "%(n)s ticked sweeps at fixed concurrency not drawn: the two kinds have different x axes; untick the others to see them.", skipped) :
      ngettext("%(n)s ticked sweep at fixed rate not drawn: the two kinds have different x axes; untick the others to see it.",
        "%(n)s ticked sweeps at fixed rate not drawn: the two kinds have different x axes; untick the others to see them.", skipped);
    return " " + interpolate(text, { n: skipped }, true);
  }
  function label(box, mode, skipped) {
    var title = document.querySelector("[data-chart-title]");
    if (title) title.textContent = TITLES[mode][0];
    box.setAttribute("aria-label", TITLES[mode][2]);
    document.querySelectorAll("[data-chart-help]").forEach(function (node) { node.hidden = node.getAttribute("data-chart-help") !== mode; });
    var note = document.querySelector("[data-chart-skipped]");
    if (note) {
      note.hidden = !skipped;
      note.textContent = skipped ? skippedNote(mode, skipped) : "";
    }
  }
  function draw() {
    var box = document.getElementById("perf-chart");
    if (!box || typeof uPlot === "undefined") return;
    var all = runs();
    syncStartButton(all);
    var wanted = checked();
    var ticked = all.filter(function (r) { return wanted[String(r.id)] && r.levels.length; });
    // The newest ticked sweep decides the x axis; sweeps of the other mode wait their turn.
    var mode = ticked.length ? modeOf(ticked[0]) : "concurrency";
    var shown = ticked.filter(function (r) { return modeOf(r) === mode; });
    label(box, mode, ticked.length - shown.length);
    // One shared x array (levels of every shown run); gaps where a run has none.
    var xs = [];
    shown.forEach(function (r) { r.levels.forEach(function (l) { var x = xOf(mode, l); if (xs.indexOf(x) < 0) xs.push(x); }); });
    xs.sort(function (a, b) { return a - b; });
    // Levels are evenly spaced (1, 2, 4 ... reads better than a linear axis): x is the index.
    var positions = xs.map(function (x, i) { return i; });
    var data = [positions];
    var atX = mode === "rate" ? gettext("%(x)s req/s offered") : gettext("%(x)s clients");
    var series = [{ label: mode === "rate" ? gettext("rate") : gettext("concurrency"), value: function (u, v) { return v == null || xs[v] == null ? "" : interpolate(atX, { x: String(xs[v]) }, true); } }];
    if (mode === "rate" && shown.length) {
      // The offered rate itself: achieved throughput on this line means the model kept up.
      data.push(xs.slice());
      series.push({ label: gettext("offered (all kept up)"), stroke: "#9ca3af", width: 1, scale: "rps", points: { show: false }, value: fmt("req/s", 1) });
    }
    shown.forEach(function (r, i) {
      var colour = COLOURS[i % COLOURS.length];
      var name = "v" + r.version + " #" + r.id;
      function column(pick) {
        return xs.map(function (x) {
          var level = r.levels.filter(function (l) { return xOf(mode, l) === x; })[0];
          return level ? pick(level) : null;
        });
      }
      data.push(column(function (l) { return l.throughput_rps; }));
      series.push({ label: mode === "rate" ? interpolate(gettext("%(name)s achieved"), { name: name }, true) : name + " req/s", stroke: colour, width: 3, scale: "rps", spanGaps: true,
        points: { show: true, size: 8 }, value: fmt("req/s", 1) });
      data.push(column(function (l) { return l.latency ? l.latency.p50_ms : null; }));
      series.push({ label: name + " p50", stroke: colour, width: 1.5, dash: [2, 3], scale: "ms", spanGaps: true,
        points: { show: true, size: 5 }, value: fmt("ms", 2) });
      data.push(column(function (l) { return l.latency ? l.latency.p99_ms : null; }));
      series.push({ label: name + " p99", stroke: colour, width: 1.5, dash: [8, 4], scale: "ms", spanGaps: true,
        points: { show: true, size: 5 }, value: fmt("ms", 2) });
    });
    if (chart) { chart.destroy(); chart = null; }
    box.replaceChildren();
    if (!shown.length) {
      var note = document.createElement("p");
      note.className = "muted";
      note.textContent = gettext("Tick a sweep below to draw it here.");
      box.replaceChildren(note);
      box.setAttribute("data-drawn", "0");
      return;
    }
    chart = new uPlot({
      width: Math.max(280, box.clientWidth),
      height: 300,
      scales: { x: { time: false, range: function () { return [-0.3, Math.max(positions.length - 1, 0) + 0.3]; } }, rps: { range: function (u, min, max) { return [0, max * 1.1 || 1]; } }, ms: { range: function (u, min, max) { return [0, max * 1.1 || 1]; } } },
      axes: [
        { label: TITLES[mode][1], splits: function () { return positions; }, values: function (u, vals) { return vals.map(function (v) { return xs[v] == null ? "" : String(xs[v]); }); } },
        { label: gettext("throughput (req/s)"), scale: "rps", size: 60 },
        { label: gettext("latency (ms)"), scale: "ms", side: 1, size: 60, grid: { show: false } },
      ],
      series: series,
    }, data, box);
    box.setAttribute("data-drawn", String(shown.length));
  }
  function syncStartButton(all) {
    var button = document.querySelector("[data-start-sweep]");
    if (!button) return;
    var busy = all.some(function (r) { return r.state === "queued" || r.state === "running"; });
    button.disabled = busy;
    button.textContent = busy ? gettext("A sweep is running") : gettext("Start sweep");
  }
  // The sweep form: only the chosen mode's fields and explanation are shown (without script,
  // both are, and the mode's radio decides which fields the server reads).
  function syncMode() {
    var picked = document.querySelector("[data-sweep-mode]:checked");
    if (!picked) return;
    document.querySelectorAll("[data-sweep-for]").forEach(function (node) {
      node.hidden = node.getAttribute("data-sweep-for") !== picked.value;
    });
  }
  document.addEventListener("DOMContentLoaded", syncMode);
  document.addEventListener("change", function (e) { if (e.target.hasAttribute && e.target.hasAttribute("data-sweep-mode")) syncMode(); });
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("change", function (e) { if (e.target.hasAttribute && e.target.hasAttribute("data-run-toggle")) draw(); });
  document.addEventListener("htmx:afterSwap", function (e) { if (e.target.id === "perf-runs") draw(); });
  window.addEventListener("resize", function () { if (chart) draw(); });
})();
