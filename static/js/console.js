// The console's only script besides htmx, loaded as a static file (the Content-Security-Policy allows no
// inline script and no eval). Every page works without it.
(function () {
  "use strict";
  document.documentElement.classList.add("js");

  // The menu button collapses the main nav on narrow screens.
  function setUpMenu() {
    var button = document.querySelector(".nav-toggle");
    var header = document.querySelector("header.top");
    if (!button || !header) return;
    button.hidden = false;
    button.addEventListener("click", function () {
      var open = header.classList.toggle("nav-open");
      button.setAttribute("aria-expanded", open ? "true" : "false");
    });
  }

  // A list with a data-refresh-seconds marker reloads its results (data-refresh-target) from the address bar (which always holds the
  // filter on screen) while the tab is visible, and at once when the tab becomes visible again. It waits
  // while the person is typing in it or has a confirmation open, so nothing they are doing is replaced.
  var REFRESH_HEADER = "X-Console-Refresh";
  function refreshTarget() {
    var marker = document.querySelector("[data-refresh-seconds]");
    return marker && document.getElementById(marker.getAttribute("data-refresh-target"));
  }
  function busy(target) {
    var active = document.activeElement;
    if (active && target.contains(active) && /^(INPUT|SELECT|TEXTAREA)$/.test(active.tagName)) return true;
    return Boolean(target.querySelector(".confirm"));
  }
  function refresh() {
    var target = refreshTarget();
    if (!target || !window.htmx || document.visibilityState !== "visible" || busy(target)) return;
    var headers = {};
    headers[REFRESH_HEADER] = "1";
    window.htmx.ajax("GET", window.location.pathname + window.location.search,
      {target: "#" + target.id, swap: "outerHTML", headers: headers});
  }
  function setUpRefresh() {
    var marker = document.querySelector("[data-refresh-seconds]");
    if (!marker) return;
    var seconds = parseInt(marker.getAttribute("data-refresh-seconds"), 10) || 15;
    window.setInterval(refresh, seconds * 1000);
    document.addEventListener("visibilitychange", refresh);
  }

  // A table wider than a small screen scrolls inside itself; keyboard users must be able to reach it.
  function makeScrollersFocusable() {
    document.querySelectorAll("main table, main .table-scroll").forEach(function (el) {
      if (el.scrollWidth > el.clientWidth && !el.hasAttribute("tabindex")) {
        el.setAttribute("tabindex", "0");
      }
    });
  }

  // On a phone the filters start folded unless one is set: the first screen shows handoffs, not a form.
  function foldFiltersOnPhones() {
    var panel = document.querySelector("details[data-fold-on-phone]");
    if (panel && !panel.hasAttribute("data-active") && window.matchMedia("(max-width: 760px)").matches) {
      panel.open = false;
    }
  }

  function start() {
    foldFiltersOnPhones();
    setUpMenu();
    setUpRefresh();
    makeScrollersFocusable();
    document.body.addEventListener("htmx:afterSettle", makeScrollersFocusable);
    window.addEventListener("resize", makeScrollersFocusable);
  }
  if (document.readyState === "loading") {
    document.addEventListener("DOMContentLoaded", start);
  } else {
    start();
  }
})();
