// Performance tab: draws throughput (x) against p50/p99 latency (y) for the checked sweeps,
// from the JSON the runs partial embeds; redraws when htmx swaps in fresh results.
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
  function draw() {
    var box = document.getElementById("perf-chart");
    if (!box || typeof uPlot === "undefined") return;
    var wanted = checked();
    var shown = runs().filter(function (r) { return wanted[String(r.id)] && r.levels.length; });
    // uPlot wants one shared x array: merge every run's throughput values, null elsewhere.
    var xs = [];
    shown.forEach(function (r) { r.levels.forEach(function (l) { xs.push(l.throughput_rps); }); });
    xs = xs.filter(function (v, i, all) { return all.indexOf(v) === i; }).sort(function (a, b) { return a - b; });
    var data = [xs];
    var series = [{ label: "req/s", value: function (u, v) { return v == null ? "" : v.toFixed(1) + " req/s"; } }];
    shown.forEach(function (r, i) {
      var colour = COLOURS[i % COLOURS.length];
      ["p50_ms", "p99_ms"].forEach(function (key) {
        var ys = xs.map(function (x) {
          var level = r.levels.filter(function (l) { return l.throughput_rps === x && l.latency; })[0];
          return level ? level.latency[key] : null;
        });
        data.push(ys);
        series.push({
          label: "v" + r.version + " #" + r.id + " " + key.replace("_ms", ""),
          stroke: colour,
          dash: key === "p99_ms" ? [6, 4] : undefined,
          width: 2,
          spanGaps: true,
          points: { show: true, size: 7 },
          value: function (u, v) { return v == null ? "" : v.toFixed(2) + " ms"; },
        });
      });
    });
    if (chart) { chart.destroy(); chart = null; }
    box.innerHTML = "";
    if (!shown.length) {
      box.innerHTML = '<p class="muted">Tick a sweep below to draw it here.</p>';
      return;
    }
    chart = new uPlot({
      width: Math.max(280, box.clientWidth),
      height: 320,
      scales: { x: { time: false } },
      axes: [
        { label: "throughput (req/s)" },
        { label: "latency (ms)", size: 60 },
      ],
      series: series,
    }, data, box);
    box.setAttribute("data-drawn", String(shown.length));
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.addEventListener("change", function (e) { if (e.target.hasAttribute && e.target.hasAttribute("data-run-toggle")) draw(); });
  document.addEventListener("htmx:afterSwap", function (e) { if (e.target.id === "perf-runs") draw(); });
  window.addEventListener("resize", function () { if (chart) draw(); });
})();
