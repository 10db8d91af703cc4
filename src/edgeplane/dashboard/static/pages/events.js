// Security → Events: the activity log of the zone's firewall_events (GET /zones/{zone}/security/events), filtered by
// action, rule, ruleset, IP, country, path, JSON-RPC method and time; the events over time by action
// (.../security/events/histogram); and an event's detail: the matched rule, its ruleset, the action, the attack
// scores and the rest of what the dataset holds.
import { request, v4 } from "../api.js";
import { h, errorBox, field } from "../dom.js";
import { lineChart } from "../chart.js";
import { rangePicker, rangeQuery } from "../time_range.js";

const FILTERS = [
  { name: "action", label: "Action", hint: "block, log, skip, ..." },
  { name: "rule_id", label: "Rule ID" },
  { name: "ruleset_id", label: "Ruleset ID" },
  { name: "ip", label: "Client IP" },
  { name: "country", label: "Country", hint: "two letters, as nl" },
  { name: "path", label: "Path", hint: "the whole path, as /v1/mainnet" },
  { name: "method", label: "JSON-RPC method" },
];
const PER_PAGE = 25;

let chosenRange = "24h";

function detailList(pairs) {
  return h(
    "dl",
    { className: "event-detail" },
    pairs.filter(([, value]) => value !== undefined && value !== null && value !== "").flatMap(([name, value]) => [h("dt", {}, name), h("dd", {}, String(value))]),
  );
}

/** The detail of one event: the matched rule first, then the request, then what else the record holds. */
function eventDetail(event) {
  const metadata = event.Metadata || {};
  const scores = event.attack_scores;
  const rest = { ...metadata };
  for (const key of ["ruleset_id", "phase", "action"]) delete rest[key];
  for (const key of ["waf_score", "waf_score_sqli", "waf_score_xss", "waf_score_rce"]) delete rest[key];
  return h(
    "div",
    { className: "card event-card" },
    h("h2", {}, `Event ${event.RayID || ""}`.trim()),
    h("h3", {}, "Matched rule"),
    detailList([
      ["Action", event.Action],
      ["Rule ID", event.RuleID],
      ["Ruleset ID", metadata.ruleset_id],
      ["Description", event.Description],
      ["Source", event.Source],
      ["Phase", metadata.phase],
      ["Match index", event.MatchIndex],
      ["Configured action", metadata.action],
    ]),
    h("h3", {}, "Attack scores"),
    scores
      ? detailList([
          ["WAF attack score", scores.attack],
          ["SQLi", scores.sqli],
          ["XSS", scores.xss],
          ["RCE", scores.rce],
        ])
      : h("p", { className: "hint" }, "The request was not scored."),
    h("h3", {}, "Request"),
    detailList([
      ["Time", event.Datetime],
      ["Client IP", event.ClientIP],
      ["Country", event.ClientCountry],
      ["Host", event.ClientRequestHost],
      ["Method", event.ClientRequestMethod],
      ["Path", event.ClientRequestPath],
      ["Query", event.ClientRequestQuery],
      ["JSON-RPC method", event.JSONRPCMethod],
      ["User agent", event.ClientRequestUserAgent],
      ["Status", event.EdgeResponseStatus],
      ["Ray ID", event.RayID],
    ]),
    Object.keys(rest).length
      ? [h("h3", {}, "Matched data"), h("pre", { className: "metadata" }, JSON.stringify(rest, null, 2))]
      : null,
  );
}

/** The Security → Events page of `context.zone`. */
export async function eventsPage(context) {
  const { zone } = context;
  const section = h("section", { className: "security-events" });
  const heading = h("h1", { tabindex: "-1" }, "Security events");
  if (!zone) {
    section.append(heading, h("p", {}, "No zone: pick or create a zone first."));
    return section;
  }
  const base = `/zones/${zone.id}/security/events`;
  const inputs = FILTERS.map((filter) => field({ label: filter.label, name: filter.name, hint: filter.hint, type: "text" }));
  const errors = h("div", { className: "errors" });
  const chartHolder = h("div", {});
  const listHolder = h("div", { className: "table-holder" });
  const detailHolder = h("div", { id: "event-detail", tabindex: "-1" });
  const status = h("p", { className: "status", role: "status" });
  let page = 1;

  function query() {
    const parts = [rangeQuery(chosenRange)];
    for (const wrapper of inputs) {
      const value = wrapper.input.value.trim();
      if (value) parts.push(`${wrapper.input.name}=${encodeURIComponent(value)}`);
    }
    return parts.join("&");
  }

  async function load() {
    errors.replaceChildren();
    detailHolder.replaceChildren();
    const filters = query();
    try {
      const [histogram, listed] = await Promise.all([
        v4("GET", `${base}/histogram?${filters}`),
        request("GET", `/client/v4${base}?${filters}&page=${page}&per_page=${PER_PAGE}`),
      ]);
      chartHolder.replaceChildren(
        lineChart({ title: "Events over time", buckets: histogram.buckets, series: histogram.series, unit: "events" }),
      );
      listHolder.replaceChildren(eventTable(listed.result, listed.result_info));
      const info = listed.result_info;
      status.textContent = `${info.total_count} ${info.total_count === 1 ? "event" : "events"}` + (info.retained_since ? `; retention has deleted older records: complete from ${info.retained_since}` : "");
    } catch (error) {
      errors.replaceChildren(errorBox(error));
    }
  }

  function showDetail(event) {
    detailHolder.replaceChildren(eventDetail(event));
    detailHolder.focus();
  }

  function eventTable(events, info) {
    if (events.length === 0) return h("p", {}, "No events match in this range.");
    const pager = h(
      "div",
      { className: "buttons pager" },
      h("button", { type: "button", disabled: page <= 1, onclick: () => { page -= 1; load(); } }, "Previous page"),
      h("span", { className: "hint" }, `Page ${info.page} of ${info.total_pages}`),
      h("button", { type: "button", disabled: page >= info.total_pages, onclick: () => { page += 1; load(); } }, "Next page"),
    );
    const cell = (title, value) => h("td", { "data-title": title }, value ?? "–");
    return h(
      "div",
      {},
      h(
        "table",
        { className: "events" },
        h("caption", {}, `Security events of ${zone.name}, newest first`),
        h(
          "thead",
          {},
          h("tr", {}, ["Time", "Action", "Rule", "Client IP", "Country", "Path", "JSON-RPC method", ""].map((name) => h("th", { scope: "col" }, name))),
        ),
        h(
          "tbody",
          {},
          events.map((event) =>
            h(
              "tr",
              {},
              cell("Time", event.Datetime),
              cell("Action", event.Action),
              cell("Rule", event.Description ? `${event.Description} (${event.RuleID})` : event.RuleID),
              cell("Client IP", event.ClientIP),
              cell("Country", event.ClientCountry),
              cell("Path", event.ClientRequestPath),
              cell("JSON-RPC method", event.JSONRPCMethod),
              h(
                "td",
                { className: "actions" },
                h("button", { type: "button", "aria-controls": "event-detail", onclick: () => showDetail(event) }, "Details", h("span", { className: "visually-hidden" }, ` of the event at ${event.Datetime}`)),
              ),
            ),
          ),
        ),
      ),
      pager,
    );
  }

  const form = h(
    "form",
    {
      className: "event-filters",
      onsubmit: (submitted) => {
        submitted.preventDefault();
        page = 1;
        load();
      },
    },
    h(
      "fieldset",
      {},
      h("legend", {}, "Filters"),
      h("div", { className: "filter-fields" }, inputs),
      h("div", { className: "buttons" }, h("button", { type: "submit", className: "primary" }, "Apply filters")),
    ),
  );

  section.append(
    heading,
    h("p", { className: "hint" }, `The security rules' matches on requests to ${zone.name} (firewall_events).`),
    h(
      "div",
      { className: "toolbar" },
      rangePicker(chosenRange, (id) => {
        chosenRange = id;
        page = 1;
        load();
      }),
      h("button", { type: "button", onclick: () => load() }, "Refresh"),
    ),
    form,
    errors,
    status,
    chartHolder,
    listHolder,
    detailHolder,
  );
  await load();
  return section;
}
