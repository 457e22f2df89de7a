// The console's own script: the theme switch. Live parts of pages use htmx attributes in the templates, and
// charts (uPlot) are set up by the pages that have them.
"use strict";
(function () {
  const order = ["auto", "light", "dark"];
  function apply(theme) {
    document.documentElement.dataset.theme = theme;
    localStorage.setItem("moldau-theme", theme);
    const button = document.getElementById("theme-toggle");
    if (button) button.textContent = "Theme: " + theme;
  }
  document.addEventListener("DOMContentLoaded", function () {
    const button = document.getElementById("theme-toggle");
    if (!button) return;
    apply(document.documentElement.dataset.theme || "auto");
    button.addEventListener("click", function () {
      const now = document.documentElement.dataset.theme || "auto";
      apply(order[(order.indexOf(now) + 1) % order.length]);
    });
  });
})();
