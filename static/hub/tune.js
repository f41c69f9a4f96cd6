// "Find the best config": every measured trial as a point, throughput (up) against p99 latency
// (right), the objective's limit as a dashed line, the best trial ringed. Plain SVG: a dozen
// points need no charting library. Redrawn whenever htmx swaps in a fresh panel.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var W = 640, H = 280, L = 62, R = 16, T = 14, B = 46;

  function el(name, attrs, text) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs).forEach(function (k) { node.setAttribute(k, attrs[k]); });
    if (text != null) node.textContent = text;
    return node;
  }
  function nice(max) {
    if (!(max > 0)) return 1;
    var step = Math.pow(10, Math.floor(Math.log10(max)));
    var m = max / step;
    return (m <= 1 ? 1 : m <= 2 ? 2 : m <= 5 ? 5 : 10) * step;
  }
  function draw() {
    var box = document.getElementById("tune-chart");
    var source = document.getElementById("tune-data");
    if (!box || !source) return;
    var data = JSON.parse(source.textContent);
    var points = data.trials.filter(function (t) { return t.state === "measured" && t.p99_ms != null && t.throughput_rps != null; });
    box.replaceChildren();
    if (!points.length) {
      var note = document.createElement("p");
      note.className = "muted";
      note.textContent = gettext("No trial measured yet.");
      box.appendChild(note);
      return;
    }
    var limit = data.objective.kind === "throughput" ? data.objective.p99_ms : null;
    var slowest = Math.max.apply(null, points.map(function (p) { return p.p99_ms; }));
    // The budget is drawn only when it is near the points: a far one would squash them.
    var showLimit = limit && limit <= slowest * 3;
    var xmax = nice(Math.max(slowest * 1.2, showLimit ? limit * 1.1 : 0));
    // The latency objective's limit is a rate: a trial must complete 95% of it to count.
    var floor = data.objective.kind === "latency" ? data.objective.rate_rps * 0.95 : null;
    var ymax = nice(Math.max.apply(null, points.map(function (p) { return p.throughput_rps; }).concat(floor ? [floor * 1.1] : [])) * 1.1);
    function x(v) { return L + (W - L - R) * v / xmax; }
    function y(v) { return H - B - (H - T - B) * v / ymax; }
    var svg = el("svg", { viewBox: "0 0 " + W + " " + H, class: "tune-svg", "data-points": String(points.length) });
    for (var i = 0; i <= 4; i++) {
      var gy = ymax * i / 4, gx = xmax * i / 4;
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(gy), y2: y(gy), class: "grid" }));
      svg.appendChild(el("text", { x: L - 6, y: y(gy) + 4, "text-anchor": "end", class: "tick" }, String(+gy.toPrecision(3))));
      svg.appendChild(el("text", { x: x(gx), y: H - B + 16, "text-anchor": "middle", class: "tick" }, String(+gx.toPrecision(3))));
    }
    svg.appendChild(el("text", { x: (L + W - R) / 2, y: H - 8, "text-anchor": "middle", class: "axis" }, gettext("p99 latency (ms)")));
    svg.appendChild(el("text", { x: 14, y: (T + H - B) / 2, "text-anchor": "middle", class: "axis", transform: "rotate(-90 14 " + (T + H - B) / 2 + ")" }, gettext("throughput (req/s)")));
    if (showLimit) {
      svg.appendChild(el("line", { x1: x(limit), x2: x(limit), y1: T, y2: H - B, class: "limit" }));
      svg.appendChild(el("text", { x: x(limit) - 4, y: T + 10, "text-anchor": "end", class: "limit-label" }, interpolate(gettext("p99 budget %(limit)s ms"), { limit: limit }, true)));
    } else if (limit) {
      svg.appendChild(el("text", { x: W - R, y: T + 10, "text-anchor": "end", class: "limit-label" }, interpolate(gettext("p99 budget %(limit)s ms, off the chart →"), { limit: limit }, true)));
    }
    if (floor) {
      svg.appendChild(el("line", { x1: L, x2: W - R, y1: y(floor), y2: y(floor), class: "limit" }));
      svg.appendChild(el("text", { x: W - R, y: y(floor) - 5, "text-anchor": "end", class: "limit-label" }, interpolate(gettext("%(share)s of %(rate)s req/s asked"), { share: "95%", rate: data.objective.rate_rps }, true)));
    }
    points.forEach(function (p) {
      var best = p.index === data.best;
      var dot = el("circle", { cx: x(p.p99_ms), cy: y(p.throughput_rps), r: best ? 7 : 5, class: best ? "dot best" : (p.index === 0 ? "dot serving" : "dot") });
      dot.appendChild(el("title", {}, "#" + p.index + " " + p.label + ": " + p.throughput_rps.toFixed(1) + " req/s, p99 " + p.p99_ms.toFixed(2) + " ms"));
      svg.appendChild(dot);
      svg.appendChild(el("text", { x: x(p.p99_ms) + 9, y: y(p.throughput_rps) + 4, class: "dot-label" }, p.index === 0 ? gettext("#0 serving") : "#" + p.index));
    });
    box.appendChild(svg);
  }
  document.addEventListener("DOMContentLoaded", draw);
  document.body && document.body.addEventListener("htmx:afterSwap", draw);
  document.addEventListener("htmx:afterSettle", draw);
})();
