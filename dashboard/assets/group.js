// The group page: every member of a clustered job, its tasks and a link to
// its dashboard, from this member's /api/group, refreshed every 2 s.
"use strict";
(function () {
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ({"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;"}[c]));
  const status = document.getElementById("status");
  async function refresh() {
    try {
      const r = await fetch("api/group", {cache: "no-store"});
      if (!r.ok) throw new Error((await r.text()).trim());
      const g = await r.json();
      document.getElementById("group").textContent = g.group;
      let rows = "";
      let tasks = 0;
      for (const m of g.members) {
        tasks += m.tasks.length;
        const link = m.url ? `<a href="${esc(m.url)}">${esc(m.url)}</a>` : "(no dashboard)";
        const self = m.member === g.self ? " (this member)" : "";
        rows += `<tr><td>${esc(m.member)}${self}</td><td>${esc(m.host)}</td><td class="num">${m.tasks.length}</td><td style="white-space:normal">${m.tasks.map(esc).join(", ")}</td><td>${link}</td></tr>`;
      }
      document.getElementById("members").innerHTML =
        `<table><tr><th>member</th><th>host</th><th class="num">tasks</th><th>task names</th><th>dashboard</th></tr>${rows}</table>`;
      status.textContent = `${g.members.length} members, ${tasks} tasks`;
    } catch (e) {
      status.textContent = "error: " + e.message;
    }
  }
  refresh();
  setInterval(refresh, 2000);
})();
