// The "Try it" panel's conveniences around a server-rendered form. The form posts through
// htmx to the run view, which answers the result partial (outputs, timing, code snippets,
// errors); this module never builds markup. It puts a dropped, pasted or sample photo into
// the form's file input and shows a preview, fills the preprocessing fields from a preset,
// fills tensors with zeros or random values, runs on Ctrl+Enter, times the round trip, and
// calls the JSON API for the few state changes the panel offers (labels, saved
// preprocessing, loading a version beside the serving one).
import { csrfToken } from "./csrf.js";

var panel = document.querySelector("[data-try-panel]");
var form = document.getElementById("try-form");
var configNode = document.getElementById("try-config");
if (panel && form && configNode) start(JSON.parse(configNode.textContent));

function start(config) {
  var errorBox = form.querySelector("[data-error]");
  var presets = config.presets;

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function showError(message) {
    errorBox.textContent = message || "";
    errorBox.hidden = !message;
  }
  function api(method, path, body, raw) {
    var headers = { "X-CSRFToken": csrfToken() };
    if (!raw) headers["Content-Type"] = "application/json";
    return fetch("/api/v1/models/" + encodeURIComponent(config.model) + path, {
      method: method,
      headers: headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    }).then(function (response) {
      return response.text().then(function (text) {
        var data;
        try { data = JSON.parse(text); } catch (e) { data = { error: interpolate(gettext("The server answered %(status)s without details."), { status: response.status }, true) }; }
        return { ok: response.ok, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: { error: gettext("The dashboard did not answer; check your connection.") } };
    });
  }
  function run() {
    showError("");
    form.requestSubmit();
  }

  // ---------------------------------------------------------------- the result partial
  // A refusal (4xx) or a Triton failure (5xx) still answers the partial: show it. A plain
  // text answer (the body-size guard, a proxy) goes to the error line as text; a whole page
  // (an expired form's 403) is not swapped in.
  var sentAt = 0;
  document.body.addEventListener("htmx:beforeSwap", function (e) {
    var xhr = e.detail.xhr;
    if (!panel.contains(e.detail.target) || xhr.status < 400) return;
    var type = xhr.getResponseHeader("Content-Type") || "";
    var partial = type.indexOf("text/html") === 0 && !/^\s*<!doctype/i.test(xhr.responseText);
    e.detail.shouldSwap = partial;
    e.detail.isError = false;
    if (partial) return;
    showError(type.indexOf("text/plain") === 0 && xhr.responseText ? xhr.responseText.slice(0, 500) :
      interpolate(gettext("The dashboard answered %(status)s; reload the page and try again."), { status: xhr.status }, true));
  });
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    if (panel.contains(e.detail.elt)) { sentAt = performance.now(); showError(""); }
  });
  document.body.addEventListener("htmx:sendError", function (e) {
    if (panel.contains(e.detail.elt)) showError(gettext("The dashboard did not answer; check your connection."));
  });
  document.body.addEventListener("htmx:afterSwap", function (e) {
    var roundTrip = $("[data-round-trip]", e.detail.target);
    if (!e.detail.target.hasAttribute("data-result") || !roundTrip || !sentAt) return;
    $("strong", roundTrip).textContent = (performance.now() - sentAt).toFixed(1) + " ms";
    roundTrip.hidden = false;
  });
  document.addEventListener("click", function (e) {
    var button = e.target.closest && e.target.closest("[data-copy]");
    if (!button || !panel.contains(button)) return;
    var which = button.getAttribute("data-copy");
    var text = $('[data-snippet="' + CSS.escape(which) + '"]', panel).textContent;
    navigator.clipboard.writeText(text).then(function () {
      button.textContent = gettext("Copied");
      setTimeout(function () { button.textContent = interpolate(gettext("Copy %(snippet)s"), { snippet: which }, true); }, 1500);
    });
  });

  // ---------------------------------------------------------------- photos
  function setPhoto(section, file, label) {
    if (file.size > config.maxRequestBytes - 65536) {
      showError(interpolate(gettext("That photo is %(size)s MB; the limit per request is %(limit)s MB. Pick a smaller one."),
        { size: (file.size / 1048576).toFixed(1), limit: (config.maxRequestBytes / 1048576).toFixed(0) }, true));
      return false;
    }
    var input = $("[data-image-file]", section);
    if (input.files[0] !== file) {
      var transfer = new DataTransfer();
      transfer.items.add(file);
      input.files = transfer.files;
    }
    var preview = $("[data-preview]", section);
    if (preview.src.indexOf("blob:") === 0) URL.revokeObjectURL(preview.src);
    preview.src = URL.createObjectURL(file);
    preview.hidden = false;
    $("[data-chosen]", section).textContent = label || file.name || gettext("pasted image");
    $("[data-drop-hint]", section).hidden = true;
    return true;
  }
  function usePhoto(section, file, label) {
    if (setPhoto(section, file, label)) run();
  }
  function wireImage(section) {
    var drop = $("[data-drop]", section);
    var input = $("[data-image-file]", section);
    // A file the browser cannot show (the server says why in the result): no broken preview.
    $("[data-preview]", section).addEventListener("error", function () {
      this.hidden = true;
      $("[data-drop-hint]", section).hidden = false;
    });
    input.addEventListener("change", function () { if (input.files[0]) usePhoto(section, input.files[0]); });
    ["dragenter", "dragover"].forEach(function (t) { drop.addEventListener(t, function (e) { e.preventDefault(); drop.classList.add("over"); }); });
    ["dragleave", "drop"].forEach(function (t) { drop.addEventListener(t, function () { drop.classList.remove("over"); }); });
    drop.addEventListener("drop", function (e) {
      e.preventDefault();
      var file = e.dataTransfer.files[0];
      if (file) usePhoto(section, file);
    });
    $all("[data-photo]", section).forEach(function (button) {
      button.addEventListener("click", function () {
        var name = button.getAttribute("data-photo-name");
        fetch(button.getAttribute("data-photo")).then(function (r) { return r.blob(); }).then(function (blob) {
          usePhoto(section, new File([blob], name, { type: blob.type }), name);
        }, function () { showError(gettext("The sample photo could not be loaded.")); });
      });
    });
    wirePreprocess(section);
  }

  // ---------------------------------------------------------------- preprocessing
  function field(section, name) { return $('[data-pp="' + name + '"]', section); }
  function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
  function triple(text) {
    var parts = text.split(/[,\s]+/).filter(Boolean).map(Number);
    return parts.length === 1 ? [parts[0], parts[0], parts[0]] : parts;
  }
  function readPreprocess(section) {
    var crop = field(section, "crop").value.trim();
    return {
      resize_short: parseInt(field(section, "resize_short").value || "0", 10),
      crop: crop ? parseInt(crop, 10) : null,
      mean: triple(field(section, "mean").value),
      std: triple(field(section, "std").value),
      color: field(section, "color").value,
      layout: field(section, "layout").value || null,
    };
  }
  function presetOf(pp) {
    return Object.keys(presets).filter(function (key) {
      var p = presets[key];
      return p.resize_short === pp.resize_short && p.crop === pp.crop && same(p.mean, pp.mean) &&
        same(p.std, pp.std) && p.color === pp.color;
    })[0] || "custom";
  }
  function showPreset(section, key) {
    field(section, "preset").value = key;
    $("[data-preset-name]", section).textContent = key === "custom" ? gettext("custom") : presets[key].label;
  }
  function wirePreprocess(section) {
    var select = field(section, "preset");
    select.addEventListener("change", function () {
      var p = presets[select.value];
      if (!p) return;
      field(section, "resize_short").value = p.resize_short;
      field(section, "crop").value = p.crop == null ? "" : p.crop;
      field(section, "mean").value = p.mean.join(", ");
      field(section, "std").value = p.std.join(", ");
      field(section, "color").value = p.color;
      showPreset(section, select.value);
    });
    $all("[data-pp]", section).forEach(function (input) {
      if (input !== select) input.addEventListener("change", function () { showPreset(section, presetOf(readPreprocess(section))); });
    });
    var save = $("[data-save-preset]", section);
    if (save) save.addEventListener("click", function () {
      var status = $("[data-preset-status]", section);
      api("PUT", "/try-settings", { preprocess: readPreprocess(section) }).then(function (res) {
        status.textContent = res.ok ? gettext("Saved: everyone trying this model starts from it.") : res.data.error;
      });
    });
  }

  // ---------------------------------------------------------------- tensors
  function mapLeaves(value, fn) {
    return Array.isArray(value) ? value.map(function (v) { return mapLeaves(v, fn); }) : fn(value);
  }
  function fillValue(dtype, random) {
    if (dtype === "TYPE_BOOL") return random ? Math.random() < 0.5 : false;
    if (dtype === "TYPE_STRING") return random ? "text" : "";
    if (/INT/.test(dtype)) return random ? Math.floor(Math.random() * 10) : 0;
    if (!random) return 0;
    var u = 1 - Math.random(), v = Math.random();  // Box-Muller: standard normal values
    return Math.round(Math.sqrt(-2 * Math.log(u)) * Math.cos(2 * Math.PI * v) * 1e4) / 1e4;
  }
  function wireTensor(section) {
    var area = $("[data-tensor]", section);
    var note = $("[data-tensor-note]", section);
    var npy = $("[data-npy]", section);
    var example = area.defaultValue;  // the zeros the server rendered, of the right shape
    var dtype = section.getAttribute("data-dtype");
    function dropNpy() { npy.value = ""; }
    area.addEventListener("input", function () { dropNpy(); note.textContent = gettext("JSON, nested to the shape above."); });
    $all("[data-fill]", section).forEach(function (button) {
      button.addEventListener("click", function () {
        var value;
        try { value = JSON.parse(area.value); } catch (e) { value = JSON.parse(example || "[]"); }
        var random = button.getAttribute("data-fill") === "random";
        area.value = JSON.stringify(mapLeaves(value, function () { return fillValue(dtype, random); }));
        dropNpy();
        note.textContent = random ? gettext("Random values of the right shape.") : gettext("Zeros of the right shape.");
      });
    });
    npy.addEventListener("change", function () {
      var file = npy.files[0];
      if (file) note.textContent = interpolate(gettext("Sending %(name)s (%(bytes)s bytes); edit the JSON to use it instead."),
        { name: file.name, bytes: file.size.toLocaleString() }, true);
    });
  }

  // ---------------------------------------------------------------- comparing two versions
  // A state change answers 202 with its job; poll the job until it ends (about a second).
  function followJob(res) {
    if (res.status !== 202 || !res.data.url) return res;
    return new Promise(function (resolve) {
      function poll() {
        fetch(res.data.url, { credentials: "same-origin" }).then(function (r) { return r.json(); }).then(function (job) {
          if (job.state === "succeeded") resolve({ ok: true, status: 200, data: job });
          else if (job.state === "failed" || job.state === "cancelled") resolve({ ok: false, status: 409, data: job });
          else setTimeout(poll, 400);
        }, function () { setTimeout(poll, 1000); });
      }
      poll();
    });
  }
  panel.addEventListener("click", function (e) {
    var target = e.target.closest && e.target.closest("[data-compare-load]");
    if (!target) return;
    var raw = target.getAttribute("data-compare-load");
    var version = raw ? parseInt(raw, 10) : null;
    var rerunExample = target.getAttribute("data-after-load-rerun");
    target.setAttribute("aria-busy", "true");
    target.disabled = true;
    target.textContent = version ? interpolate(gettext("Loading v%(version)s in Triton…"), { version: version }, true) : gettext("Unloading…");
    api("POST", "/compare", { version: version }).then(followJob).then(function (res) {
      if (!res.ok) {
        target.removeAttribute("aria-busy");
        target.disabled = false;
        showError(res.data.error || gettext("Triton did not load it."));
        return;
      }
      // Loaded: run the same input again on both versions; unloaded: show the page as it is now.
      if (!version) { location.reload(); return; }
      var again = rerunExample && $('[data-rerun="' + CSS.escape(rerunExample) + '"]', panel);
      if (again) again.click(); else run();
    });
  });

  // ---------------------------------------------------------------- labels
  // The Labels section is a partial swapped after a one-click choice, so the upload is
  // listened for on the panel; once saved, the section is fetched again (count, buttons).
  panel.addEventListener("change", function (e) {
    var labels = e.target.closest && e.target.closest("[data-labels-file]");
    var file = labels && labels.files[0];
    if (!file) return;
    var status = $("[data-labels-status]", panel);
    file.text().then(function (text) { return api("PUT", "/labels", text, true); }).then(function (res) {
      if (!res.ok) { status.textContent = res.data.error; return; }
      var saved = interpolate(gettext("%(count)s labels saved; the next run shows them."), { count: res.data.count }, true);
      htmx.ajax("GET", "/models/" + encodeURIComponent(config.model) + "/try/labels/", { target: "#try-labels", swap: "outerHTML" }).then(function () {
        var fresh = $("[data-labels-status]", panel);
        if (fresh) fresh.textContent = saved;
      });
    });
  });

  // ---------------------------------------------------------------- start
  $all("[data-input]", form).forEach(function (section) {
    if (section.getAttribute("data-kind") === "image") wireImage(section); else wireTensor(section);
  });
  form.addEventListener("keydown", function (e) { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) { e.preventDefault(); run(); } });
  document.addEventListener("paste", function (e) {
    var section = form.querySelector('[data-kind="image"]');
    if (!section || !e.clipboardData) return;
    var item = Array.prototype.find.call(e.clipboardData.items, function (i) { return i.type.indexOf("image/") === 0; });
    if (item) { e.preventDefault(); usePhoto(section, item.getAsFile(), gettext("pasted image")); }
  });
}
