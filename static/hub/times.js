// Times in the reader's own time zone, in the page's language (<html lang>). The server writes
// <time datetime="ISO">: with data-local="datetime" or "date" (the {% local_time %} tag) the text
// itself becomes the local time; any other <time> keeps its text (say, "3 minutes ago") and
// gets the exact local time as its tooltip. Runs again on what htmx swaps in.
(function () {
  "use strict";
  var STYLES = {
    datetime: { dateStyle: "medium", timeStyle: "short" },
    date: { dateStyle: "medium" },
  };

  function formatter(style) {
    try {
      return new Intl.DateTimeFormat(document.documentElement.lang || undefined, STYLES[style]);
    } catch (e) {
      return new Intl.DateTimeFormat(undefined, STYLES[style]);
    }
  }

  function show(root) {
    if (!root || !root.querySelectorAll) return;
    var full = formatter("datetime");
    var dateOnly = formatter("date");
    root.querySelectorAll("time[datetime]").forEach(function (el) {
      var when = new Date(el.getAttribute("datetime"));
      if (isNaN(when.getTime())) return;
      var style = el.getAttribute("data-local");
      if (style === "date") el.textContent = dateOnly.format(when);
      else if (style === "datetime") el.textContent = full.format(when);
      else el.title = full.format(when);
    });
  }

  document.addEventListener("DOMContentLoaded", function () { show(document); });
  document.addEventListener("htmx:load", function (event) { show(event.target); });
})();
