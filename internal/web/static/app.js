// spotwise dashboard: reads the API with the signed-in token, renders with
// the DOM (never innerHTML with data), follows live changes over the API's
// server-sent events, and falls back to polling where a stream is refused.
"use strict";

const TOKEN_KEY = "spotwise.token";
const STATES = ["queued", "placing", "launching", "running", "checkpointing", "migrating", "succeeded", "failed", "cancelled", "expired"];
const TERMINAL = new Set(["succeeded", "failed", "cancelled", "expired"]);
const COLORS = ["#0b63ce", "#e36209", "#1b7f3b", "#8250df", "#c62828", "#0a7f86", "#b08800", "#6a737d", "#d63384", "#3d5a80"];

// ---- DOM helpers ----------------------------------------------------------

function h(tag, attrs, ...kids) {
  const svg = ["svg", "rect", "line", "polyline", "text", "g", "title", "circle", "path"].includes(tag);
  const el = svg ? document.createElementNS("http://www.w3.org/2000/svg", tag) : document.createElement(tag);
  for (const [k, v] of Object.entries(attrs || {})) {
    if (v === undefined || v === null || v === false) continue;
    if (k.startsWith("on")) el.addEventListener(k.slice(2), v);
    else if (k === "class") el.setAttribute("class", v);
    else if (k === "text") el.textContent = v;
    else el.setAttribute(k, v === true ? "" : v);
  }
  for (const kid of kids.flat()) {
    if (kid === undefined || kid === null || kid === false) continue;
    el.append(kid instanceof Node ? kid : document.createTextNode(String(kid)));
  }
  return el;
}

function show(...nodes) {
  const main = document.getElementById("main");
  main.replaceChildren(...nodes);
}

function usd(v) {
  if (v === undefined || v === null) return "–";
  const n = Number(v);
  return (n < 0 ? "-$" : "$") + Math.abs(n).toLocaleString("en-US", { minimumFractionDigits: 2, maximumFractionDigits: n !== 0 && Math.abs(n) < 1 ? 4 : 2 });
}

function when(t) {
  if (!t) return "–";
  const d = new Date(t);
  return isNaN(d) ? String(t) : d.toISOString().replace("T", " ").slice(0, 19);
}

function badge(state) { return h("span", { class: "badge " + state, text: state }); }

function pct(p) { return (100 * (p || 0)).toFixed(1) + "%"; }

function progressBar(p) {
  const inner = h("div");
  inner.style.width = pct(p);
  return h("div", { class: "bar", title: pct(p) }, inner);
}

function placementText(p) {
  if (!p || !p.provider) return "–";
  return `${p.provider} ${p.zone || p.region} ${p.instance_type} ${p.purchase_option}` + (p.nodes > 1 ? ` ×${p.nodes}` : "");
}

// ---- API ------------------------------------------------------------------

class Unauthenticated extends Error {}

function token() { return sessionStorage.getItem(TOKEN_KEY) || ""; }

async function api(path, opts = {}) {
  const headers = Object.assign({ Accept: "application/json" }, opts.headers || {});
  if (token()) headers.Authorization = "Bearer " + token();
  const resp = await fetch(path, Object.assign({}, opts, { headers }));
  if (resp.status === 401) {
    login("Your token was not accepted; sign in again.");
    throw new Unauthenticated("unauthenticated");
  }
  const body = await resp.json().catch(() => ({}));
  if (!resp.ok) {
    const e = new Error((body.error && body.error.message) || resp.statusText);
    e.status = resp.status;
    throw e;
  }
  return body;
}

// follow reads a server-sent event stream with the token (EventSource
// cannot send one) and calls onEvent with each event's parsed data. It
// returns a function that stops it. onError is told when the stream is
// refused or ends, so the caller can poll instead.
function follow(path, onEvent, onEnd) {
  const ctl = new AbortController();
  (async () => {
    try {
      const resp = await fetch(path, { headers: { Accept: "text/event-stream", Authorization: "Bearer " + token() }, signal: ctl.signal });
      if (!resp.ok || !(resp.headers.get("Content-Type") || "").startsWith("text/event-stream")) throw new Error("no stream: " + resp.status);
      setLive(true);
      const reader = resp.body.getReader();
      const dec = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done) break;
        buf += dec.decode(value, { stream: true });
        let i;
        while ((i = buf.indexOf("\n\n")) >= 0) {
          const block = buf.slice(0, i);
          buf = buf.slice(i + 2);
          const data = block.split("\n").filter((l) => l.startsWith("data:")).map((l) => l.slice(5).trimStart()).join("\n");
          if (!data) continue;
          try { onEvent(JSON.parse(data)); } catch (_) { onEvent({}); }
        }
      }
    } catch (e) {
      if (ctl.signal.aborted) return;
    }
    setLive(false);
    if (!ctl.signal.aborted && onEnd) onEnd();
  })();
  return () => ctl.abort();
}

function setLive(on) { document.getElementById("live").classList.toggle("on", on); }

// ---- sign in ---------------------------------------------------------------

function login(message) {
  const dlg = document.getElementById("login");
  document.getElementById("login-error").textContent = message || "";
  if (!dlg.open) dlg.showModal();
}

async function signIn(ev) {
  ev.preventDefault();
  const t = document.getElementById("login-token").value.trim();
  sessionStorage.setItem(TOKEN_KEY, t);
  try {
    await api("/v1/jobs?limit=1");
  } catch (e) {
    if (!(e instanceof Unauthenticated)) document.getElementById("login-error").textContent = e.message;
    return;
  }
  document.getElementById("login").close();
  document.getElementById("login-token").value = "";
  route();
}

// ---- views -----------------------------------------------------------------

let stopView = () => {};

function params() {
  const hash = location.hash.slice(1) || "/jobs";
  const [path, query] = hash.split("?");
  return { parts: path.split("/").filter(Boolean), q: new URLSearchParams(query || "") };
}

function setQuery(q) {
  const { parts } = params();
  const s = q.toString();
  location.hash = "#/" + parts.join("/") + (s ? "?" + s : "");
}

// poller calls fn now and every ms until stopped; it backs off while the
// tab is hidden.
function poller(fn, ms) {
  let stopped = false, timer;
  const tick = async () => {
    if (stopped) return;
    if (!document.hidden) await fn().catch(() => {});
    if (!stopped) timer = setTimeout(tick, ms);
  };
  timer = setTimeout(tick, ms);
  return () => { stopped = true; clearTimeout(timer); };
}

// live re-renders on each event of a stream (at most every 500 ms), or
// polls every ms when the stream cannot be had.
function live(path, refresh, ms) {
  let pending = false, stopPoll = null;
  const kick = () => {
    if (pending) return;
    pending = true;
    setTimeout(() => { pending = false; refresh().catch(() => {}); }, 500);
  };
  const stopStream = follow(path, kick, () => { if (!stopPoll) stopPoll = poller(refresh, ms); });
  return () => { stopStream(); if (stopPoll) stopPoll(); };
}

async function jobsView() {
  const { q } = params();
  const filters = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); apply(); } });
  const team = h("input", { name: "team", value: q.get("team") || "", placeholder: "any team", size: 12 });
  const state = h("select", { name: "state" }, h("option", { value: "" }, "any state"),
    STATES.map((s) => h("option", { value: s, selected: q.get("state") === s }, s)));
  const provider = h("select", { name: "provider" }, h("option", { value: "" }, "any provider"),
    ["aws", "azure", "gcp", "local"].map((p) => h("option", { value: p, selected: q.get("provider") === p }, p)));
  const search = h("input", { name: "q", value: q.get("q") || "", placeholder: "name or ID prefix", size: 20 });
  const apply = () => {
    const n = new URLSearchParams();
    for (const [k, el] of [["team", team], ["state", state], ["provider", provider], ["q", search]]) if (el.value) n.set(k, el.value);
    setQuery(n);
  };
  filters.append(h("label", {}, "Team", team), h("label", {}, "State", state), h("label", {}, "Provider", provider),
    h("label", {}, "Search", search), h("button", { type: "submit" }, "Filter"));
  const body = h("tbody");
  const pager = h("div", { class: "pager" });
  const summary = h("span", { class: "muted" });
  const table = h("table", { id: "jobs" }, h("thead", {}, h("tr", {},
    ["Name", "ID", "Team", "State", "Placement", "Progress"].map((c) => h("th", {}, c)),
    h("th", { class: "num" }, "Cost"), h("th", {}, "Submitted"))), body);
  show(h("h1", {}, "Jobs"), filters, table, pager);
  const api_q = new URLSearchParams({ limit: "100" });
  for (const k of ["team", "state", "provider", "q", "after"]) if (q.get(k)) api_q.set(k, q.get(k));
  const refresh = async () => {
    const list = await api("/v1/jobs?" + api_q);
    body.replaceChildren(...list.jobs.map((j) => h("tr", { class: "click", "data-id": j.id, onclick: () => { location.hash = "#/jobs/" + j.id; } },
      h("td", { class: "name" }, j.name), h("td", { class: "muted" }, j.id.slice(0, 14) + "…"), h("td", {}, j.team),
      h("td", {}, badge(j.state)), h("td", {}, placementText(j.placement)), h("td", {}, progressBar(j.progress)),
      h("td", { class: "num cost" }, usd(j.cost_usd)), h("td", {}, when(j.submitted_at)))));
    if (!list.jobs.length) body.append(h("tr", {}, h("td", { colspan: 8, class: "muted" }, "No jobs match.")));
    summary.textContent = `${list.jobs.length} shown`;
    const kids = [summary];
    if (q.get("after")) kids.push(h("button", { onclick: () => { const n = new URLSearchParams(q); n.delete("after"); setQuery(n); } }, "First page"));
    if (list.next) kids.push(h("button", { id: "next-page", onclick: () => { const n = new URLSearchParams(q); n.set("after", list.next); setQuery(n); } }, "Next page"));
    pager.replaceChildren(...kids);
  };
  await refresh();
  const teamQ = q.get("team") ? "?team=" + encodeURIComponent(q.get("team")) : "";
  stopView = live("/v1/events" + teamQ, refresh, 3000);
}

async function jobView(id) {
  const head = h("div");
  const cards = h("div", { class: "cards" });
  const extra = h("div");
  const attempts = h("tbody");
  const timeline = h("ol", { class: "timeline", id: "timeline" });
  const logs = h("pre", { class: "logs", id: "logs" }, "…");
  show(head, cards, extra, h("h2", {}, "Attempts"),
    h("table", {}, h("thead", {}, h("tr", {}, ["#", "Placement", "Launched", "Ended", "Outcome"].map((c) => h("th", {}, c)), h("th", { class: "num" }, "Cost"))), attempts),
    h("h2", {}, "Timeline"), timeline, h("h2", {}, "Logs"), logs);
  let done = false;
  const refresh = async () => {
    const j = await api("/v1/jobs/" + encodeURIComponent(id));
    done = TERMINAL.has(j.state);
    const cancel = done ? null : h("button", { class: "danger", id: "cancel", onclick: async () => {
      if (!confirm(`Cancel ${j.name}? Its capacity is released.`)) return;
      try { await api("/v1/jobs/" + encodeURIComponent(id) + "?reason=" + encodeURIComponent("cancelled from the dashboard"), { method: "DELETE" }); await refresh(); } catch (e) { if (!(e instanceof Unauthenticated)) alert(e.message); }
    } }, "Cancel job");
    head.replaceChildren(h("h1", {}, h("span", { id: "job-name" }, j.name), " ", h("span", { id: "job-state" }, badge(j.state)), " ", cancel),
      h("p", { class: "muted" }, j.id, " · team ", j.team, " · priority ", j.priority, j.message ? " · " + j.message : ""));
    const card = (k, v, idAttr) => h("div", { class: "card" }, h("div", { class: "k" }, k), h("div", { class: "v", id: idAttr }, v));
    cards.replaceChildren(card("Cost so far", usd(j.cost_usd), "job-cost"),
      card("Expected cost of this attempt", j.estimate ? usd(j.estimate.cost_usd) : "–"),
      card("Saved vs on-demand", j.savings_usd !== undefined ? usd(j.savings_usd) : "–", "job-savings"),
      card("On-demand baseline", j.on_demand_baseline_usd !== undefined ? usd(j.on_demand_baseline_usd) : "–"),
      card("Progress", pct(j.progress)), card("Placement", placementText(j.placement)),
      card("Preemptions", j.preemptions), card("Deadline", when(j.deadline_at)));
    const notes = [];
    for (const w of j.warnings || []) notes.push(h("div", { class: "warn" }, w));
    if ((j.pending_reasons || []).length) notes.push(h("h2", {}, "Waiting because"), h("ul", {}, j.pending_reasons.map((r) => h("li", {}, r.message || r.reason || JSON.stringify(r)))));
    if (j.log_tail && j.log_tail.length) notes.push(h("h2", {}, "Last output"), h("pre", { class: "logs" }, j.log_tail.map((l) => l.text || l).join("\n")));
    extra.replaceChildren(...notes);
    const all = (j.attempts || []).concat(j.previous ? [j.previous] : [], j.current ? [j.current] : []);
    attempts.replaceChildren(...all.map((a) => h("tr", {}, h("td", {}, a.n), h("td", {}, placementText(a.placement)),
      h("td", {}, when(a.launched_at)), h("td", {}, when(a.ended_at)), h("td", {}, a.outcome || (a === j.current ? "current" : "leaving")),
      h("td", { class: "num" }, a.outcome ? usd(a.cost) : "running"))));
    timeline.replaceChildren(...(j.events || []).slice().reverse().map((e) => h("li", { class: e.kind },
      h("span", { class: "t" }, when(e.time)), h("span", { class: "kind" }, e.kind), h("span", {}, e.attempt ? `attempt ${e.attempt} · ` : "", e.message || ""),
      e.placement ? h("span", { class: "muted" }, placementText(e.placement)) : null)));
    await refreshLogs();
  };
  const refreshLogs = async () => {
    try {
      const l = await api("/v1/jobs/" + encodeURIComponent(id) + "/logs?tail=200");
      const lines = l.lines || [];
      logs.textContent = lines.length ? lines.map((x) => `${when(x.time)} [${x.attempt}] ${x.text}`).join("\n") : "No output yet.";
      logs.scrollTop = logs.scrollHeight;
    } catch (e) {
      if (e instanceof Unauthenticated) throw e;
      logs.textContent = e.status === 404 ? "No logs for this job." : "Logs: " + e.message;
    }
  };
  await refresh();
  stopView = live("/v1/jobs/" + encodeURIComponent(id) + "/events", refresh, 2000);
}

// marketView lists the market one row per GPU and purchase option, at its
// cheapest offer per GPU; a row opens that group's cheapest offers (by
// region and zone) and the price history of the cheapest.
async function marketView() {
  const { q } = params();
  const gpu = h("input", { value: q.get("gpu") || "", placeholder: "any GPU", size: 10 });
  const purchase = h("select", {}, h("option", { value: "" }, "any purchase"), ["spot", "on-demand", "reserved"].map((p) => h("option", { value: p, selected: q.get("purchase") === p }, p)));
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); const n = new URLSearchParams(); if (gpu.value) n.set("gpu", gpu.value); if (purchase.value) n.set("purchase", purchase.value); setQuery(n); } },
    h("label", {}, "GPU", gpu), h("label", {}, "Purchase", purchase), h("button", { type: "submit" }, "Filter"));
  const chart = h("div", { id: "price-chart" }, h("p", { class: "muted" }, "Pick a row to see its offers and price history."));
  const detail = h("div");
  const body = h("tbody");
  const stamp = h("p", { class: "muted" });
  show(h("h1", {}, "Market"), form, stamp, chart,
    h("table", { id: "offers" }, h("thead", {}, h("tr", {}, ["GPU", "Purchase", "Cheapest offer"].map((c) => h("th", {}, c)),
      h("th", { class: "num" }, "Price/h"), h("th", { class: "num" }, "Per GPU/h"), h("th", { class: "num" }, "On-demand/h"), h("th", { class: "num" }, "Discount"), h("th", {}, "Capacity"), h("th", { class: "num" }, "Regions"), h("th", { class: "num" }, "Offers"))), body),
    detail);
  const aq = new URLSearchParams();
  for (const k of ["gpu", "purchase"]) if (q.get(k)) aq.set(k, q.get(k));
  const m = await api("/v1/market?" + aq);
  stamp.textContent = `${m.offers.length} offers · prices as of ${when(m.updated_at)}`;
  const groups = new Map();
  for (const o of m.offers) {
    const k = [o.gpu, o.purchase].join("|");
    if (!groups.has(k)) groups.set(k, []);
    groups.get(k).push(o);
  }
  const rank = { high: 3, medium: 2, low: 1 };
  const rows = [...groups.values()].map((os) => {
    os.sort((a, b) => Number(a.price_per_hour) / a.gpus - Number(b.price_per_hour) / b.gpus);
    return os;
  }).sort((a, b) => a[0].gpu.localeCompare(b[0].gpu) || a[0].purchase.localeCompare(b[0].purchase));
  const pick = async (os) => {
    const o = os[0];
    const hist = await api("/v1/market/prices?key=" + encodeURIComponent(o.key));
    chart.replaceChildren(h("h2", {}, `Price history: ${o.gpu} ${o.purchase}, ${o.provider} ${o.zone || o.region} ${o.instance_type}`),
      lineChart(hist.points.map((p) => [new Date(p.time).getTime(), Number(p.price_per_hour)]), "$/h"));
    const top = os.slice(0, 50);
    detail.replaceChildren(h("h2", {}, `${o.gpu} ${o.purchase}: the ${top.length} cheapest of ${os.length} offers`),
      h("table", { id: "group-offers" }, h("thead", {}, h("tr", {}, ["Provider", "Region", "Zone", "Instance", "GPUs"].map((c) => h("th", {}, c)), h("th", { class: "num" }, "Price/h"), h("th", { class: "num" }, "Per GPU/h"), h("th", {}, "Capacity"), h("th", { class: "num" }, "Available"))),
        h("tbody", {}, top.map((x) => h("tr", { class: "click", onclick: () => pick([x]).then(() => detail.replaceChildren()).catch(() => {}) }, h("td", {}, x.provider), h("td", {}, x.region), h("td", {}, x.zone || "–"), h("td", {}, x.instance_type), h("td", {}, x.gpus),
          h("td", { class: "num" }, usd(x.price_per_hour)), h("td", { class: "num" }, usd(Number(x.price_per_hour) / x.gpus)), h("td", {}, x.capacity || "–"), h("td", { class: "num" }, x.available < 0 ? "?" : x.available))))));
  };
  body.replaceChildren(...rows.map((os) => {
    const o = os[0];
    const disc = Number(o.on_demand_price_per_hour) > 0 ? 1 - Number(o.price_per_hour) / Number(o.on_demand_price_per_hour) : 0;
    const best = os.reduce((b, x) => (rank[x.capacity] || 0) > (rank[b] || 0) ? x.capacity : b, "");
    const regions = new Set(os.map((x) => x.provider + " " + x.region)).size;
    return h("tr", { class: "click", onclick: () => pick(os).catch(() => {}) }, h("td", {}, o.gpu), h("td", {}, o.purchase),
      h("td", {}, `${o.provider} ${o.zone || o.region} ${o.instance_type} (${o.gpus} GPU)`),
      h("td", { class: "num" }, usd(o.price_per_hour)), h("td", { class: "num" }, usd(Number(o.price_per_hour) / o.gpus)), h("td", { class: "num" }, usd(o.on_demand_price_per_hour)),
      h("td", { class: "num" }, disc > 0 ? pct(disc) : "–"), h("td", {}, best || "–"), h("td", { class: "num" }, regions), h("td", { class: "num" }, os.length));
  }));
  const spot = rows.find((os) => os[0].purchase === "spot") || rows[0];
  if (spot) await pick(spot).catch(() => {});
  stopView = poller(async () => { const n = await api("/v1/market?" + aq); stamp.textContent = `${n.offers.length} offers · prices as of ${when(n.updated_at)}`; }, 10000);
}

async function costsView() {
  const { q } = params();
  const group = h("select", { id: "group-by" }, ["team", "provider", "purchase", "region", "gpu", "kind", "job"].map((g) => h("option", { value: g, selected: (q.get("group_by") || "team") === g }, g)));
  const hours = h("select", { id: "period" }, [["6", "6 hours"], ["24", "24 hours"], ["168", "7 days"], ["720", "30 days"]].map(([v, t]) => h("option", { value: v, selected: (q.get("hours") || "24") === v }, t)));
  const form = h("form", { class: "filters", onsubmit: (e) => { e.preventDefault(); setQuery(new URLSearchParams({ group_by: group.value, hours: hours.value })); } },
    h("label", {}, "Group by", group), h("label", {}, "Period", hours), h("button", { type: "submit" }, "Show"));
  const out = h("div", { id: "costs" });
  show(h("h1", {}, "Costs"), form, out);
  const hrs = Number(q.get("hours") || "24");
  const bucket = hrs <= 6 ? "15m" : hrs <= 24 ? "1h" : hrs <= 168 ? "6h" : "24h";
  const refresh = async () => {
    const c = await api(`/v1/costs?group_by=${encodeURIComponent(group.value)}&hours=${hrs}&bucket=${bucket}`);
    const legend = h("div", { class: "legend" }, c.groups.map((g, i) => { const s = h("span", {}, `${g.key} ${usd(g.total_usd)}`); s.style.setProperty("--c", COLORS[i % COLORS.length]); return s; }));
    out.replaceChildren(h("div", { class: "cards" },
      h("div", { class: "card" }, h("div", { class: "k" }, "Spend in period"), h("div", { class: "v", id: "spend-total" }, usd(c.total_usd))),
      h("div", { class: "card" }, h("div", { class: "k" }, "Jobs billed"), h("div", { class: "v" }, c.jobs)),
      h("div", { class: "card" }, h("div", { class: "k" }, "Overhead (spend no job owns)"), h("div", { class: "v", id: "overhead-total" }, usd(c.overhead_usd || 0))),
      h("div", { class: "card" }, h("div", { class: "k" }, "Saved vs on-demand (jobs finished in period)"), h("div", { class: "v", id: "savings-total" }, usd(c.savings_usd)))),
      await budgets(),
      h("h2", {}, `Spend per ${c.group_by}, ${c.bucket} steps`), legend, stackedBars(c),
      h("table", { id: "cost-groups" }, h("thead", {}, h("tr", {}, h("th", {}, c.group_by), h("th", { class: "num" }, "Spend"), h("th", { class: "num" }, "Share"), h("th", { class: "num" }, "Overhead"),
        h("th", { class: "num" }, "Finished jobs"), h("th", { class: "num" }, "On-demand baseline"), h("th", { class: "num" }, "Saved"))),
        h("tbody", {}, c.groups.map((g) => h("tr", {}, h("td", {}, g.key), h("td", { class: "num" }, usd(g.total_usd)),
          h("td", { class: "num" }, Number(c.total_usd) > 0 ? pct(Number(g.total_usd) / Number(c.total_usd)) : "–"),
          h("td", { class: "num" }, Number(g.overhead_usd) ? usd(g.overhead_usd) : "–"),
          h("td", { class: "num" }, g.finished_jobs), h("td", { class: "num" }, g.finished_jobs ? usd(g.baseline_usd) : "–"),
          h("td", { class: "num" }, g.finished_jobs ? usd(g.savings_usd) : "–"))))));
  };
  await refresh();
  stopView = poller(refresh, 15000);
}

// budgets is the teams' monthly budgets, if any are set: spent this month
// against each.
async function budgets() {
  const b = await api("/v1/budgets");
  if (!b.budgets.length) return h("div");
  return h("div", {}, h("h2", {}, "Budgets this month"),
    h("table", { id: "budgets" }, h("thead", {}, h("tr", {}, h("th", {}, "Team"), h("th", { class: "num" }, "Budget"), h("th", { class: "num" }, "Spent"),
      h("th", { class: "num" }, "Used"), h("th", {}, "Limit"))),
      h("tbody", {}, b.budgets.map((x) => h("tr", { class: x.over ? "over" : "" }, h("td", {}, x.team), h("td", { class: "num" }, usd(x.budget_usd)),
        h("td", { class: "num" }, usd(x.spent_usd)), h("td", { class: "num" }, pct(x.used)),
        h("td", {}, x.hard ? "hard: new jobs wait" : `soft: alerts at ${x.soft_percent.join("%, ")}%`))))));
}

async function alertsView() {
  const body = h("tbody");
  show(h("h1", {}, "Alerts"), h("table", { id: "alerts" }, h("thead", {}, h("tr", {}, ["Time", "Severity", "Kind", "Team", "Job", "Summary"].map((c) => h("th", {}, c)))), body));
  const refresh = async () => {
    const l = await api("/v1/alerts?limit=100");
    body.replaceChildren(...l.alerts.map((a) => h("tr", {}, h("td", {}, when(a.time)), h("td", {}, h("span", { class: "badge " + (a.severity === "critical" ? "failed" : a.severity === "warning" ? "checkpointing" : "") }, a.severity)),
      h("td", {}, a.kind), h("td", {}, a.team || "–"), h("td", {}, a.job_id ? h("a", { href: "#/jobs/" + a.job_id }, a.job_id.slice(0, 14) + "…") : "–"), h("td", {}, a.summary))));
    if (!l.alerts.length) body.append(h("tr", {}, h("td", { colspan: 6, class: "muted" }, "No alerts.")));
  };
  await refresh();
  stopView = poller(refresh, 10000);
}

// ---- charts ----------------------------------------------------------------

function lineChart(points, unit) {
  const W = 900, H = 220, L = 60, B = 24;
  if (points.length === 0) return h("p", { class: "muted" }, "No prices yet.");
  if (points.length === 1) points = [points[0], [points[0][0] + 1, points[0][1]]];
  const xs = points.map((p) => p[0]), ys = points.map((p) => p[1]);
  const x0 = Math.min(...xs), x1 = Math.max(...xs), y0 = Math.min(...ys) * 0.95, y1 = Math.max(...ys) * 1.05 || 1;
  const sx = (x) => L + ((x - x0) / (x1 - x0 || 1)) * (W - L - 10), sy = (y) => H - B - ((y - y0) / (y1 - y0 || 1)) * (H - B - 10);
  // A price holds until the next: draw steps.
  const pts = [];
  points.forEach((p, i) => { if (i) pts.push(`${sx(p[0])},${sy(points[i - 1][1])}`); pts.push(`${sx(p[0])},${sy(p[1])}`); });
  return h("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", height: H, role: "img", "aria-label": "price history" },
    h("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#ccc" }),
    h("text", { x: 4, y: sy(y1) + 10 }, "$" + y1.toFixed(3)), h("text", { x: 4, y: H - B }, "$" + y0.toFixed(3)),
    h("text", { x: L, y: H - 6 }, when(x0)), h("text", { x: W - 130, y: H - 6 }, when(x1)),
    h("polyline", { points: pts.join(" "), fill: "none", stroke: COLORS[0], "stroke-width": 2 }),
    h("text", { x: L + 4, y: 12 }, unit));
}

function stackedBars(c) {
  const W = 900, H = 260, L = 70, B = 24;
  const n = c.starts.length;
  const totals = c.starts.map((_, i) => c.groups.reduce((s, g) => s + Number(g.series[i]), 0));
  const top = Math.max(...totals, 0) || 1;
  const bw = (W - L - 10) / Math.max(n, 1);
  const g = h("g");
  c.starts.forEach((t, i) => {
    let y = H - B;
    c.groups.forEach((grp, gi) => {
      const v = Number(grp.series[i]);
      if (v <= 0) return;
      const hgt = (v / top) * (H - B - 10);
      y -= hgt;
      g.append(h("rect", { x: L + i * bw + 1, y, width: Math.max(bw - 2, 1), height: hgt, fill: COLORS[gi % COLORS.length] },
        h("title", {}, `${grp.key} ${when(t)}: ${usd(v)}`)));
    });
  });
  return h("svg", { viewBox: `0 0 ${W} ${H}`, width: "100%", height: H, role: "img", "aria-label": "spend over time", id: "spend-chart" },
    h("line", { x1: L, y1: H - B, x2: W, y2: H - B, stroke: "#ccc" }),
    h("text", { x: 4, y: 14 }, usd(top)), h("text", { x: 4, y: H - B }, "$0"),
    h("text", { x: L, y: H - 6 }, when(c.from)), h("text", { x: W - 130, y: H - 6 }, when(c.to)), g);
}

// ---- routing ---------------------------------------------------------------

async function route() {
  stopView();
  stopView = () => {};
  setLive(false);
  const { parts } = params();
  for (const a of document.querySelectorAll("nav a")) a.classList.toggle("active", a.dataset.nav === parts[0]);
  if (!token()) { login(); return; }
  try {
    if (parts[0] === "jobs" && parts[1]) await jobView(decodeURIComponent(parts[1]));
    else if (parts[0] === "market") await marketView();
    else if (parts[0] === "costs") await costsView();
    else if (parts[0] === "alerts") await alertsView();
    else await jobsView();
  } catch (e) {
    if (e instanceof Unauthenticated) return;
    show(h("h1", {}, "Something went wrong"), h("p", { class: "error", id: "view-error" }, e.message));
  }
}

window.addEventListener("hashchange", route);
window.addEventListener("DOMContentLoaded", () => {
  document.getElementById("login-form").addEventListener("submit", signIn);
  route();
});
