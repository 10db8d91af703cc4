// Security → Events: the activity log of the zone's firewall_events (GET /zones/{zone}/security/events), filtered by
// action, rule, ruleset, IP, country, path, JSON-RPC method and time; the events over time by action
// (.../security/events/histogram); and an event's detail, opened under its row: the matched rule, its ruleset, the
// action, the attack scores and the rest of what the dataset holds. What a person looks for comes first: the time
// range and the filters on one or two lines (a filter is added by field and shown as a removable chip), then the
// chart, then the log.
import { request, v4 } from "../api.js";
import { h, chip, errorBox, pageHead } from "../dom.js";
import { lineChart } from "../chart.js";
import { rangePicker, rangeQuery } from "../time_range.js";

// The filters the API takes (each an exact match): the query parameter, its name on the page, a hint of its values
// and an example (the value's placeholder).
const FILTERS = [
  { name: "action", label: "Action", hint: "block, log, skip, ...", example: "block" },
  { name: "rule_id", label: "Rule ID", hint: "the rule's id, 32 hex digits" },
  { name: "ruleset_id", label: "Ruleset ID", hint: "the ruleset's id, 32 hex digits" },
  { name: "ip", label: "Client IP", example: "192.0.2.1" },
  { name: "country", label: "Country", hint: "two letters, as nl", example: "nl" },
  { name: "path", label: "Path", hint: "the whole path, as /v1/mainnet", example: "/v1/mainnet" },
  { name: "method", label: "JSON-RPC method", example: "eth_call" },
];
const PER_PAGE = 25;
const COLUMNS = ["Time", "Action", "Rule", "Client IP", "Country", "Path", "JSON-RPC method"];

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
    { className: "event-card" },
    h("h2", {}, `Event ${event.RayID || ""}`.trim()),
    h(
      "div",
      { className: "event-sections" },
      h(
        "section",
        {},
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
      ),
      h(
        "section",
        {},
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
      ),
    ),
    Object.keys(rest).length
      ? [h("h3", {}, "Matched data"), h("pre", { className: "metadata" }, JSON.stringify(rest, null, 2))]
      : null,
  );
}

/** The filter bar, one row that wraps: a field, a value and "Add filter", then the filters applied as chips that
 * remove them, then `status`. One filter per field (adding one again replaces its value). Calls `onchange()` after
 * each change; `applied` maps a query parameter to its value. */
function filterBar(onchange, status) {
  const applied = new Map();
  const chips = [];
  const fieldSelect = h(
    "select",
    { id: "filter-field", name: "field", onchange: () => showHint() },
    FILTERS.map((filter) => h("option", { value: filter.name }, filter.label)),
  );
  // The value's hint is told to screen readers; its example is its placeholder (the field keeps its label).
  const hint = h("span", { className: "visually-hidden", id: "filter-value-hint" });
  const value = h("input", {
    id: "filter-value",
    name: "value",
    type: "text",
    autocomplete: "off",
    "aria-describedby": "filter-value-hint",
    onkeydown: (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        add();
      }
    },
  });
  const clear = h(
    "button",
    {
      type: "button",
      className: "link-button",
      onclick: () => {
        applied.clear();
        showChips();
        fieldSelect.focus();
        onchange();
      },
    },
    "Clear filters",
  );
  const bar = h(
    "div",
    { className: "filter-bar", role: "group", "aria-label": "Filters" },
    h("label", { for: "filter-field" }, "Filter"),
    fieldSelect,
    h("label", { for: "filter-value", className: "visually-hidden" }, "Value"),
    value,
    hint,
    h("button", { type: "button", onclick: () => add() }, "Add filter"),
    clear,
    status,
  );

  function showHint() {
    const filter = FILTERS.find((item) => item.name === fieldSelect.value);
    hint.textContent = `${filter.hint ? `${filter.hint}; ` : ""}an exact match`;
    value.placeholder = filter.example ? `as ${filter.example}` : "";
  }

  function add() {
    const text = value.value.trim();
    if (!text) {
      value.focus();
      return;
    }
    applied.set(fieldSelect.value, text);
    value.value = "";
    showChips();
    value.focus();
    onchange();
  }

  function chipOf(filter) {
    const item = chip(`${filter.label}: ${applied.get(filter.name)}`, () => {
      const position = chips.indexOf(item);
      applied.delete(filter.name);
      showChips();
      // The focus goes to the chip now in its place, else to the one before it, else to the field.
      const next = chips[position] || chips[position - 1];
      (next ? next.querySelector("button") : fieldSelect).focus();
      onchange();
    });
    return item;
  }

  function showChips() {
    for (const item of chips) item.remove();
    chips.splice(0, chips.length, ...FILTERS.filter((filter) => applied.has(filter.name)).map(chipOf));
    clear.before(...chips);
    clear.hidden = applied.size < 2;
  }

  showHint();
  showChips();
  return { element: bar, applied };
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
  const errors = h("div", { className: "errors" });
  const chartHolder = h("div", { className: "main-chart" });
  const listHolder = h("div", { className: "table-holder" });
  const status = h("p", { className: "status", role: "status" });
  const filters = filterBar(() => {
    page = 1;
    load();
  }, status);
  let page = 1;
  let openDetail = null; // {row, button} of the event whose detail is shown
  let loads = 0; // the answers of a load asked before the last one are stale: they are not shown

  function query() {
    const parts = [rangeQuery(chosenRange)];
    for (const [name, value] of filters.applied) parts.push(`${name}=${encodeURIComponent(value)}`);
    return parts.join("&");
  }

  async function load() {
    loads += 1;
    const mine = loads;
    const asked = query();
    try {
      const [histogram, listed] = await Promise.all([
        v4("GET", `${base}/histogram?${asked}`),
        request("GET", `/client/v4${base}?${asked}&page=${page}&per_page=${PER_PAGE}`),
      ]);
      if (mine !== loads) return;
      errors.replaceChildren();
      openDetail = null;
      chartHolder.replaceChildren(
        lineChart({ title: "Events over time", buckets: histogram.buckets, series: histogram.series, unit: "events", size: "wide" }),
      );
      listHolder.replaceChildren(eventTable(listed.result, listed.result_info));
      const info = listed.result_info;
      status.textContent = `${info.total_count} ${info.total_count === 1 ? "event" : "events"}` + (info.retained_since ? `; retention has deleted older records: complete from ${info.retained_since}` : "");
    } catch (error) {
      if (mine === loads) errors.replaceChildren(errorBox(error));
    }
  }

  /** Opens the detail of `event` under its row (closing the one open), or closes it when it is the one open. */
  function toggleDetail(event, row, button) {
    const wasOpen = openDetail && openDetail.row === row;
    if (openDetail) {
      openDetail.row.nextElementSibling.remove();
      openDetail.button.setAttribute("aria-expanded", "false");
      openDetail = null;
    }
    if (wasOpen) return;
    const detail = h("div", { id: "event-detail", tabindex: "-1", className: "event-detail-holder" }, eventDetail(event));
    row.after(h("tr", { className: "event-detail-row" }, h("td", { colspan: String(COLUMNS.length + 1) }, detail)));
    button.setAttribute("aria-expanded", "true");
    openDetail = { row, button };
    detail.focus();
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
    const eventRow = (event) => {
      const button = h(
        "button",
        { type: "button", "aria-expanded": "false", "aria-controls": "event-detail" },
        "Details",
        h("span", { className: "visually-hidden" }, ` of the event at ${event.Datetime}`),
      );
      const row = h(
        "tr",
        { className: "event-row" },
        cell("Time", event.Datetime),
        cell("Action", event.Action),
        cell("Rule", event.Description ? `${event.Description} (${event.RuleID})` : event.RuleID),
        cell("Client IP", event.ClientIP),
        cell("Country", event.ClientCountry),
        cell("Path", event.ClientRequestPath),
        cell("JSON-RPC method", event.JSONRPCMethod),
        h("td", { className: "actions" }, button),
      );
      button.addEventListener("click", () => toggleDetail(event, row, button));
      return row;
    };
    return h(
      "div",
      {},
      h(
        "table",
        { className: "events" },
        h("caption", {}, `Security events of ${zone.name}, newest first`),
        h("thead", {}, h("tr", {}, [...COLUMNS, ""].map((name) => h("th", { scope: "col" }, name)))),
        h("tbody", {}, events.map(eventRow)),
      ),
      pager,
    );
  }

  section.append(
    pageHead(
      heading,
      `The security rules' matches on requests to ${zone.name} (firewall_events).`,
      rangePicker(chosenRange, (id) => {
        chosenRange = id;
        page = 1;
        load();
      }),
      h("button", { type: "button", onclick: () => load() }, "Refresh"),
    ),
    filters.element,
    errors,
    chartHolder,
    listHolder,
  );
  await load();
  return section;
}
