// Live throughput charts: every element with `data-throughput` (templates/charts/_throughput.html) gets two uPlot
// charts, messages/s and bytes/s (in and out), fed by polling /api/throughput every 2 s. No page reload, no htmx:
// uPlot redraws in place with setData. window.moldauCharts holds each chart's state (its latest data and how many
// updates it drew), keyed by topic ("*" for all topics), for people and tests to inspect.
"use strict";
(function () {
  if (window.moldauCharts) return;  // the partial may be included several times on one page
  const charts = window.moldauCharts = {};
  const POLL_MS = 2000;
  const HEIGHT = 190;
  const WINDOW_S = 300;

  function cssVar(name, fallback) {
    return getComputedStyle(document.documentElement).getPropertyValue(name).trim() || fallback;
  }

  // 1.2 k, 3.4 MiB ...: binary prefixes for bytes, decimal ones for counts; `suffix` like "/s".
  function human(value, unit, suffix) {
    if (value == null) return "-";
    const steps = unit === "B" ? [[1 << 30, "Gi"], [1 << 20, "Mi"], [1 << 10, "Ki"]] : [[1e9, "G"], [1e6, "M"], [1e3, "k"]];
    const tail = (suffix || "");
    for (const [size, prefix] of steps) {
      if (Math.abs(value) >= size) return (value / size).toFixed(1) + " " + prefix + unit + tail;
    }
    return (Math.round(value * 10) / 10) + (unit ? " " + unit : "") + tail;
  }

  let clock = null;  // 14:05:30, in the browser's time zone

  function plot(element, unit) {
    clock = clock || uPlot.fmtDate("{HH}:{mm}:{ss}");
    const axis = { stroke: cssVar("--muted", "#888"), grid: { stroke: cssVar("--line", "#ddd"), width: 1 },
                   ticks: { stroke: cssVar("--line", "#ddd"), width: 1 } };
    const options = {
      width: Math.max(element.clientWidth, 240), height: HEIGHT,
      // New points come in from the right; the window grows from a minute to WINDOW_S as the history does.
      scales: { x: { time: true, range: (u, min, max) => (max == null ? [min, max]
                                                           : [max - Math.min(Math.max(max - min, 60), WINDOW_S), max]) },
                y: { range: (u, min, max) => [0, Math.max(max, 1)] } },
      series: [
        { value: (u, v) => (v == null ? "-" : clock(new Date(v * 1000))) },
        { label: "in", stroke: cssVar("--accent", "#2f6fde"), width: 2, value: (u, v) => human(v, unit, "/s") },
        { label: "out", stroke: cssVar("--ok", "#2f855a"), width: 2, value: (u, v) => human(v, unit, "/s") },
      ],
      axes: [Object.assign({}, axis, { space: 70, values: (u, ticks) => ticks.map((t) => clock(new Date(t * 1000))) }),
             Object.assign({}, axis, { size: 70, values: (u, ticks) => ticks.map((v) => human(v, unit, "")) })],
    };
    return new uPlot(options, [[], [], []], element);
  }

  function draw(state) {
    const data = state.data;
    if (!data) return;
    state.messages.setData([data.t, data.messages_in, data.messages_out]);
    state.bytes.setData([data.t, data.bytes_in, data.bytes_out]);
  }

  function build(state) {
    if (state.messages) state.messages.destroy();
    if (state.bytes) state.bytes.destroy();
    state.messages = plot(state.root.querySelector(".chart-messages"), "");
    state.bytes = plot(state.root.querySelector(".chart-bytes"), "B");
    draw(state);
  }

  async function poll(state) {
    if (!state.root.isConnected) {  // swapped out of the page: stop polling
      clearInterval(state.timer);
      if (charts[state.key] === state) delete charts[state.key];
      return;
    }
    const status = state.root.querySelector(".chart-status");
    let response;
    try {
      response = await fetch(state.url, { headers: { Accept: "application/json" } });
    } catch (err) {
      status.textContent = "cannot reach the console; retrying";
      return;
    }
    if (!response.ok) {
      status.textContent = "throughput unavailable: HTTP " + response.status;
      return;
    }
    state.data = await response.json();
    state.updates += 1;
    draw(state);
    const totals = state.data.totals;
    state.root.querySelector(".chart-totals").textContent =
      human(totals.messages_in, "", "") + " messages in · " + human(totals.messages_out, "") + " committed out";
    status.textContent = state.data.t.length ? "" : "sampling started; the first rates appear in a few seconds";
    if (state.data.busy) addBusy(state.root, state.data.busy);
  }

  // /throughput: a chart for each topic that became busy since the page loaded, built like the all-topics one.
  function addBusy(model, topics) {
    const box = document.querySelector("[data-throughput-busy]");
    if (!box) return;
    for (const topic of topics) {
      if (charts[topic] || box.querySelector('[data-topic="' + CSS.escape(topic) + '"]')) continue;
      const section = model.cloneNode(true);
      delete section.dataset.ready;
      section.dataset.topic = topic;
      section.querySelectorAll(".chart").forEach((chart) => { chart.replaceChildren(); });
      section.querySelector(".chart-totals").textContent = "";
      const link = document.createElement("a");
      link.href = "/topics/" + encodeURIComponent(topic);
      link.textContent = topic;
      section.querySelector("h3").replaceChildren(link);
      box.insertBefore(section, box.querySelector("#no-busy-topics"));
      setup(section);
    }
    const none = box.querySelector("#no-busy-topics");
    if (none && box.querySelector("[data-throughput]")) none.hidden = true;
  }

  function setup(root) {
    if (root.dataset.ready) return;
    root.dataset.ready = "1";
    const topic = root.dataset.topic || "";
    const key = topic || "*";
    const url = "/api/throughput" + (topic ? "?topic=" + encodeURIComponent(topic) : "");
    const state = { key: key, topic: topic, url: url, root: root, data: null, updates: 0 };
    build(state);
    charts[key] = state;
    poll(state);
    state.timer = setInterval(() => poll(state), POLL_MS);
  }

  function scan() {
    document.querySelectorAll("[data-throughput]").forEach(setup);
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", scan);
  else scan();
  document.addEventListener("htmx:afterSettle", scan);
  window.addEventListener("resize", () => {
    for (const state of Object.values(charts)) {
      for (const chart of [state.messages, state.bytes]) {
        chart.setSize({ width: Math.max(chart.root.parentElement.clientWidth, 240), height: HEIGHT });
      }
    }
  });
  // The theme switch changes the page's colours: draw the charts again in the new ones.
  new MutationObserver(() => Object.values(charts).forEach(build))
    .observe(document.documentElement, { attributes: true, attributeFilter: ["data-theme"] });
})();
