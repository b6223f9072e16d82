// The crawl overview: every project with its current job, polled every 2 s; the buttons post to
// the control endpoint and the table is drawn again from the answer's next poll. Plain DOM.
(function () {
  "use strict";

  const POLL_MS = 2000;
  const root = document.getElementById("overview");
  if (!root) return;
  const csrf = root.querySelector("input[name=csrfmiddlewaretoken]").value;

  function cell(text, className) {
    const td = document.createElement("td");
    td.textContent = text == null ? "–" : String(text);
    if (className) td.className = className;
    return td;
  }

  function link(text, href) {
    const a = document.createElement("a");
    a.href = href;
    a.textContent = text;
    return a;
  }

  const OFFERS = { recrawl_due: "Recrawl what is due", recrawl: "Recrawl everything" };

  // An action the server refused (409, 403, 400) or could not answer is said, not swallowed; a
  // Start with nothing left to crawl comes with the recrawls it offers, as buttons.
  function say(text, project, offer) {
    const box = document.getElementById("overview-message");
    box.replaceChildren(document.createTextNode(text));
    for (const action of offer || []) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "button overview-" + action;
      b.textContent = OFFERS[action] || action;
      b.addEventListener("click", () => control(project, action));
      box.appendChild(b);
    }
    box.hidden = false;
  }

  async function refusal(response) {
    const isJson = (response.headers.get("Content-Type") || "").startsWith("application/json");
    const body = isJson ? await response.json() : {};
    const reason = response.status === 403 ? "you may not do this (HTTP 403)" : "HTTP " + response.status;
    return { text: body.error || body.detail || reason, offer: body.offer };
  }

  async function control(project, action) {
    const body = new URLSearchParams({ project: String(project), action: action });
    document.getElementById("overview-message").hidden = true;
    try {
      const response = await fetch(root.dataset.control, {
        method: "POST",
        headers: { "X-CSRFToken": csrf, "Content-Type": "application/x-www-form-urlencoded" },
        body: body,
        credentials: "same-origin",
      });
      if (!response.ok) {
        const refused = await refusal(response);
        say(action + ": " + refused.text, project, refused.offer);
      }
    } catch (error) {
      say(action + ": the server could not be reached (" + error.message + ")", project);
    }
    return poll();
  }

  function healthCell(health) {
    const td = document.createElement("td");
    td.className = "overview-health";
    const badge = document.createElement("span");
    badge.className = "health health-" + health.status;
    badge.textContent = health.status;
    td.appendChild(badge);
    if (health.reason) {
      const why = document.createElement("div");
      why.className = "health-reason";
      why.textContent = health.reason + (health.alerts > 1 ? ` (+${health.alerts - 1} more)` : "");
      td.appendChild(why);
    }
    return td;
  }

  function projectRow(p) {
    const tr = document.createElement("tr");
    tr.dataset.project = p.slug;
    const name = document.createElement("td");
    name.appendChild(link(p.name, p.url));
    tr.appendChild(name);
    tr.appendChild(cell(p.status));
    tr.appendChild(healthCell(p.health));
    const job = document.createElement("td");
    if (p.job) job.appendChild(link("job " + p.job.id + " (" + p.job.kind + ")", p.job.url));
    else job.textContent = "–";
    tr.appendChild(job);
    const state = document.createElement("td");
    if (p.job) {
      const badge = document.createElement("span");
      badge.className = "job-state job-" + p.job.state;
      badge.textContent = p.job.state;
      state.appendChild(badge);
    } else state.textContent = "–";
    tr.appendChild(state);
    tr.appendChild(cell(p.job ? p.job.pages_done + " / " + p.job.pages_failed : null, "num"));
    tr.appendChild(cell(p.per_minute, "num"));
    const owed = cell(p.owed, "num");
    for (const g of p.retrying) {
      const note = document.createElement("div");
      note.className = "overview-retrying";
      note.textContent = `${g.pages} retrying ${g.code}, next at ${new Date(g.next_at).toLocaleTimeString()}`;
      note.title = g.message;
      owed.appendChild(note);
    }
    tr.appendChild(owed);
    tr.appendChild(cell(p.last_error ? p.last_error.code + " " + p.last_error.url : ""));
    const buttons = document.createElement("td");
    for (const action of p.actions) {
      const b = document.createElement("button");
      b.type = "button";
      b.className = "button overview-" + action;
      b.textContent = action.charAt(0).toUpperCase() + action.slice(1);
      b.addEventListener("click", () => { b.disabled = true; control(p.id, action); });
      buttons.appendChild(b);
    }
    tr.appendChild(buttons);
    return tr;
  }

  function render(data) {
    document.getElementById("overview-updated").textContent = new Date(data.generated_at).toLocaleTimeString();
    document.getElementById("overview-projects").replaceChildren(...data.projects.map(projectRow));
    document.getElementById("overview-warnings").replaceChildren(
      ...data.warnings.map((w) => {
        const li = document.createElement("li");
        li.className = "warning";
        li.textContent = w;
        return li;
      })
    );
    const workers = data.workers.map((w) => {
      const tr = document.createElement("tr");
      tr.append(cell(w.name), cell(w.queues.join(", ")), cell(w.concurrency, "num"), cell(w.seen_seconds_ago, "num"));
      return tr;
    });
    if (!workers.length) {
      const tr = document.createElement("tr");
      tr.appendChild(cell("no worker alive: nothing will be crawled"));
      workers.push(tr);
    }
    document.getElementById("overview-workers").replaceChildren(...workers);
    root.classList.remove("stale");
  }

  function poll() {
    return fetch(root.dataset.url, { credentials: "same-origin", headers: { Accept: "application/json" } })
      .then((r) => (r.ok ? r.json() : Promise.reject(r.status)))
      .then(render)
      .catch(() => root.classList.add("stale"));
  }

  render(JSON.parse(document.getElementById("overview-initial").textContent));
  setInterval(poll, POLL_MS);
})();
