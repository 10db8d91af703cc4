// Analytics: the zone's requests over a time range (GET /zones/{zone}/analytics/requests): the totals as a row of
// figures, the requests over time by network across the width, then in a grid the requests by JSON-RPC method and
// the top methods, the requests by status and by cache status, the errors and the upstream time's p50 and p99.
// Charts (chart.js), each with its numbers as a table behind "Show table". A method of the top methods narrows the
// whole page to it (the endpoint's method filter), shown as a chip that removes it.
import { v4 } from "../api.js";
import { h, chip, errorBox, pageHead } from "../dom.js";
import { barChart, lineChart } from "../chart.js";
import { rangePicker, rangeQuery } from "../time_range.js";

let chosenRange = "24h";
let chosenMethod = null; // {zoneId, method}: the JSON-RPC method the page is narrowed to, in this zone

function percent(part, whole) {
  if (!whole) return null;
  const value = (100 * part) / whole;
  return `${value >= 10 || value === 0 ? value.toFixed(0) : value.toFixed(1)}%`;
}

/** The totals as a row of figures: each a label over its number, some with a line under it. */
function totals(result) {
  const item = (label, value, note) =>
    h("div", { className: "total" }, h("dt", {}, label), h("dd", {}, String(value)), note ? h("dd", { className: "total-note" }, note) : null);
  const { p50_ms_total: p50, p99_ms_total: p99 } = result.upstream_time;
  const { requests, errors, cache_hits: hits, cache_misses: misses } = result.totals;
  const errorRate = percent(errors, requests);
  const hitRatio = percent(hits, hits + misses);
  return h(
    "dl",
    { className: "totals" },
    item("Requests", requests),
    item("JSON-RPC calls", result.totals.jsonrpc_requests),
    item("Errors", errors, errorRate === null ? null : `${errorRate} of requests`),
    item("Upstream p50", p50 === null ? "–" : `${p50} ms`),
    item("Upstream p99", p99 === null ? "–" : `${p99} ms`),
    item("Cache hit ratio", hitRatio ?? "–", hits + misses ? `${hits} of ${hits + misses} cacheable` : "nothing cacheable"),
  );
}

function coverage(result) {
  const lines = [h("span", {}, `From ${result.since} to ${result.until}, in buckets of ${result.bucket_seconds} s.`)];
  if (result.retained_since) {
    lines.push(
      h("strong", {}, ` Retention has deleted older records: the counts are complete from ${result.retained_since}.`),
    );
  }
  return h("p", { className: "hint coverage" }, lines);
}

/** The Analytics page of `context.zone`. */
export async function analyticsPage(context) {
  const { zone } = context;
  const section = h("section", { className: "analytics" });
  const heading = h("h1", { tabindex: "-1" }, "Analytics");
  if (!zone) {
    section.append(heading, h("p", {}, "No zone: pick or create a zone first."));
    return section;
  }
  if (chosenMethod && chosenMethod.zoneId !== zone.id) chosenMethod = null;
  const errors = h("div", { className: "errors" });
  const status = h("p", { className: "status", role: "status" });
  const chips = h("span", { className: "chips" });
  const body = h("div", { className: "analytics-body", "aria-live": "polite", "aria-busy": "false" });
  const method = () => (chosenMethod ? chosenMethod.method : null);
  let loads = 0; // the answer of a load asked before the last one is stale: it is not shown

  async function load() {
    loads += 1;
    const mine = loads;
    showChips();
    body.setAttribute("aria-busy", "true");
    const narrowed = method() === null ? "" : `&method=${encodeURIComponent(method())}`;
    let result = null;
    let failure = null;
    try {
      result = await v4("GET", `/zones/${zone.id}/analytics/requests?${rangeQuery(chosenRange)}${narrowed}`);
    } catch (error) {
      failure = error;
    }
    if (mine !== loads) return;
    if (failure) errors.replaceChildren(errorBox(failure));
    else errors.replaceChildren();
    body.replaceChildren(...(result ? render(result) : []));
    body.setAttribute("aria-busy", "false");
  }

  async function narrowTo(name) {
    chosenMethod = name === null ? null : { zoneId: zone.id, method: name };
    status.textContent = name === null ? "Showing every request" : `Showing the requests of ${name} only`;
    await load();
    const removal = chips.querySelector("button");
    (removal || heading).focus();
  }

  function showChips() {
    const text = method() === null ? null : `JSON-RPC method: ${method()}`;
    chips.hidden = text === null;
    chips.replaceChildren(text === null ? [] : chip(text, () => narrowTo(null)));
  }

  function render(result) {
    const { buckets, series } = result;
    return [
      coverage(result),
      totals(result),
      h("div", { className: "main-chart" }, lineChart({ title: "Requests by network", buckets, series: series.network, size: "wide" })),
      h(
        "div",
        { className: "charts" },
        lineChart({ title: "Requests by JSON-RPC method", buckets, series: series.method }),
        barChart({
          title: "Top JSON-RPC methods",
          items: result.top_methods.map((item) => ({
            label: item.method,
            value: item.requests,
            detail: { errors: item.errors, "p50 ms": item.p50_ms, "p99 ms": item.p99_ms },
          })),
          // "none" names the requests without a method: there is no filter for them.
          selectable: (item) => item.label !== "none" && item.label !== method(),
          select: (item) => narrowTo(item.label),
          selectLabel: (item) => `Show ${item.label} only`,
        }),
        lineChart({ title: "Requests by status", buckets, series: series.status }),
        lineChart({ title: "Requests by cache status", buckets, series: series.cache_status }),
        lineChart({
          title: "Errors",
          buckets,
          series: result.totals.errors ? [{ key: "errors", total: result.totals.errors, counts: result.errors.counts }] : [],
        }),
        barChart({
          title: "Errors by code",
          items: result.errors.by_code.map((item) => ({ label: item.error, value: item.count })),
          unit: "errors",
        }),
        lineChart({
          title: "Upstream time",
          buckets,
          unit: "ms",
          series: result.upstream_time.p50_ms.some((value) => value !== null)
            ? [
                { key: "p50", counts: result.upstream_time.p50_ms },
                { key: "p99", counts: result.upstream_time.p99_ms },
              ]
            : [],
          summary: `Upstream time: p50 ${result.upstream_time.p50_ms_total ?? "–"} ms, p99 ${result.upstream_time.p99_ms_total ?? "–"} ms over the range.`,
        }),
      ),
    ];
  }

  section.append(
    pageHead(
      heading,
      `Requests to ${zone.name}, from the records the edge keeps (http_requests).`,
      rangePicker(chosenRange, (id) => {
        chosenRange = id;
        load();
      }),
      h("button", { type: "button", onclick: () => load() }, "Refresh"),
    ),
    h("div", { className: "filter-row" }, chips, status),
    errors,
    body,
  );
  await load();
  return section;
}
