// The crawl dashboard: renders the snapshot embedded in the page, then polls the JSON endpoint
// every 2 s and renders again. Plain DOM and inline SVG; no library.
(function () {
  "use strict";

  const POLL_MS = 2000;
  const SVG = "http://www.w3.org/2000/svg";
  const root = document.getElementById("dashboard");
  if (!root) return;

  const chooser = document.getElementById("dashboard-project");
  if (chooser) chooser.addEventListener("change", () => chooser.form.submit());

  const url = root.dataset.url;
  const initial = document.getElementById("dashboard-initial");
  if (!url || !initial) return;

  function lookup(data, path) {
    return path.split(".").reduce((value, key) => (value == null ? undefined : value[key]), data);
  }

  function cell(tag, text, className) {
    const el = document.createElement(tag);
    el.textContent = text == null ? "–" : String(text);
    if (className) el.className = className;
    return el;
  }

  function fillRows(id, rows) {
    const body = document.getElementById(id);
    body.replaceChildren(...rows);
    if (!rows.length) {
      const tr = document.createElement("tr");
      tr.appendChild(cell("td", "none"));
      body.appendChild(tr);
    }
  }

  // [name, pages in error, of them retrying]: a site that is down shows while its pages are retried.
  function errorRows(rows) {
    return rows.map(([name, count, retrying]) => {
      const tr = document.createElement("tr");
      tr.append(cell("th", name || "(none)"), cell("td", count, "num"), cell("td", retrying, "num"));
      return tr;
    });
  }

  // Hosts that answered block pages in the last hour: how many, and the latest one's rule and URL.
  function blockedRows(rows) {
    return rows.map((b) => {
      const tr = document.createElement("tr");
      tr.append(cell("th", b.host), cell("td", b.blocked, "num"), cell("td", b.rule), cell("td", b.url),
        cell("td", new Date(b.seen_at).toLocaleTimeString()));
      return tr;
    });
  }

  function stageRows(data) {
    const stages = Array.from(new Set([...Object.keys(data.backlog), ...Object.keys(data.queues)]));
    return stages.map((stage) => {
      const tr = document.createElement("tr");
      tr.append(cell("th", stage), cell("td", data.backlog[stage], "num"), cell("td", data.queues[stage], "num"));
      return tr;
    });
  }

  function failureRows(failures) {
    return failures.map((f) => {
      const tr = document.createElement("tr");
      const link = document.createElement("a");
      link.href = f.admin_url;
      link.textContent = f.url;
      const where = cell("td", "");
      where.replaceChildren(link);
      const state = f.retrying == null ? "failed"
        : `retrying${f.retrying === "now" ? "" : ", next at " + new Date(f.retrying).toLocaleTimeString()}`;
      tr.append(cell("td", new Date(f.updated_at).toLocaleTimeString()), where, cell("td", f.error_code),
        cell("td", state), cell("td", f.error_message));
      return tr;
    });
  }

  // "2 pages retrying connect_error, next at 12:04:10: <a message>", one line per error code.
  function retryingItems(groups) {
    return groups.map((g) => {
      const li = document.createElement("li");
      const when = new Date(g.next_at).toLocaleTimeString();
      li.textContent = `${g.pages} ${g.pages === 1 ? "page" : "pages"} retrying ${g.code}, next at ${when}: ${g.message}`;
      return li;
    });
  }

  // "127.0.0.1:8000 is slow: down since 12:00:03 UTC (no answer): ..., until 12:04:10", one line per host.
  function slowHostItems(hosts) {
    return hosts.map((h) => {
      const li = document.createElement("li");
      const until = h.until ? `, until ${new Date(h.until).toLocaleTimeString()}` : "";
      li.textContent = `${h.host} is slow: ${h.why}${until}`;
      return li;
    });
  }

  function svgEl(name, attrs, text) {
    const el = document.createElementNS(SVG, name);
    for (const [key, value] of Object.entries(attrs)) el.setAttribute(key, value);
    if (text != null) el.textContent = text;
    return el;
  }

  function hhmm(iso) {
    return new Date(iso).toLocaleTimeString([], { hour: "2-digit", minute: "2-digit" });
  }

  // The health chart is drawn on the server, its times in UTC: written here in the browser's time,
  // like the throughput chart's and the failures' (the first with its day).
  function localTimes() {
    document.querySelectorAll("#health svg text.time[data-at]").forEach((el, i) => {
      const at = new Date(el.dataset.at);
      el.textContent = i === 0
        ? at.toLocaleString([], { month: "short", day: "numeric", hour: "2-digit", minute: "2-digit" })
        : hhmm(el.dataset.at);
    });
  }

  function drawChart(points) {
    const width = 720, height = 200, left = 44, bottom = 22, top = 10;
    const plotW = width - left - 8, plotH = height - top - bottom;
    const peak = Math.max(1, ...points.map((p) => p.pages + p.failed));
    const barW = plotW / points.length;
    const svg = svgEl("svg", { viewBox: `0 0 ${width} ${height}`, class: "chart" });
    svg.append(
      svgEl("line", { x1: left, y1: top + plotH, x2: left + plotW, y2: top + plotH, class: "axis" }),
      svgEl("line", { x1: left, y1: top, x2: left, y2: top + plotH, class: "axis" }),
      svgEl("text", { x: left - 6, y: top + 10, "text-anchor": "end", class: "label" }, peak),
      svgEl("text", { x: left - 6, y: top + plotH, "text-anchor": "end", class: "label" }, 0),
    );
    points.forEach((p, i) => {
      const h = (p.pages / peak) * plotH, hf = (p.failed / peak) * plotH;
      const bar = svgEl("rect", { x: left + i * barW + 1, y: top + plotH - h, width: Math.max(1, barW - 2), height: h,
        class: "bar" });
      const tip = `${hhmm(p.minute)}: ${p.pages} answered, ${p.failed} failed`;
      bar.appendChild(svgEl("title", {}, tip));
      svg.appendChild(bar);
      if (p.failed) {
        const failed = svgEl("rect", { x: left + i * barW + 1, y: top + plotH - h - hf, width: Math.max(1, barW - 2),
          height: hf, class: "bar-failed" });
        failed.appendChild(svgEl("title", {}, tip));
        svg.appendChild(failed);
      }
      const last = i === points.length - 1;
      if (i % 10 === 0 || last) {
        svg.appendChild(svgEl("text", { x: last ? left + plotW : left + i * barW + barW / 2, y: height - 6,
          "text-anchor": last ? "end" : "middle", class: "label" }, hhmm(p.minute)));
      }
    });
    document.getElementById("throughput-chart").replaceChildren(svg);
  }

  function render(data) {
    root.querySelectorAll("[data-field]").forEach((el) => {
      const value = lookup(data, el.dataset.field);
      el.textContent = value == null ? "–" : String(value);
    });
    document.getElementById("retrying").replaceChildren(...retryingItems(data.retrying));
    document.getElementById("slow-hosts").replaceChildren(...slowHostItems(data.slow_hosts || []));
    fillRows("stages", stageRows(data));
    fillRows("errors-by-code", errorRows(data.errors_by_code));
    fillRows("errors-by-host", errorRows(data.errors_by_host));
    fillRows("recent-failures", failureRows(data.recent_failures));
    fillRows("hosts-blocked", blockedRows(data.blocked));
    drawChart(data.throughput);
    document.getElementById("dashboard-updated").textContent = new Date(data.generated_at).toLocaleTimeString();
    root.classList.remove("stale");
  }

  async function poll() {
    try {
      const response = await fetch(url, { credentials: "same-origin", cache: "no-store",
        headers: { Accept: "application/json" } });
      const isJson = (response.headers.get("Content-Type") || "").startsWith("application/json");
      if (!response.ok || !isJson) throw new Error(`dashboard data: HTTP ${response.status}`);
      render(await response.json());
    } catch (error) {
      root.classList.add("stale"); // logged out, server down: keep the last numbers, marked stale
    } finally {
      setTimeout(poll, POLL_MS);
    }
  }

  localTimes();
  render(JSON.parse(initial.textContent));
  setTimeout(poll, POLL_MS);
})();
