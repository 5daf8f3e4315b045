// The build page follows a build that is still queued or running: every few seconds it fetches
// the changing part of the page (the same server-rendered, escaped template, from this origin)
// and swaps it in, until the build ends; the new status is announced to screen readers. Without
// this script the page refreshes itself (a <noscript> meta refresh) and has a reload link.
"use strict";
(function () {
  var container = document.getElementById("build-live");
  if (!container || !container.dataset.liveUrl || !window.fetch) {
    return;
  }
  var announcer = document.getElementById("live-status");
  var FAST = 1000;
  var SLOW = 10000;
  var GIVE_UP = 60 * 60 * 1000; // a build has hard time limits far below this
  var SETTLE = 1500;
  var delay = FAST;
  var settled = false;
  var began = Date.now();

  function state() {
    var node = container.querySelector("[data-build-status]");
    return node ? node.dataset : {};
  }

  var last = state();

  function schedule() {
    if (Date.now() - began < GIVE_UP) {
      window.setTimeout(poll, delay);
    }
  }

  function poll() {
    fetch(container.dataset.liveUrl, { cache: "no-store", credentials: "same-origin", headers: { Accept: "text/html" } })
      .then(function (response) {
        if (!response.ok) {
          throw new Error("HTTP " + response.status);
        }
        return response.text();
      })
      .then(function (html) {
        container.innerHTML = html;
        var now = state();
        if (announcer && now.buildStatus !== last.buildStatus) {
          announcer.textContent = "The build is " + (now.buildLabel || now.buildStatus || "unknown").toLowerCase() + ".";
        }
        last = now;
        delay = FAST;
        if (now.buildFinal === "true") {
          if (settled) {
            container.dataset.followed = "ended";
            return;
          }
          // The final status commits a moment before the last step's log line: read it once more.
          settled = true;
          delay = SETTLE;
        }
        schedule();
      })
      .catch(function () {
        delay = Math.min(delay * 2, SLOW); // the server is busy or away: ask less often
        schedule();
      });
  }

  if (last.buildFinal !== "true") {
    container.dataset.followed = "following";
    schedule();
  }
})();
