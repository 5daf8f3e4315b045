// Progressive enhancement for the web catalog: "Copy" buttons next to install commands. Every
// page works without this script; the buttons stay hidden when it does not run.
"use strict";
document.addEventListener("DOMContentLoaded", function () {
  if (!navigator.clipboard) {
    return;
  }
  var status = document.getElementById("live-status");
  document.querySelectorAll("button.copy[data-copy]").forEach(function (button) {
    button.hidden = false;
    button.setAttribute("aria-label", "Copy the command: " + button.dataset.copy);
    button.addEventListener("click", function () {
      navigator.clipboard.writeText(button.dataset.copy).then(function () {
        button.textContent = "Copied";
        if (status) {
          status.textContent = "Command copied to the clipboard";
        }
        window.setTimeout(function () {
          button.textContent = "Copy";
        }, 2000);
      });
    });
  });
});
