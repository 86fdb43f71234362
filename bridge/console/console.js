// The operator console's one script: every 2 s it asks GET /console/state and renders each table's
// rows again, by the data-key and data-kind of the table's headings (as the server rendered them).
"use strict";
(() => {
  const EVERY = 2000;
  let round = 0;
  const updated = document.getElementById("updated"), missing = document.getElementById("missing");

  // A value as its cell shows it (the server's _shown says the same).
  const shown = (kind, value) => {
    if (value === null || value === undefined) return "—";
    if (kind === "flag") return value ? "yes" : "";
    if (kind === "secs") {  // seconds, then minutes past 2 min, hours past 2 h
      const seconds = Math.round(value);
      if (seconds < 120) return `${seconds} s`;
      return seconds < 7200 ? `${Math.floor(seconds / 60)} min` : `${Math.floor(seconds / 3600)} h`;
    }
    if (kind === "list") return value.join(", ");
    return String(value);
  };

  const cell = (kind, value, thumbs) => {
    const td = document.createElement("td");
    if (kind === "thumb") {  // the same <img> again for the same tab: no flicker while the next one loads
      const img = thumbs.get(String(value)) || Object.assign(document.createElement("img"), {className: "thumb", alt: ""});
      img.dataset.tab = String(value);
      img.src = `/console/thumb/${encodeURIComponent(value)}?r=${round}`;
      td.append(img);
    } else if (kind === "live") {
      const link = Object.assign(document.createElement("a"), {target: "_blank", rel: "noopener",
                                                             textContent: "Live View"});
      link.href = `/console/live/${encodeURIComponent(value)}`;
      const devtools = Object.assign(document.createElement("a"), {target: "_blank", rel: "noopener",
                                                                 textContent: "DevTools"});
      devtools.href = `/console/live/${encodeURIComponent(value)}?mode=devtools`;
      td.append(link, " · ", devtools);
    } else if (kind === "decide") {  // a held takeover: approve or deny (the click is handled below)
      for (const [label, approve] of [["Approve", "true"], ["Deny", "false"]]) {
        const button = Object.assign(document.createElement("button"), {type: "button", textContent: label});
        Object.assign(button.dataset, {hold: String(value), approve});
        td.append(button, " ");
      }
    } else {
      td.textContent = shown(kind, value);  // text, never HTML
    }
    return td;
  };

  const fill = (table, rows) => {
    const columns = [...table.tHead.rows[0].cells].map((th) => [th.dataset.key, th.dataset.kind]);
    const thumbs = new Map([...table.querySelectorAll("img.thumb")].map((img) => [img.dataset.tab, img]));
    const body = document.createElement("tbody");
    for (const row of rows) {
      const tr = body.insertRow();
      for (const [key, kind] of columns) tr.append(cell(kind, row[key], thumbs));
    }
    if (rows.length === 0) {
      const td = body.insertRow().insertCell();
      Object.assign(td, {className: "none", colSpan: columns.length, textContent: "none"});
    }
    table.tBodies[0].replaceWith(body);
  };

  const refresh = async () => {
    try {
      const answer = await fetch("/console/state", {credentials: "same-origin", cache: "no-store"});
      if (answer.status === 401 || answer.status === 403) {
        location.reload();  // signed out or expired: the sign-in form
        return;
      }
      if (!answer.ok) throw new Error(`HTTP ${answer.status}`);
      const state = await answer.json();
      round += 1;
      for (const table of document.querySelectorAll("table[data-section]")) fill(table, state[table.dataset.section] || []);
      updated.textContent = `updated ${new Date().toLocaleTimeString()}`;
      missing.textContent = state.missing.length ? `Not answering: ${state.missing.join(", ")}` : "";
      document.body.dataset.refreshes = String(round);
    } catch (error) {
      updated.textContent = `not updated (${error.message})`;
    }
    setTimeout(refresh, EVERY);
  };
  // An operator's decision on a held takeover: sent as JSON (the server refuses any other), then the state again.
  document.addEventListener("click", async (event) => {
    const button = event.target.closest("button[data-hold]");
    if (!button) return;
    button.disabled = true;
    const answer = await fetch(`/console/takeovers/${encodeURIComponent(button.dataset.hold)}`, {
      method: "POST", credentials: "same-origin", headers: {"Content-Type": "application/json"},
      body: JSON.stringify({approve: button.dataset.approve === "true"})});
    const body = await answer.json().catch(() => ({}));
    updated.textContent = answer.ok ? `takeover ${body.takeover.decision}` : `not decided (${body.error || answer.status})`;
  });
  setTimeout(refresh, EVERY);
})();
