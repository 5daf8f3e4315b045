// The API tokens page: once a new token's secret is shown (the answer to the form's POST), the
// history entry becomes a plain GET of the list, so reloading the page or coming back to it never
// shows the secret again, nor submits the form a second time. Without this script the browser
// asks before it submits the form again; the secret is never stored anywhere to be shown again.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (document.querySelector("[data-secret-shown]") && window.history && window.history.replaceState) {
    window.history.replaceState(null, "", window.location.pathname);
  }
});
