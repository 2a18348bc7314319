// Refreshes the page's <main> every few seconds while the page is visible (docs/dashboard.md,
// "Refreshing"). The page is complete without it: with JavaScript off, reload to see new state.
(function () {
  "use strict";
  var PERIOD_MS = 5000;

  // Not while someone is typing into a form or has typed something not yet sent.
  function busy() {
    var active = document.activeElement;
    if (active && (active.tagName === "INPUT" || active.tagName === "TEXTAREA" || active.tagName === "BUTTON")) {
      return true;
    }
    var inputs = document.querySelectorAll("main input[type=text], main input[type=password]");
    for (var i = 0; i < inputs.length; i++) {
      if (inputs[i].value !== "") {
        return true;
      }
    }
    return false;
  }

  function refresh() {
    if (document.hidden || busy()) {
      return;
    }
    fetch(window.location.href, { credentials: "same-origin", cache: "no-store" })
      .then(function (response) {
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        if (html === null || busy()) {
          return;
        }
        var next = new DOMParser().parseFromString(html, "text/html").querySelector("main");
        var current = document.querySelector("main");
        if (next && current) {
          current.replaceWith(next);
          document.documentElement.dataset.refreshed = String(Date.now());
        }
      })
      .catch(function () {
        // The next tick tries again; the page stays as it was.
      });
  }

  window.setInterval(refresh, PERIOD_MS);
})();
