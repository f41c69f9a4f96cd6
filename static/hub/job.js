// Job page: copy buttons for commands, and the log kept scrolled to its end as lines arrive
// (the status panel is re-rendered by htmx on each live event or poll).
(function () {
  "use strict";
  document.addEventListener("click", function (e) {
    var button = e.target.closest("[data-copy]");
    if (!button) return;
    navigator.clipboard.writeText(button.getAttribute("data-copy")).then(function () {
      // gettext comes from Django's JavaScript catalogue, which base.html loads first.
      button.textContent = gettext("Copied");
      setTimeout(function () { button.textContent = gettext("Copy"); }, 1500);
    });
  });
  function scrollLog() {
    var log = document.getElementById("job-log");
    if (log) log.scrollTop = log.scrollHeight;
  }
  document.addEventListener("DOMContentLoaded", scrollLog);
  document.body && document.body.addEventListener("htmx:afterSwap", scrollLog);
  document.addEventListener("htmx:afterSwap", scrollLog);
})();
