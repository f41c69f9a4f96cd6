// The "Edit serving config" page (templates/registry/version_revise.html). htmx posts the form
// to the page's preview partial as it is edited and swaps the answer in; this module only
// makes a missing answer visible, so that an old diff never passes for the current form: the
// preview greys out and the error line says what happened and what to do.
var box = document.getElementById("revision-preview");
var errorLine = document.querySelector("[data-preview-error]");

function show(message) {
  errorLine.textContent = message || "";
  errorLine.hidden = !message;
  box.classList.toggle("stale", Boolean(message));
}

if (box && errorLine) {
  document.body.addEventListener("htmx:beforeRequest", function (e) {
    if (e.detail.elt === box) show("");
  });
  document.body.addEventListener("htmx:responseError", function (e) {
    if (e.detail.elt !== box) return;
    var status = e.detail.xhr.status;
    show(interpolate(status === 403 ?
      gettext("The preview was refused (%(status)s): your session may have ended. Sign in again in another tab, then edit a field.") :
      gettext("The preview failed (%(status)s): the page may be out of date. Reload it; what you typed is not saved yet."),
    { status: status }, true));
  });
  document.body.addEventListener("htmx:sendError", function (e) {
    if (e.detail.elt === box) show(gettext("The dashboard did not answer, so this preview is out of date; check your connection and edit a field to try again."));
  });
}

// A field edited before htmx had set the page up (it does so once the document is parsed)
// sent no preview: ask for one as soon as htmx is ready, so the diff never lags what was typed.
function edited(form) {
  return Array.prototype.some.call(form.elements, function (el) {
    if (el.type === "checkbox" || el.type === "radio") return el.checked !== el.defaultChecked;
    if (el.tagName === "SELECT") {
      return Array.prototype.some.call(el.options, function (o) { return o.selected !== o.defaultSelected; });
    }
    return "defaultValue" in el && el.value !== el.defaultValue;
  });
}
document.addEventListener("DOMContentLoaded", function () {
  setTimeout(function () {  // after htmx's own DOMContentLoaded handler
    var form = document.getElementById("revise-form");
    if (form && edited(form)) form.dispatchEvent(new Event("input", { bubbles: true }));
  }, 0);
});
