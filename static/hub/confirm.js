// Forms with data-confirm="..." ask before they submit: the text says what will happen.
// (A listener instead of inline onsubmit handlers, which the Content-Security-Policy forbids.)
(function () {
  "use strict";
  document.addEventListener("submit", function (event) {
    var form = event.target;
    var question = form.getAttribute && form.getAttribute("data-confirm");
    if (question && !window.confirm(question)) event.preventDefault();
  }, true);
})();
