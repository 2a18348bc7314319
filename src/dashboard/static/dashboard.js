// The pages' script (docs/dashboard.md, "Refreshing"): keeps the relative times ("in 20 s", "2 min ago")
// current every second, and every 5 seconds, while the page is visible, fetches the page's own URL and
// replaces only the parts whose content changed. The page is complete without it: with JavaScript off,
// reload to see new state.
(function () {
  "use strict";
  var PERIOD_MS = 5000;
  // The database's clock less this browser's, from the page's `data-now`: relative times are the
  // database's, whatever this machine's clock says.
  var skew = 0;

  function readSkew() {
    var clock = document.querySelector("[data-now]");
    var now = clock && Date.parse(clock.getAttribute("data-now") || "");
    if (now) {
      skew = now - Date.now();
    }
  }

  // `ms` milliseconds as the server writes them (src/dashboard/format.rs, `relative`).
  function relative(ms) {
    var future = ms > 0;
    var secs = Math.floor(Math.abs(ms) / 1000);
    var text;
    if (secs < 1) {
      return "now";
    } else if (secs < 60) {
      text = secs + " s";
    } else if (secs < 3600) {
      text = Math.floor(secs / 60) + " min";
    } else if (secs < 86400) {
      text = Math.floor(secs / 3600) + " h";
    } else {
      text = Math.floor(secs / 86400) + " d";
    }
    return future ? "in " + text : text + " ago";
  }

  function tick() {
    var now = Date.now() + skew;
    var times = document.querySelectorAll("time.rel");
    for (var i = 0; i < times.length; i++) {
      var at = Date.parse(times[i].getAttribute("datetime"));
      if (at) {
        var text = relative(at - now);
        if (times[i].textContent !== text) {
          times[i].textContent = text;
        }
      }
    }
  }

  // Not while someone is in a field, or has typed into an action's form and not sent it.
  function busy() {
    var active = document.activeElement;
    if (active && /^(INPUT|TEXTAREA|BUTTON|SELECT)$/.test(active.tagName)) {
      return true;
    }
    var inputs = document.querySelectorAll("main form[method=post] input[type=text], main form[method=post] input[type=password]");
    for (var i = 0; i < inputs.length; i++) {
      if (inputs[i].value !== "") {
        return true;
      }
    }
    return false;
  }

  // An element's HTML without the relative times' text, which changes every second anyway.
  function shape(element) {
    return element.outerHTML.replace(/(<time[^>]*class="rel"[^>]*>)[^<]*(<\/time>)/g, "$1$2");
  }

  // The outermost elements with a `data-key`, by key.
  function keyed(root) {
    var found = {};
    var all = root.querySelectorAll("[data-key]");
    for (var i = 0; i < all.length; i++) {
      if (!all[i].parentElement.closest("[data-key]")) {
        found[all[i].getAttribute("data-key")] = all[i];
      }
    }
    return found;
  }

  // Replaces in `current` the keyed parts that differ from `next`'s; the whole of it when anything else
  // differs (a part added or removed, another heading). Returns how many parts were replaced.
  function patch(current, next) {
    if (shape(current) === shape(next)) {
      return 0;
    }
    var before = keyed(current);
    var after = keyed(next);
    var replaced = 0;
    for (var key in after) {
      if (Object.prototype.hasOwnProperty.call(before, key) && shape(before[key]) !== shape(after[key])) {
        before[key].replaceWith(after[key].cloneNode(true));
        replaced++;
      }
    }
    if (shape(current) !== shape(next)) {
      current.replaceWith(next);
      return -1;
    }
    return replaced;
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
          var replaced = patch(current, next);
          readSkew();
          tick();
          document.documentElement.dataset.refreshed = String(Date.now());
          document.documentElement.dataset.replaced = String(replaced);
        }
      })
      .catch(function () {
        // The next tick tries again; the page stays as it was.
      });
  }

  // The state filter applies as soon as it is chosen.
  document.addEventListener("change", function (event) {
    var target = event.target;
    if (target && target.matches && target.matches("form.filter select")) {
      target.form.submit();
    }
  });

  document.addEventListener("DOMContentLoaded", function () {
    readSkew();
    tick();
  });
  window.setInterval(tick, 1000);
  window.setInterval(refresh, PERIOD_MS);
})();
