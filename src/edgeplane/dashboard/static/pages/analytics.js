// Analytics: the zone's requests over a time range (GET /zones/{zone}/analytics/requests): over time by network,
// JSON-RPC method, status and cache status; the top methods; the errors; the upstream time's p50 and p99. Charts
// (chart.js), each with its numbers as a table behind "Show table".
import { v4 } from "../api.js";
import { h, errorBox } from "../dom.js";
import { barChart, lineChart } from "../chart.js";
import { rangePicker, rangeQuery } from "../time_range.js";

let chosenRange = "24h";

function totals(result) {
  const item = (label, value) => h("div", { className: "total" }, h("dt", {}, label), h("dd", {}, String(value)));
  const { p50_ms_total: p50, p99_ms_total: p99 } = result.upstream_time;
  return h(
    "dl",
    { className: "totals" },
    item("Requests", result.totals.requests),
    item("JSON-RPC calls", result.totals.jsonrpc_requests),
    item("Errors", result.totals.errors),
    item("Upstream p50", p50 === null ? "–" : `${p50} ms`),
    item("Upstream p99", p99 === null ? "–" : `${p99} ms`),
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
  const errors = h("div", { className: "errors" });
  const body = h("div", { className: "analytics-body", "aria-live": "polite", "aria-busy": "false" });

  async function load() {
    errors.replaceChildren();
    body.setAttribute("aria-busy", "true");
    try {
      const result = await v4("GET", `/zones/${zone.id}/analytics/requests?${rangeQuery(chosenRange)}`);
      body.replaceChildren(...render(result));
    } catch (error) {
      body.replaceChildren();
      errors.replaceChildren(errorBox(error));
    } finally {
      body.setAttribute("aria-busy", "false");
    }
  }

  function render(result) {
    const { buckets, series } = result;
    return [
      coverage(result),
      totals(result),
      h(
        "div",
        { className: "charts" },
        lineChart({ title: "Requests by network", buckets, series: series.network }),
        lineChart({ title: "Requests by JSON-RPC method", buckets, series: series.method }),
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
        barChart({
          title: "Top JSON-RPC methods",
          items: result.top_methods.map((item) => ({
            label: item.method,
            value: item.requests,
            detail: { errors: item.errors, "p50 ms": item.p50_ms, "p99 ms": item.p99_ms },
          })),
        }),
      ),
    ];
  }

  section.append(
    heading,
    h("p", { className: "hint" }, `Requests to ${zone.name}, from the records the edge keeps (http_requests).`),
    h(
      "div",
      { className: "toolbar" },
      rangePicker(chosenRange, (id) => {
        chosenRange = id;
        load();
      }),
      h("button", { type: "button", onclick: () => load() }, "Refresh"),
    ),
    errors,
    body,
  );
  await load();
  return section;
}
