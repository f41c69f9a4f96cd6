// The CSRF token, in one place: base.html puts it in <meta name="csrf-token">, and every
// request a script makes takes it from here. An ES module: fetch and XHR callers import
// csrfToken(); htmx gets it as the X-CSRFToken header of each request it sends.
export function csrfToken() {
  var meta = document.querySelector('meta[name="csrf-token"]');
  return meta ? meta.getAttribute("content") : "";
}

document.addEventListener("htmx:configRequest", function (event) {
  event.detail.headers["X-CSRFToken"] = csrfToken();
});
