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
    show(status === 403 ?
      "The preview was refused (" + status + "): your session may have ended. Sign in again in another tab, then edit a field." :
      "The preview failed (" + status + "): the page may be out of date. Reload it; what you typed is not saved yet.");
  });
  document.body.addEventListener("htmx:sendError", function (e) {
    if (e.detail.elt === box) show("The dashboard did not answer, so this preview is out of date; check your connection and edit a field to try again.");
  });
}
