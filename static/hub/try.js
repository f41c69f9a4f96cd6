// The "Try it" panel: builds an infer request from the form (photos, JSON tensors, .npy files),
// sends it to POST /api/v1/models/<name>/infer, and shows top-k, values, latency and code.
(function () {
  "use strict";
  var config, form, resultBox, errorBox;
  var images = {};   // input name -> {b64, name}
  var npys = {};     // input name -> {b64, name}
  var lastInputs = null;

  function $(sel, root) { return (root || document).querySelector(sel); }
  function $all(sel, root) { return Array.prototype.slice.call((root || document).querySelectorAll(sel)); }
  function csrf() {
    var m = document.cookie.match(/(?:^|;\s*)csrftoken=([^;]+)/);
    return m ? decodeURIComponent(m[1]) : "";
  }
  // Builds an element from literal attribute names, text and child nodes. Data only ever
  // reaches the page as text or attribute values, never as markup.
  function el(tag, attrs, children) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (key) {
      var value = attrs[key];
      if (value === null || value === undefined || value === false) return;
      if (key === "text") node.textContent = String(value);
      else node.setAttribute(key, value === true ? "" : String(value));
    });
    (children || []).forEach(function (child) {
      if (child === null || child === undefined) return;
      node.appendChild(typeof child === "string" ? document.createTextNode(child) : child);
    });
    return node;
  }
  function api(method, path, body, raw) {
    var headers = { "X-CSRFToken": csrf() };
    if (!raw) headers["Content-Type"] = "application/json";
    return fetch("/api/v1/models/" + encodeURIComponent(config.model) + path, {
      method: method,
      headers: headers,
      credentials: "same-origin",
      body: body === undefined ? undefined : raw ? body : JSON.stringify(body),
    }).then(function (response) {
      if (response.status === 204) return { ok: true, status: 204, data: {} };
      return response.text().then(function (text) {
        var data;
        try { data = JSON.parse(text); } catch (e) { data = { error: "The server answered " + response.status + " without details." }; }
        return { ok: response.ok, status: response.status, data: data };
      });
    }, function () {
      return { ok: false, status: 0, data: { error: "The dashboard did not answer; check your connection." } };
    });
  }
  function showError(message) {
    errorBox.textContent = message || "";
    errorBox.hidden = !message;
  }

  // ---------------------------------------------------------------- preprocessing
  function presetOptions(select) {
    Object.keys(config.presets).forEach(function (key) {
      var opt = document.createElement("option");
      opt.value = key; opt.textContent = config.presets[key].label;
      select.appendChild(opt);
    });
    var custom = document.createElement("option");
    custom.value = "custom"; custom.textContent = "Custom";
    select.appendChild(custom);
  }
  function same(a, b) { return JSON.stringify(a) === JSON.stringify(b); }
  function presetName(pp) {
    var keys = Object.keys(config.presets);
    for (var i = 0; i < keys.length; i++) {
      var p = config.presets[keys[i]];
      if (p.resize_short === pp.resize_short && p.crop === pp.crop && same(p.mean, pp.mean) &&
          same(p.std, pp.std) && p.color === pp.color) return keys[i];
    }
    return "custom";
  }
  function fillPreprocess(section, pp) {
    $("[data-pp=resize_short]", section).value = pp.resize_short;
    $("[data-pp=crop]", section).value = pp.crop == null ? "" : pp.crop;
    $("[data-pp=mean]", section).value = pp.mean.join(", ");
    $("[data-pp=std]", section).value = pp.std.join(", ");
    $("[data-pp=color]", section).value = pp.color;
    if (pp.layout) $("[data-pp=layout]", section).value = pp.layout;
    var name = presetName(pp);
    $("[data-pp=preset]", section).value = name;
    $("[data-preset-name]", section).textContent = name === "custom" ? "custom" : config.presets[name].label;
  }
  function readTriple(input, what) {
    var parts = input.value.split(/[,\s]+/).filter(Boolean).map(Number);
    if (parts.length === 1) parts = [parts[0], parts[0], parts[0]];
    if (parts.length !== 3 || parts.some(isNaN)) throw new Error(what + " needs three numbers, for R, G and B.");
    return parts;
  }
  function readPreprocess(section) {
    var crop = $("[data-pp=crop]", section).value.trim();
    return {
      resize_short: parseInt($("[data-pp=resize_short]", section).value || "0", 10),
      crop: crop ? parseInt(crop, 10) : null,
      mean: readTriple($("[data-pp=mean]", section), "Mean"),
      std: readTriple($("[data-pp=std]", section), "Std"),
      color: $("[data-pp=color]", section).value,
      layout: $("[data-pp=layout]", section).value,
    };
  }

  // ---------------------------------------------------------------- files
  function readAsBase64(file) {
    return new Promise(function (resolve, reject) {
      var reader = new FileReader();
      reader.onload = function () { resolve(String(reader.result).split(",")[1] || ""); };
      reader.onerror = function () { reject(new Error("The file could not be read.")); };
      reader.readAsDataURL(file);
    });
  }
  function setImage(section, file, label) {
    var name = section.getAttribute("data-input");
    if (file.size > config.maxRequestBytes * 0.74) {
      showError("That photo is " + (file.size / 1048576).toFixed(1) + " MB; the limit per request is " +
        (config.maxRequestBytes / 1048576).toFixed(0) + " MB. Pick a smaller one.");
      return Promise.resolve();
    }
    return readAsBase64(file).then(function (b64) {
      images[name] = { b64: b64, name: label || file.name || "pasted image" };
      var preview = $("[data-preview]", section);
      preview.src = "data:" + (file.type || "image/png") + ";base64," + b64;
      preview.hidden = false;
      $("[data-chosen]", section).textContent = images[name].name;
      $("[data-drop-hint]", section).hidden = true;
      showError("");
    });
  }
  function wireImage(section) {
    var drop = $("[data-drop]", section);
    var input = $("[data-image-file]", section);
    input.addEventListener("change", function () { if (input.files[0]) setImage(section, input.files[0]).then(run); });
    ["dragenter", "dragover"].forEach(function (t) { drop.addEventListener(t, function (e) { e.preventDefault(); drop.classList.add("over"); }); });
    ["dragleave", "drop"].forEach(function (t) { drop.addEventListener(t, function () { drop.classList.remove("over"); }); });
    drop.addEventListener("drop", function (e) {
      e.preventDefault();
      var file = e.dataTransfer.files[0];
      if (file) setImage(section, file).then(run);
    });
    $all("[data-photo]", section).forEach(function (button) {
      button.addEventListener("click", function () {
        fetch(button.getAttribute("data-photo")).then(function (r) { return r.blob(); }).then(function (blob) {
          return setImage(section, blob, button.getAttribute("data-photo-name"));
        }).then(run);
      });
    });
    var select = $("[data-pp=preset]", section);
    presetOptions(select);
    fillPreprocess(section, config.preprocess);
    select.addEventListener("change", function () {
      if (select.value !== "custom") fillPreprocess(section, config.presets[select.value]);
    });
    $all("[data-pp]", section).forEach(function (el) {
      if (el !== select) el.addEventListener("change", function () {
        try { var pp = readPreprocess(section); var n = presetName(pp); select.value = n;
          $("[data-preset-name]", section).textContent = n === "custom" ? "custom" : config.presets[n].label; } catch (e) { /* shown on run */ }
      });
    });
    var save = $("[data-save-preset]", section);
    if (save) save.addEventListener("click", function () {
      var status = $("[data-preset-status]", section);
      var pp;
      try { pp = readPreprocess(section); } catch (e) { status.textContent = e.message; return; }
      api("PUT", "/try-settings", { preprocess: pp }).then(function (res) {
        status.textContent = res.ok ? "Saved: everyone trying this model starts from it." : res.data.error;
      });
    });
  }
  function wireTensor(section) {
    var name = section.getAttribute("data-input");
    var area = $("[data-tensor]", section);
    var note = $("[data-tensor-note]", section);
    var dtype = section.getAttribute("data-dtype");
    area.addEventListener("input", function () { delete npys[name]; note.textContent = "JSON, nested to the shape above."; });
    $all("[data-fill]", section).forEach(function (button) {
      button.addEventListener("click", function () {
        var value;
        try { value = JSON.parse(area.value); } catch (e) { value = JSON.parse(config.inputs.filter(function (i) { return i.name === name; })[0].example || "[]"); }
        var random = button.getAttribute("data-fill") === "random";
        area.value = JSON.stringify(mapLeaves(value, function () { return fillValue(dtype, random); }));
        delete npys[name];
        note.textContent = random ? "Random values of the right shape." : "Zeros of the right shape.";
      });
    });
    var npy = $("[data-npy]", section);
    npy.addEventListener("change", function () {
      var file = npy.files[0];
      if (!file) return;
      readAsBase64(file).then(function (b64) {
        npys[name] = { b64: b64, name: file.name };
        note.textContent = "Sending " + file.name + " (" + file.size.toLocaleString() + " bytes); edit the JSON to use it instead.";
      });
    });
  }
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

  // ---------------------------------------------------------------- request
  function collectInputs() {
    var inputs = {};
    $all("[data-input]", form).forEach(function (section) {
      var name = section.getAttribute("data-input");
      if (section.getAttribute("data-kind") === "image") {
        if (!images[name]) throw new Error("Choose a photo for " + name + " (drop, pick, paste or click a sample).");
        inputs[name] = { image_b64: images[name].b64, preprocess: readPreprocess(section) };
      } else if (npys[name]) {
        inputs[name] = { npy_b64: npys[name].b64 };
      } else {
        var area = $("[data-tensor]", section);
        try { inputs[name] = JSON.parse(area.value); } catch (e) {
          throw new Error("The values of " + name + " are not valid JSON: " + e.message);
        }
      }
    });
    return inputs;
  }
  function run(event, inputsOverride) {
    if (event && event.preventDefault) event.preventDefault();
    var inputs;
    try { inputs = inputsOverride || collectInputs(); } catch (e) { showError(e.message); return; }
    lastInputs = inputs;
    showError("");
    var topK = parseInt(form.elements.top_k.value || "5", 10);
    var version = parseInt(form.elements.version.value, 10);
    var compare = form.elements.compare && form.elements.compare.checked ? parseInt(form.elements.compare_version.value, 10) : null;
    var button = $("[data-run]", form);
    button.setAttribute("aria-busy", "true");
    resultBox.replaceChildren(el("p", { "class": "spinner-text muted", text: "Running on Triton…" }));
    var versions = compare ? [version, compare] : [version];
    var calls = versions.map(function (v, i) {
      var started = performance.now();
      return api("POST", "/infer", { inputs: inputs, version: v, top_k: topK, snippets: i === 0 }).then(function (res) {
        res.roundTrip = performance.now() - started;
        res.version = v;
        return res;
      });
    });
    // Versions run one after the other so their latencies do not disturb each other.
    var results = [];
    calls.reduce(function (p, call) { return p.then(function () { return call.then(function (r) { results.push(r); }); }); }, Promise.resolve())
      .then(function () {
        button.removeAttribute("aria-busy");
        render(results);
      });
  }
  function render(results) {
    var sections = results.map(function (res) {
      var parts = [];
      if (results.length > 1) parts.push(el("h3", { text: "v" + res.version }));
      if (!res.ok) parts = parts.concat(renderFailure(res, results.length > 1));
      else {
        var d = res.data;
        parts.push(el("div", { "class": "latency", "data-latency": true }, [
          el("span", null, ["Triton ", el("strong", { text: d.latency.triton_ms.toFixed(2) + " ms" })]),
          el("span", null, ["in the hub ", el("strong", { text: d.latency.hub_ms.toFixed(2) + " ms" })]),
          el("span", null, ["round trip ", el("strong", { text: res.roundTrip.toFixed(1) + " ms" })]),
        ]));
        d.outputs.forEach(function (out) { parts.push(renderOutput(out)); });
      }
      return el("section", null, parts);
    });
    if (results.length > 1) resultBox.replaceChildren(el("div", { "class": "compare-grid" }, sections));
    else resultBox.replaceChildren.apply(resultBox, sections);
    var first = results[0];
    var snippets = $("[data-snippets]");
    if (first.ok && first.data.snippets) {
      $("[data-snippet=curl]").textContent = first.data.snippets.curl;
      $("[data-snippet=python]").textContent = first.data.snippets.python;
      snippets.hidden = false;
    }
  }
  function renderFailure(res, comparing) {
    var message = el("p", { "class": "error", role: "alert" }, [res.data.error || "The request failed."]);
    if (res.data.input) message.appendChild(el("small", { text: " (input " + res.data.input + ")" }));
    var parts = [message];
    if (res.data.code === "version_not_loaded" && comparing && config.canOperate) {
      parts.push(el("button", {
        type: "button", "class": "secondary small", "data-compare-load": res.version,
        text: "Load v" + res.version + " beside v" + config.serving,
      }));
      parts.push(el("p", null, [el("small", {
        "class": "muted",
        text: "Triton loads it next to the serving version; clients keep getting v" + config.serving +
          ". Unload it here when you are done.",
      })]));
    }
    return parts;
  }
  function renderOutput(out) {
    var box = el("div", { "class": "output", "data-output": out.name }, [
      el("p", null, [
        el("code", { text: out.name }), " ",
        el("span", { "class": "tag", text: out.dtype }), " ",
        el("span", { "class": "tag", text: "[" + out.shape.join(", ") + "]" }),
      ]),
    ]);
    if (out.kind === "classification" && out.top_k) {
      var list = el("ol", { "class": "topk", "data-topk": true });
      out.top_k.forEach(function (row) {
        var pct = row.probability * 100;
        var fill = el("span");
        fill.style.width = Math.max(0.5, pct).toFixed(1) + "%";  // CSSOM: allowed by the CSP
        list.appendChild(el("li", null, [
          el("span", { "class": "label", title: "index " + row.index, text: row.label != null ? row.label : "class " + row.index }),
          el("span", { "class": "bar", "aria-hidden": "true" }, [fill]),
          el("span", { "class": "pct", text: (pct >= 10 ? pct.toFixed(1) : pct.toFixed(2)) + "%" }),
        ]));
      });
      box.appendChild(list);
      if (out.probabilities === "softmax") {
        box.appendChild(el("p", null, [el("small", { "class": "muted", text: "Probabilities: softmax of the raw scores." })]));
      }
    }
    var values = out.values || [];
    var shown = values.map(function (v) { return v === null ? "NaN" : typeof v === "number" ? +v.toPrecision(6) : v; });
    box.appendChild(el("details", { open: out.kind !== "classification" }, [
      el("summary", { text: "Values (" + (out.truncated ? "first " + values.length : values.length) + ")" }),
      el("pre", { "class": "values", text: shown.join(", ") }),
    ]));
    return box;
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
  function wireCompare() {
    document.addEventListener("click", function (e) {
      var target = e.target;
      if (!target.hasAttribute || !target.hasAttribute("data-compare-load")) return;
      var raw = target.getAttribute("data-compare-load");
      var version = raw ? parseInt(raw, 10) : null;
      target.setAttribute("aria-busy", "true");
      target.disabled = true;
      target.textContent = version ? "Loading v" + version + " in Triton…" : "Unloading…";
      api("POST", "/compare", { version: version }).then(followJob).then(function (res) {
        if (!res.ok) {
          target.removeAttribute("aria-busy");
          target.disabled = false;
          showError(res.data.error || "Triton did not load it.");
          return;
        }
        // Loaded: run the same input again on both versions; unloaded: show the page as it is now.
        if (version && lastInputs) run(null, lastInputs); else location.reload();
      });
    });
  }

  // ---------------------------------------------------------------- examples and labels
  function wireExamples() {
    var list = $("[data-examples]");
    if (!list) return;
    list.addEventListener("click", function (e) {
      var rerun = e.target.getAttribute("data-rerun");
      var del = e.target.getAttribute("data-delete-example");
      if (rerun) {
        api("GET", "/examples/" + encodeURIComponent(rerun)).then(function (res) {
          if (!res.ok) { showError(res.data.error); return; }
          applyExample(res.data.inputs);
          run(null, res.data.inputs);
        });
      } else if (del && confirm("Delete this saved example? Nobody can rerun it afterwards.")) {
        api("DELETE", "/examples/" + encodeURIComponent(del)).then(function (res) {
          if (res.ok) { var li = list.querySelector('[data-example-id="' + CSS.escape(del) + '"]'); if (li) li.remove(); }
          else showError(res.data.error);
        });
      }
    });
    $("[data-save-example]").addEventListener("click", function () {
      var nameInput = $("[data-example-name]");
      var inputs;
      try { inputs = lastInputs || collectInputs(); } catch (e) { showError(e.message); return; }
      var name = nameInput.value.trim() || ("Example " + new Date().toLocaleString());
      api("POST", "/examples", { name: name, inputs: inputs }).then(function (res) {
        if (!res.ok) { showError(res.data.error); return; }
        var empty = list.querySelector("[data-no-examples]");
        if (empty) empty.remove();
        var li = el("li", { "data-example-id": res.data.id }, [
          el("span", null, [res.data.name, " ", el("small", { "class": "muted", text: "just now" })]),
          el("span", { "class": "actions" }, [
            el("button", { type: "button", "class": "secondary outline small", "data-rerun": res.data.id, text: "Run" }),
            el("button", { type: "button", "class": "secondary outline small", "data-delete-example": res.data.id, text: "Delete" }),
          ]),
        ]);
        list.insertBefore(li, list.firstChild);
        nameInput.value = "";
      });
    });
  }
  function applyExample(inputs) {
    Object.keys(inputs).forEach(function (name) {
      var section = form.querySelector('[data-input="' + CSS.escape(name) + '"]');
      if (!section) return;
      var value = inputs[name];
      if (value && value.image_b64) {
        images[name] = { b64: value.image_b64, name: "saved example" };
        var preview = $("[data-preview]", section);
        preview.src = "data:image/*;base64," + value.image_b64; preview.hidden = false;
        $("[data-drop-hint]", section).hidden = true;
        if (value.preprocess) fillPreprocess(section, Object.assign({}, config.preprocess, value.preprocess));
      } else if (value && value.npy_b64) {
        npys[name] = { b64: value.npy_b64, name: "saved .npy" };
      } else if ($("[data-tensor]", section)) {
        $("[data-tensor]", section).value = JSON.stringify(value);
        delete npys[name];
      }
    });
  }
  function wireLabels() {
    var input = $("[data-labels-file]");
    if (!input) return;
    input.addEventListener("change", function () {
      var file = input.files[0];
      if (!file) return;
      var status = $("[data-labels-status]");
      file.text().then(function (text) {
        return api("PUT", "/labels", text, true);
      }).then(function (res) {
        status.textContent = res.ok ? res.data.count + " labels saved." : res.data.error;
      });
    });
  }
  function wireCopy() {
    $all("[data-copy]").forEach(function (button) {
      button.addEventListener("click", function () {
        var text = $('[data-snippet="' + CSS.escape(button.getAttribute("data-copy")) + '"]').textContent;
        navigator.clipboard.writeText(text).then(function () { button.textContent = "Copied"; setTimeout(function () { button.textContent = "Copy " + button.getAttribute("data-copy"); }, 1500); });
      });
    });
  }

  document.addEventListener("DOMContentLoaded", function () {
    var node = document.getElementById("try-config");
    form = document.getElementById("try-form");
    if (!node || !form) return;
    config = JSON.parse(node.textContent);
    resultBox = $("[data-result]");
    errorBox = $("[data-error]", form);
    $all("[data-input]", form).forEach(function (section) {
      if (section.getAttribute("data-kind") === "image") wireImage(section); else wireTensor(section);
    });
    form.addEventListener("submit", run);
    form.addEventListener("keydown", function (e) { if (e.key === "Enter" && (e.ctrlKey || e.metaKey)) run(e); });
    document.addEventListener("paste", function (e) {
      var section = form.querySelector('[data-kind="image"]');
      if (!section || !e.clipboardData) return;
      var item = Array.prototype.find.call(e.clipboardData.items, function (i) { return i.type.indexOf("image/") === 0; });
      if (item) { e.preventDefault(); setImage(section, item.getAsFile(), "pasted image").then(run); }
    });
    wireExamples();
    wireCompare();
    wireLabels();
    wireCopy();
  });
})();
