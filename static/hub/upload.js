// Chunked, resumable model upload with a progress bar, speed, time left and cancel.
//
// The form (#upload-form) holds a file input and the target's option fields. On submit the
// file goes to /api/v1/uploads in chunks (PUT with Upload-Offset); a dropped connection is
// retried, and a page reload resumes from the offset the server reports (the upload id is
// remembered per file in localStorage). The file is hashed (SHA-256) while it is sent; the
// server compares it with its own hash. Then the form posts the upload id and the options.
// The same form drives the INT8 page's calibration file: data-accept names the extensions
// taken (default onnx|zip), and with data-file-optional the form posts without a file when
// its "calibration" choice is not "upload".
// An ES module (strict, deferred, no globals): it imports the hash and the CSRF token.
import { csrfToken } from "./csrf.js";
import { HubSha256 } from "./sha256.js";

var form = document.getElementById("upload-form");
if (form) start(form);

function start(form) {
  var input = form.querySelector("input[type=file]");
  var zone = form.querySelector(".dropzone");
  var chosen = form.querySelector("[data-chosen]");
  var panel = form.querySelector(".upload-progress");
  var bar = panel.querySelector("progress");
  var stats = panel.querySelector("[data-stats]");
  var errorBox = form.querySelector("[data-error]");
  var submit = form.querySelector("button[type=submit]");
  var cancelButton = panel.querySelector("[data-cancel]");
  var chunkBytes = parseInt(form.getAttribute("data-chunk-bytes"), 10);
  var maxBytes = parseInt(form.getAttribute("data-max-bytes"), 10);
  var state = { xhr: null, cancelled: false, uploadId: null, busy: false };
  var accept = form.getAttribute("data-accept") || "onnx|zip";
  var acceptPattern = new RegExp("\\.(" + accept + ")$", "i");
  function fileNeeded() {
    if (!form.hasAttribute("data-file-optional")) return true;
    var choice = form.querySelector("input[name=calibration]:checked");
    return !!choice && choice.value === "upload";
  }

  function human(bytes) {
    var units = ["B", "KB", "MB", "GB", "TB"], i = 0;
    while (bytes >= 1000 && i < units.length - 1) { bytes /= 1000; i++; }
    return (i ? bytes.toFixed(1) : bytes) + " " + units[i];
  }
  function duration(s) {
    if (!isFinite(s)) return "…";
    if (s < 60) return Math.ceil(s) + " s";
    return Math.floor(s / 60) + " min " + Math.ceil(s % 60) + " s";
  }
  function showError(text) { errorBox.textContent = text; errorBox.hidden = !text; }
  function key(file) { return "hub-upload:" + file.name + ":" + file.size + ":" + file.lastModified; }

  function pick(file) {
    showError("");
    if (!file) return;
    if (!acceptPattern.test(file.name)) {
      showError(accept === "onnx|zip"
        ? interpolate(gettext("%(name)s is not an .onnx file or a .zip bundle."), { name: file.name }, true)
        : interpolate(gettext("%(name)s is not a .%(kinds)s file."), { name: file.name, kinds: accept.split("|").join(", .") }, true));
      return;
    }
    if (file.size === 0) { showError(interpolate(gettext("%(name)s is empty."), { name: file.name }, true)); return; }
    if (file.size > maxBytes) {
      showError(interpolate(gettext("%(name)s is %(size)s; the limit is %(limit)s."),
        { name: file.name, size: human(file.size), limit: human(maxBytes) }, true));
      return;
    }
    chosen.textContent = file.name + " · " + human(file.size);
    state.file = file;
  }

  input.addEventListener("change", function () { pick(input.files[0]); });
  ["dragenter", "dragover"].forEach(function (t) {
    zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.add("over"); });
  });
  ["dragleave", "drop"].forEach(function (t) {
    zone.addEventListener(t, function (e) { e.preventDefault(); zone.classList.remove("over"); });
  });
  zone.addEventListener("drop", function (e) {
    var file = e.dataTransfer.files[0];
    if (file) {
      var dt = new DataTransfer(); dt.items.add(file); input.files = dt.files; pick(file);
    }
  });

  function api(method, url, body, headers) {
    return new Promise(function (resolve, reject) {
      var xhr = new XMLHttpRequest();
      state.xhr = xhr;
      xhr.open(method, url);
      xhr.setRequestHeader("X-CSRFToken", csrfToken());
      Object.keys(headers || {}).forEach(function (h) { xhr.setRequestHeader(h, headers[h]); });
      xhr.onload = function () {
        var data = null;
        try { data = JSON.parse(xhr.responseText); } catch (e) { data = null; }
        resolve({ status: xhr.status, data: data, xhr: xhr });
      };
      xhr.onerror = function () { reject(new Error("network")); };
      xhr.onabort = function () { reject(new Error("aborted")); };
      xhr.send(body);
    });
  }

  async function startOrResume(file) {
    var remembered = localStorage.getItem(key(file));
    if (remembered) {
      var r = await api("GET", "/api/v1/uploads/" + remembered);
      if (r.status === 200 && r.data.size === file.size && r.data.state !== "complete") return r.data;
      localStorage.removeItem(key(file));
    }
    var created = await api("POST", "/api/v1/uploads",
      JSON.stringify({ filename: file.name, size: file.size }), { "Content-Type": "application/json" });
    if (created.status !== 201) throw new Error(created.data ? created.data.error : gettext("The upload could not start."));
    localStorage.setItem(key(file), created.data.id);
    return created.data;
  }

  async function sendChunks(file, upload, hash) {
    var offset = upload.offset, started = Date.now(), startOffset = offset, failures = 0;
    // Re-hash what the server already has (local disk only) so the final hash covers it all.
    for (var pos = 0; pos < offset; pos += chunkBytes) {
      hash.update(new Uint8Array(await file.slice(pos, Math.min(offset, pos + chunkBytes)).arrayBuffer()));
    }
    while (offset < file.size) {
      if (state.cancelled) throw new Error("aborted");
      var end = Math.min(file.size, offset + chunkBytes);
      var bytes = new Uint8Array(await file.slice(offset, end).arrayBuffer());
      var r;
      try {
        r = await api("PUT", "/api/v1/uploads/" + upload.id, bytes, {
          "Upload-Offset": String(offset), "Content-Type": "application/octet-stream"
        });
      } catch (e) {
        if (e.message === "aborted") throw e;
        failures += 1;
        if (failures > 8) throw new Error(interpolate(gettext("The connection keeps dropping. Press Upload again to resume from %(offset)s."), { offset: human(offset) }, true));
        stats.textContent = interpolate(gettext("Connection lost; retrying (%(attempt)s)…"), { attempt: failures }, true);
        await new Promise(function (ok) { setTimeout(ok, Math.min(30000, 500 * Math.pow(2, failures))); });
        continue;
      }
      if (r.status === 409 && r.xhr.getResponseHeader("Upload-Offset")) {
        // The server has a different amount than we thought: continue from its offset.
        var server = parseInt(r.xhr.getResponseHeader("Upload-Offset"), 10);
        if (server < offset) throw new Error(gettext("The server lost part of the upload; start again."));
        offset = server; continue;
      }
      if (r.status !== 200) throw new Error(r.data ? r.data.error : interpolate(gettext("The server refused a chunk (%(status)s)."), { status: r.status }, true));
      hash.update(bytes);
      failures = 0;
      offset = r.data.offset;
      var elapsed = (Date.now() - started) / 1000, sent = offset - startOffset;
      var speed = elapsed > 0 ? sent / elapsed : 0;
      bar.value = offset / file.size;
      // The percent sign travels with the number: a bare % in a msgid reads as a format.
      stats.textContent = interpolate(gettext("%(sent)s of %(total)s · %(percent)s · %(speed)s/s · %(left)s left"), {
        sent: human(offset), total: human(file.size), percent: Math.floor(100 * offset / file.size) + "%",
        speed: human(speed), left: duration((file.size - offset) / (speed || 1)),
      }, true);
    }
  }

  form.addEventListener("submit", async function (e) {
    e.preventDefault();
    if (state.busy) return;
    var file = state.file || input.files[0];
    if (!fileNeeded()) { await postWithout(); return; }
    if (!file) { showError(accept === "onnx|zip" ? gettext("Choose or drop an ONNX file first.") : gettext("Choose or drop the file first.")); return; }
    showError("");
    state.cancelled = false; state.busy = true;
    submit.disabled = true; panel.hidden = false; bar.removeAttribute("value");
    stats.textContent = gettext("Starting…");
    try {
      var upload = await startOrResume(file);
      state.uploadId = upload.id;
      var hash = new HubSha256();
      await sendChunks(file, upload, hash);
      stats.textContent = form.getAttribute("data-finishing") || gettext("Checking the file (SHA-256) and queueing the compile job…");
      bar.removeAttribute("value");
      var body = new FormData(form);
      body.delete("file");
      body.set("upload_id", upload.id);
      body.set("sha256", hash.hex());
      var r = await api("POST", form.action, body);
      if (r.status === 201 && r.data && r.data.job_url) {
        localStorage.removeItem(key(file));
        window.location.assign(r.data.job_url);
        return;
      }
      if (r.data && r.data.upload_spent) localStorage.removeItem(key(file));
      state.refused = true;  // the file arrived; the server said no: nothing to resume
      throw new Error(r.data && r.data.error ? r.data.error : interpolate(gettext("The version could not be created (%(status)s)."), { status: r.status }, true));
    } catch (err) {
      if (err.message !== "aborted") showError(err.message === "network" ? gettext("The connection dropped. Press Upload to resume.") : err.message);
      panel.hidden = err.message === "aborted" || !!state.refused;
      state.refused = false;
    } finally {
      state.busy = false; submit.disabled = false;
    }
  });

  // No file to send (calibration on captures or examples): the form's fields alone.
  async function postWithout() {
    showError(""); state.busy = true; submit.disabled = true;
    try {
      var body = new FormData(form);
      body.delete("file");
      var r = await api("POST", form.action, body);
      if (r.status === 201 && r.data && r.data.job_url) { window.location.assign(r.data.job_url); return; }
      showError(r.data && r.data.error ? r.data.error : interpolate(gettext("The version could not be created (%(status)s)."), { status: r.status }, true));
    } catch (err) {
      showError(gettext("The connection dropped. Press the button again."));
    } finally {
      state.busy = false; submit.disabled = false;
    }
  }

  cancelButton.addEventListener("click", async function () {
    state.cancelled = true;
    if (state.xhr) state.xhr.abort();
    if (state.uploadId) {
      try { await api("DELETE", "/api/v1/uploads/" + state.uploadId); } catch (e) { /* gone already */ }
      if (state.file) localStorage.removeItem(key(state.file));
    }
    panel.hidden = true; stats.textContent = ""; showError(gettext("Upload cancelled; nothing was stored."));
  });
}
