// The search page: repository, query, time range; a histogram of the matching events, the events
// newest first with a field sidebar, aggregate results as a table and a chart, live mode, export
// and deep links (/search?repo=R&query=Q&start=S&end=E).
import uPlot from "uplot";
import { ApiError, WhoAmI, authHeaders, getJson, repoPath, repositories, request } from "./api";
import { clear, download, formatTime, h } from "./dom";

type Row = Record<string, string>;

const RELATIVE = ["5m", "15m", "1h", "24h", "7d", "30d"];
const HISTOGRAM_BUCKETS = 60;
const SHOWN_EVENTS = 200;
const TOP_VALUES = 5;

// A field name as the query language reads it: bare when it is a plain name, else backquoted.
export function fieldRef(name: string): string {
  return /^[A-Za-z_@#][A-Za-z0-9_@#.:\[\]]*$/.test(name) ? name : "`" + name.replace(/`/g, "") + "`";
}
export function quote(value: string): string {
  return '"' + value.replace(/\\/g, "\\\\").replace(/"/g, '\\"') + '"';
}
// The query with `field="value"` added as a filter after it.
export function addFilter(q: string, field: string, value: string): string {
  const filter = `${fieldRef(field)}=${quote(value)}`;
  return q.trim() === "" ? filter : `${q.trimEnd()}\n| ${filter}`;
}

function toCsv(rows: Row[]): string {
  const cols: string[] = [];
  const seen = new Set<string>();
  for (const r of rows) for (const k of Object.keys(r)) if (!seen.has(k)) { seen.add(k); cols.push(k); }
  const cell = (v: string | undefined) => {
    const s = v ?? "";
    return /[",\r\n]/.test(s) ? '"' + s.replace(/"/g, '""') + '"' : s;
  };
  return [cols.map(cell).join(","), ...rows.map((r) => cols.map((c) => cell(r[c])).join(","))].join("\r\n") + "\r\n";
}

// epoch ms <-> the value of an <input type="datetime-local"> (UTC).
function toLocalInput(ms: number): string {
  return new Date(ms).toISOString().slice(0, 19);
}
function fromLocalInput(v: string): number | null {
  if (!v) return null;
  const ms = Date.parse(v.endsWith("Z") ? v : v + "Z");
  return Number.isFinite(ms) ? ms : null;
}

export function searchPage(root: HTMLElement, _me: WhoAmI): () => void {
  const params = new URLSearchParams(location.search);
  let rows: Row[] = [];            // the current results (events newest first, or aggregate rows)
  let aggregate = false;
  let running: { abort: () => void } | null = null;
  let liveCount = 0;
  let paused = false;
  let pending: Row[] = [];        // live events that arrived while paused, newest first
  let plot: uPlot | null = null;
  let aggPlot: uPlot | null = null;

  const repoSelect = h("select", { testid: "repo-select" });
  const queryInput = h("textarea", { testid: "query-input", rows: 3, spellcheck: "false",
                                     placeholder: "LogScale query, e.g.  error | groupBy(host)" });
  const rangeSelect = h("select", { testid: "time-range" },
    ...RELATIVE.map((r) => h("option", { value: r }, `Last ${r}`)), h("option", { value: "abs" }, "Absolute..."));
  const startInput = h("input", { type: "datetime-local", step: 1, testid: "time-start" });
  const endInput = h("input", { type: "datetime-local", step: 1, testid: "time-end" });
  const absBox = h("span", { class: "abs hidden" }, startInput, " to ", endInput, " UTC");
  const liveToggle = h("input", { type: "checkbox", testid: "live-toggle" });
  const runButton = h("button", { testid: "run-button", class: "primary" }, "Run");
  const cancelButton = h("button", { testid: "cancel-button", disabled: true }, "Cancel");
  const pauseButton = h("button", { testid: "pause-button", class: "hidden" }, "Pause");
  const status = h("div", { class: "status", testid: "search-status" });
  const errorBox = h("div", { class: "error", testid: "search-error" });
  const histogram = h("div", { class: "histogram", testid: "histogram" });
  const fields = h("aside", { class: "fields", testid: "fields" });
  const results = h("div", { class: "results", testid: "results" });
  const exportNd = h("button", { testid: "export-ndjson" }, "Export NDJSON");
  const exportCsv = h("button", { testid: "export-csv" }, "Export CSV");

  root.append(
    h("div", { class: "searchbar" },
      h("label", {}, "Repository ", repoSelect),
      h("label", {}, "Time ", rangeSelect), absBox,
      h("label", { title: "Live: keep running over a sliding window" }, liveToggle, " Live"),
      runButton, cancelButton, pauseButton),
    queryInput,
    h("div", { class: "statusline" }, status, h("span", { class: "spacer" }), exportNd, exportCsv),
    errorBox, histogram,
    h("div", { class: "resultarea" }, fields, results));

  // ---- state <-> controls <-> URL ----
  function range(): { start: string; end: string } {
    if (rangeSelect.value !== "abs") return { start: rangeSelect.value, end: "" };
    const s = fromLocalInput(startInput.value);
    const e = fromLocalInput(endInput.value);
    return { start: s === null ? "1h" : String(s), end: e === null ? "" : String(e) };
  }
  function setRange(start: string, end: string): void {
    if (RELATIVE.includes(start) && !end) {
      rangeSelect.value = start;
    } else if (/^\d+$/.test(start)) {
      rangeSelect.value = "abs";
      startInput.value = toLocalInput(Number(start));
      endInput.value = /^\d+$/.test(end) ? toLocalInput(Number(end)) : toLocalInput(Date.now());
    } else {
      // Another relative form (e.g. 2h): keep it as given.
      if (![...rangeSelect.options].some((o) => o.value === start)) {
        rangeSelect.insertBefore(h("option", { value: start }, `Last ${start}`), rangeSelect.lastChild);
      }
      rangeSelect.value = start;
    }
    absBox.classList.toggle("hidden", rangeSelect.value !== "abs");
  }
  function writeUrl(): void {
    const r = range();
    const p = new URLSearchParams({ repo: repoSelect.value, query: queryInput.value, start: r.start });
    if (r.end) p.set("end", r.end);
    if (liveToggle.checked) p.set("live", "1");
    history.replaceState(null, "", `/search?${p}`);
  }

  rangeSelect.addEventListener("change", () => {
    if (rangeSelect.value === "abs" && !startInput.value) {
      startInput.value = toLocalInput(Date.now() - 3600_000);
      endInput.value = toLocalInput(Date.now());
    }
    absBox.classList.toggle("hidden", rangeSelect.value !== "abs");
  });
  queryInput.addEventListener("keydown", (ev) => {
    if (ev.key === "Enter" && !ev.shiftKey) {
      ev.preventDefault();
      run();
    }
  });
  runButton.addEventListener("click", () => run());
  cancelButton.addEventListener("click", () => stop("cancelled"));
  pauseButton.addEventListener("click", () => {
    paused = !paused;
    pauseButton.textContent = paused ? "Resume" : "Pause";
    if (!paused && pending.length) {
      rows = [...pending, ...rows];
      pending = [];
      renderEvents();
    }
    liveStatus();
  });
  exportNd.addEventListener("click", () =>
    download("sediment-results.ndjson", "application/x-ndjson", rows.map((r) => JSON.stringify(r)).join("\n") + "\n"));
  exportCsv.addEventListener("click", () => download("sediment-results.csv", "text/csv", toCsv(rows)));

  // ---- running ----
  function stop(why: string | null): void {
    if (running) {
      running.abort();
      running = null;
      if (why) status.textContent += ` (${why})`;
    }
    cancelButton.disabled = true;
    runButton.disabled = false;
    pauseButton.classList.add("hidden");
  }

  function setCount(n: number, what: string): void {
    clear(status);
    status.append(h("span", { testid: "event-count" }, String(n)), ` ${what}`);
  }

  async function run(): Promise<void> {
    stop(null);
    errorBox.textContent = "";
    const repo = repoSelect.value;
    if (!repo) {
      errorBox.textContent = "No repository to search.";
      return;
    }
    writeUrl();
    rows = [];
    pending = [];
    paused = false;
    clearResults();
    runButton.disabled = true;
    cancelButton.disabled = false;
    const r = range();
    if (liveToggle.checked) return runLive(repo, queryInput.value, r.start);
    await runJob(repo, queryInput.value, r.start, r.end);
  }

  function clearResults(): void {
    clear(results);
    clear(fields);
    clear(histogram);
    if (plot) { plot.destroy(); plot = null; }
    if (aggPlot) { aggPlot.destroy(); aggPlot = null; }
    histogram.classList.add("hidden");
  }

  function showError(e: unknown): void {
    if (e instanceof DOMException && e.name === "AbortError") return;
    errorBox.textContent = e instanceof ApiError ? `${e.status}: ${e.message}` : String((e as Error).message ?? e);
    status.textContent = "";
  }

  // A search over a fixed range: a query job (its poll answer says whether the query is an
  // aggregate) and, beside it, the histogram query `<q> | timeChart(buckets=60)`.
  async function runJob(repo: string, q: string, start: string, end: string): Promise<void> {
    const ctl = new AbortController();
    let jobId: string | null = null;
    const me = {
      abort: () => {
        ctl.abort();
        if (jobId) request("DELETE", `${repoPath(repo)}/queryjobs/${jobId}`).catch(() => {});
      },
    };
    running = me;
    status.textContent = "running...";
    const body: Record<string, unknown> = { queryString: q, start };
    if (end) body.end = end;
    const hist = fetchHistogram(repo, q, start, end, ctl.signal);
    try {
      const created = await (await request("POST", `${repoPath(repo)}/queryjobs`, body, ctl.signal)).json();
      jobId = created.id;
      let poll: any;
      for (;;) {
        poll = await getJson(`${repoPath(repo)}/queryjobs/${jobId}`, ctl.signal);
        if (poll.done || running !== me) break;
        const md = poll.metaData ?? {};
        if (md.totalWork) status.textContent = `running... ${Math.round((100 * md.workDone) / md.totalWork)}%`;
        await new Promise((res) => setTimeout(res, Math.max(100, md.pollAfter ?? 250)));
      }
      if (running !== me) return;
      request("DELETE", `${repoPath(repo)}/queryjobs/${jobId}`).catch(() => {});
      jobId = null;
      const md = poll.metaData ?? {};
      aggregate = !!md.isAggregate;
      rows = poll.events as Row[];
      const warnings: string[] = (md.warnings ?? []).map((w: any) => w.message);
      if (aggregate) {
        setCount(rows.length, "rows");
        renderAggregate();
      } else {
        rows.sort((a, b) => Number(b["@timestamp"] ?? 0) - Number(a["@timestamp"] ?? 0));
        const buckets = await hist.catch(() => null);
        const total = buckets ? buckets.counts.reduce((a, b) => a + b, 0) : 0;
        setCount(Math.max(total, rows.length), "events");
        if (buckets) renderHistogram(buckets, md.queryStart, md.queryEnd);
        renderEvents();
      }
      if (warnings.length) errorBox.textContent = warnings.join("\n");
      status.append(` in ${md.timeMillis ?? "?"} ms`);
    } catch (e) {
      if (running === me) showError(e);
    } finally {
      if (running === me) {
        running = null;
        stop(null);
      }
    }
  }

  async function fetchHistogram(repo: string, q: string, start: string, end: string,
                                signal: AbortSignal): Promise<{ times: number[]; counts: number[] }> {
    const body: Record<string, unknown> = {
      queryString: `${q.trim() === "" ? "" : q + "\n| "}timeChart(buckets=${HISTOGRAM_BUCKETS}, function=count(as=_count))`,
      start,
    };
    if (end) body.end = end;
    const r = await request("POST", `${repoPath(repo)}/query`, body, signal);
    const out: Row[] = await r.json();
    out.sort((a, b) => Number(a._bucket) - Number(b._bucket));
    return { times: out.map((r) => Number(r._bucket) / 1000), counts: out.map((r) => Number(r._count ?? 0)) };
  }

  function renderHistogram(b: { times: number[]; counts: number[] }, qStart?: number, qEnd?: number): void {
    histogram.classList.remove("hidden");
    clear(histogram);
    const width = Math.max(300, histogram.clientWidth || root.clientWidth - 20);
    const barPaths = uPlot.paths.bars!({ size: [0.9, 100] });
    plot = new uPlot({
      width, height: 130,
      scales: { x: { time: true, min: qStart ? qStart / 1000 : undefined, max: qEnd ? qEnd / 1000 : undefined } },
      legend: { show: false },
      cursor: { drag: { x: true, y: false, setScale: false } },
      axes: [{}, { size: 50 }],
      series: [{}, { label: "events", fill: "rgba(47,110,186,0.6)", stroke: "rgb(47,110,186)", paths: barPaths, points: { show: false } }],
      hooks: {
        setSelect: [(u: uPlot) => {
          if (u.select.width < 3) return;
          const from = Math.floor(u.posToVal(u.select.left, "x") * 1000);
          const to = Math.ceil(u.posToVal(u.select.left + u.select.width, "x") * 1000);
          setRange(String(from), String(to));
          run();
        }],
      },
    }, [b.times, b.counts], histogram);
    histogram.setAttribute("data-buckets", String(b.counts.length));
    histogram.setAttribute("data-total", String(b.counts.reduce((a, c) => a + c, 0)));
  }

  // ---- events ----
  function renderEvents(): void {
    clear(results);
    const shown = rows.slice(0, SHOWN_EVENTS);
    const table = h("table", { class: "events", testid: "results-table" },
      h("thead", {}, h("tr", {}, h("th", {}, "@timestamp"), h("th", {}, "event"))));
    const tbody = h("tbody", {});
    for (const r of shown) {
      const raw = r["@rawstring"] ?? JSON.stringify(r);
      const tr = h("tr", { testid: "result-row", class: "event" },
        h("td", { class: "ts" }, formatTime(r["@timestamp"])), h("td", { class: "raw" }, raw));
      tr.addEventListener("click", () => {
        const next = tr.nextElementSibling;
        if (next && next.classList.contains("detail")) { next.remove(); return; }
        const detail = h("table", { class: "kv" },
          ...Object.keys(r).sort().map((k) => h("tr", {}, h("th", {}, k), h("td", {}, r[k]))));
        tr.after(h("tr", { class: "detail", testid: "event-detail" }, h("td", { colspan: 2 }, detail)));
      });
      tbody.appendChild(tr);
    }
    table.appendChild(tbody);
    if (rows.length > SHOWN_EVENTS) {
      results.append(h("div", { class: "note" }, `showing the newest ${SHOWN_EVENTS} of ${rows.length} events (export has them all)`));
    }
    results.appendChild(table);
    renderFields();
  }

  function renderFields(): void {
    clear(fields);
    const counts = new Map<string, Map<string, number>>();
    for (const r of rows) {
      for (const [k, v] of Object.entries(r)) {
        if (k === "@rawstring" || k === "@timestamp" || k === "@id" || k === "@timestamp.nanos") continue;
        let m = counts.get(k);
        if (!m) counts.set(k, (m = new Map()));
        m.set(v, (m.get(v) ?? 0) + 1);
      }
    }
    fields.append(h("h3", {}, "Fields"));
    for (const name of [...counts.keys()].sort()) {
      const values = [...counts.get(name)!.entries()].sort((a, b) => b[1] - a[1]).slice(0, TOP_VALUES);
      fields.append(h("details", { class: "field", testid: `field-${name}`, open: true },
        h("summary", {}, name),
        h("ul", {}, ...values.map(([v, n]) =>
          h("li", {}, h("a", { href: "#", testid: "field-value", "data-field": name, "data-value": v,
                               title: `add ${name}=${v} to the query`,
                               onclick: (ev: Event) => {
                                 ev.preventDefault();
                                 queryInput.value = addFilter(queryInput.value, name, v);
                                 run();
                               } }, v === "" ? "(empty)" : v), h("span", { class: "n" }, ` ${n}`))))));
    }
  }

  // ---- aggregates ----
  function renderAggregate(): void {
    clear(results);
    clear(fields);
    const cols: string[] = [];
    for (const r of rows) for (const k of Object.keys(r)) if (!cols.includes(k)) cols.push(k);
    const chartBox = h("div", { class: "aggchart", testid: "aggregate-chart" });
    results.append(chartBox, h("table", { class: "agg", testid: "aggregate-table" },
      h("thead", {}, h("tr", {}, ...cols.map((c) => h("th", {}, c)))),
      h("tbody", {}, ...rows.map((r) => h("tr", { testid: "aggregate-row" }, ...cols.map((c) => h("td", { "data-col": c }, r[c] ?? "")))))));
    renderAggregateChart(chartBox, cols);
  }

  function renderAggregateChart(box: HTMLElement, cols: string[]): void {
    if (aggPlot) { aggPlot.destroy(); aggPlot = null; }
    const numeric = (c: string) => rows.length > 0 && rows.every((r) => r[c] === undefined || r[c] === "" || Number.isFinite(Number(r[c])));
    const width = Math.max(300, results.clientWidth || root.clientWidth - 20);
    if (cols.includes("_bucket")) {
      // timeChart: one series per (series value x metric).
      const metrics = cols.filter((c) => c !== "_bucket" && numeric(c));
      const seriesField = cols.find((c) => c !== "_bucket" && !metrics.includes(c));
      const times = [...new Set(rows.map((r) => Number(r._bucket)))].sort((a, b) => a - b);
      const keys: string[] = [];
      const data = new Map<string, (number | null)[]>();
      for (const r of rows) {
        for (const m of metrics) {
          const key = seriesField ? `${r[seriesField]} ${m}` : m;
          if (!data.has(key)) { data.set(key, times.map(() => null)); keys.push(key); }
          data.get(key)![times.indexOf(Number(r._bucket))] = Number(r[m]);
        }
      }
      const palette = ["#2f6eba", "#d9822b", "#3a9a4a", "#b0413e", "#7d5ba6", "#1b998b", "#c2a800"];
      aggPlot = new uPlot({ width, height: 220, scales: { x: { time: true } },
        series: [{}, ...keys.map((k, i) => ({ label: k, stroke: palette[i % palette.length], width: 2 }))] },
        [times.map((t) => t / 1000), ...keys.map((k) => data.get(k)!)] as uPlot.AlignedData, box);
      return;
    }
    // groupBy and the like: bars of the first numeric column by row.
    const metric = cols.find((c) => numeric(c));
    if (!metric || rows.length === 0 || rows.length > 200) { box.classList.add("hidden"); return; }
    const label = cols.find((c) => c !== metric) ?? metric;
    const names = rows.map((r) => r[label] ?? "");
    aggPlot = new uPlot({
      width, height: 200, legend: { show: false },
      scales: { x: { time: false, range: [-0.5, rows.length - 0.5] } },
      axes: [{ values: (_u, splits) => splits.map((s) => (Number.isInteger(s) ? names[s] ?? "" : "")), space: 40 }, { size: 60 }],
      series: [{}, { label: metric, fill: "rgba(47,110,186,0.6)", stroke: "rgb(47,110,186)",
                     paths: uPlot.paths.bars!({ size: [0.7, 80] }), points: { show: false } }],
    }, [rows.map((_, i) => i), rows.map((r) => Number(r[metric]))], box);
  }

  // ---- live ----
  function liveStatus(): void {
    clear(status);
    status.append("live: ", h("span", { testid: "live-count" }, String(liveCount)),
                  aggregate ? " updates" : " events", paused ? ` (paused, ${pending.length} waiting)` : "");
  }

  async function runLive(repo: string, q: string, start: string): Promise<void> {
    const ctl = new AbortController();
    const me = { abort: () => ctl.abort() };
    running = me;
    liveCount = 0;
    aggregate = false;
    pauseButton.classList.remove("hidden");
    pauseButton.textContent = "Pause";
    liveStatus();
    try {
      const r = await fetch(`${repoPath(repo)}/query`, {
        method: "POST",
        headers: authHeaders({ "Content-Type": "application/json", Accept: "application/x-ndjson" }),
        body: JSON.stringify({ queryString: q, start, isLive: true }),
        signal: ctl.signal,
      });
      if (!r.ok) {
        const text = await r.text();
        let msg = text;
        try { msg = JSON.parse(text).error ?? text; } catch { /* text */ }
        throw new ApiError(r.status, msg);
      }
      renderEvents();
      const reader = r.body!.getReader();
      const decoder = new TextDecoder();
      let buf = "";
      for (;;) {
        const { value, done } = await reader.read();
        if (done || running !== me) break;
        buf += decoder.decode(value, { stream: true });
        let nl: number;
        const fresh: Row[] = [];
        while ((nl = buf.indexOf("\n")) >= 0) {
          const line = buf.slice(0, nl).trim();
          buf = buf.slice(nl + 1);
          if (!line) continue;
          const item = JSON.parse(line);
          if (Array.isArray(item)) {
            aggregate = true;
            rows = item;
            liveCount++;
            if (!paused) renderAggregate();
          } else {
            fresh.push(item);
          }
        }
        if (fresh.length) {
          fresh.sort((a, b) => Number(b["@timestamp"] ?? 0) - Number(a["@timestamp"] ?? 0));
          liveCount += fresh.length;
          if (paused) pending = [...fresh, ...pending];
          else {
            rows = [...fresh, ...rows];
            renderEvents();
          }
        }
        liveStatus();
      }
    } catch (e) {
      if (running === me) showError(e);
    } finally {
      if (running === me) {
        running = null;
        stop(null);
      }
    }
  }

  // ---- start ----
  setRange(params.get("start") ?? "1h", params.get("end") ?? "");
  queryInput.value = params.get("query") ?? "";
  liveToggle.checked = params.get("live") === "1";
  repositories().then(({ repos }) => {
    const names = repos.map((r) => r.name).sort();
    const wanted = params.get("repo");
    if (wanted && !names.includes(wanted)) names.unshift(wanted);
    for (const n of names) repoSelect.append(h("option", { value: n }, n));
    if (wanted) repoSelect.value = wanted;
    repoSelect.setAttribute("data-loaded", "1");
    if (params.has("repo")) run();
  }).catch(showError);
  queryInput.focus();

  return () => stop(null);
}
