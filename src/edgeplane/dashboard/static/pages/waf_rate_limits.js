// Security → WAF → Rate limiting rules: the rules of the zone's http_ratelimit entrypoint; list, add, edit (the form
// in place of the list), delete (asked first). A WAF tab (waf_rule_tab.js) like Custom rules: nothing is checked here, the API refuses
// what cannot run (codes 20010-20017 for the ratelimit object, 20001 for the response, 20002 for the expression) and
// each refusal is shown under the field its source.pointer names, else at the top of the form.
import { h, errorBox, field } from "../dom.js";
import { selectField, textareaField } from "./waf_entrypoint.js";
import { ruleLabel, ruleTab } from "./waf_rule_tab.js";

export const RATELIMIT_PHASE = "http_ratelimit";

const ACTIONS = [
  ["block", "Block"],
  ["managed_challenge", "Managed challenge"],
  ["js_challenge", "JS challenge"],
  ["challenge", "Challenge"],
  ["log", "Log"],
];
const PERIODS = [
  [10, "10 seconds"],
  [60, "1 minute"],
  [120, "2 minutes"],
  [300, "5 minutes"],
  [600, "10 minutes"],
  [3600, "1 hour"],
  [86400, "1 day"],
];
// 0 acts only on the requests over the rate; any other timeout acts on every request for that long.
const TIMEOUTS = [[0, "Throttle"], ...PERIODS.map(([seconds, text]) => [seconds, `For ${text}`])];
const CONTENT_TYPES = [
  ["", "Default"],
  ["application/json", "application/json"],
  ["text/plain", "text/plain"],
  ["text/html", "text/html"],
  ["text/xml", "text/xml"],
];
const DELETED = "Its counters stop at once and the requests it limited pass.";
// The members of ratelimit the form edits; any other member a rule has (a score budget) is kept as it is.
const FORM_MEMBERS = ["characteristics", "period", "requests_per_period", "mitigation_timeout", "counting_expression"];

function periodText(seconds) {
  const known = PERIODS.find(([value]) => value === seconds);
  return known ? known[1] : `${seconds} seconds`;
}

/** The rate of a rule as a person says it: "100 requests per 1 minute", or its score budget. */
function rateText(ratelimit) {
  const per = `per ${periodText(ratelimit.period)}`;
  if (ratelimit.score_per_period != null) {
    return `score ${ratelimit.score_per_period} ${per} (from ${ratelimit.score_response_header_name})`;
  }
  return `${ratelimit.requests_per_period} requests ${per}`;
}

function actionText(rule) {
  const timeout = rule.ratelimit.mitigation_timeout || 0;
  const response = rule.action_parameters && rule.action_parameters.response;
  const status = rule.action === "block" ? ` ${response && response.status_code ? response.status_code : 429}` : "";
  return `${rule.action}${status}, ${timeout === 0 ? "throttle" : `for ${periodText(timeout)}`}`;
}

/** The member of the form an API error points at: under ratelimit or the response, the member's name
 * (`/rules/0/ratelimit/characteristics/1` → characteristics); else the last segment (`/expression`). */
function pointedMember(item) {
  const pointer = item.source && item.source.pointer ? item.source.pointer : "";
  if (!pointer) return null;
  const segments = pointer.split("/");
  for (const parent of ["ratelimit", "response"]) {
    const at = segments.indexOf(parent);
    if (at >= 0) return segments[at + 1] || parent;
  }
  return segments.pop();
}

/** The Rate limiting rules tab of `context.zone`. */
export async function rateLimitingRulesTab(context) {
  const { zone } = context;

  function ruleTable(rules, tab) {
    if (rules.length === 0) return h("p", {}, `No rate limiting rules in ${zone.name} yet.`);
    return h(
      "table",
      { className: "rate-limit-rules" },
      h("caption", {}, `Rate limiting rules of ${zone.name}, in the order they run`),
      h(
        "thead",
        {},
        h("tr", {}, ["Rule", "Expression", "Counted per", "Rate", "Action", "State", "Actions"].map((title) => h("th", { scope: "col" }, title))),
      ),
      h("tbody", {}, rules.map((rule) => ruleRow(rule, tab))),
    );
  }

  function ruleRow(rule, tab) {
    const label = ruleLabel(rule);
    const ratelimit = rule.ratelimit || {};
    return h(
      "tr",
      { "data-rule": rule.id },
      h("th", { scope: "row", "data-title": "Rule" }, rule.description || "(no description)", h("span", { className: "hint rule-id" }, rule.id)),
      h("td", { "data-title": "Expression" }, h("code", { className: "expression" }, rule.expression)),
      h(
        "td",
        { "data-title": "Counted per" },
        h("ul", { className: "characteristics" }, (ratelimit.characteristics || []).map((text) => h("li", {}, h("code", {}, text)))),
      ),
      h("td", { "data-title": "Rate" }, rateText(ratelimit)),
      h("td", { "data-title": "Action" }, actionText(rule)),
      h("td", { "data-title": "State" }, rule.enabled === false ? "Disabled" : "Enabled"),
      h(
        "td",
        { "data-title": "Actions", className: "actions" },
        h("button", { type: "button", "aria-label": `Edit ${label}`, onclick: () => tab.edit(rule) }, "Edit"),
        h("button", { type: "button", className: "danger", "aria-label": `Delete ${label}`, onclick: () => tab.remove(rule, DELETED) }, "Delete"),
      ),
    );
  }

  function ruleEditor(rule, tab) {
    const ratelimit = rule ? rule.ratelimit || {} : {};
    const response = (rule && rule.action_parameters && rule.action_parameters.response) || {};
    const formErrors = h("div", { className: "errors" });
    const description = field({ label: "Rule name (description)", name: "description", value: rule ? rule.description || "" : "", maxlength: "500" });
    const expression = textareaField({
      label: "Expression",
      name: "expression",
      value: rule ? rule.expression : "",
      rows: 2,
    });
    expression.textarea.placeholder = 'The requests this rule looks at, for example: http.request.uri.path eq "/v1/mainnet"';
    const characteristics = textareaField({
      label: "Counted per (characteristics, one a line)",
      name: "characteristics",
      value: (ratelimit.characteristics || ["cf.colo.id", "ip.src"]).join("\n"),
      rows: 2,
      hint: 'Always cf.colo.id; then for example ip.src, http.request.headers["x-api-key"], edgeplane.jsonrpc.methods',
    });
    const period = selectField({ label: "Period", name: "period", options: PERIODS, value: ratelimit.period || 60 });
    const requests = field({
      label: "Requests per period",
      name: "requests_per_period",
      type: "number", // no min: the API says what it takes (the browser would refuse a submit without saying why)
      value: ratelimit.requests_per_period != null ? ratelimit.requests_per_period : rule ? "" : "100",
    });
    const action = selectField({
      label: "Action",
      name: "action",
      options: ACTIONS,
      value: rule ? rule.action : "block",
      onchange: () => showResponse(),
    });
    const timeout = selectField({
      label: "Then",
      name: "mitigation_timeout",
      options: TIMEOUTS,
      value: ratelimit.mitigation_timeout || 0,
    });
    const statusCode = field({
      label: "Response status code",
      name: "status_code",
      type: "number",
      placeholder: "429",
      value: response.status_code != null ? response.status_code : "",
    });
    const contentType = selectField({ label: "Response content type", name: "content_type", options: CONTENT_TYPES, value: response.content_type || "" });
    const content = textareaField({ label: "Response body", name: "content", value: response.content || "", rows: 3, hint: "Up to 30 KB." });
    const responseFields = h("fieldset", { className: "side-by-side response" }, h("legend", {}, "Custom response (block)"), statusCode, contentType, content);
    const counting = textareaField({
      label: "Counting expression (optional)",
      name: "counting_expression",
      value: ratelimit.counting_expression || "",
      rows: 2,
      hint: "What is counted; empty: the requests the expression matches.",
    });
    const enabled = h("input", { type: "checkbox", id: "rate-limit-enabled", name: "enabled", checked: rule ? rule.enabled !== false : true });

    // What most rules leave out, folded unless the rule has it (or the API points into it).
    const more = h(
      "details",
      { className: "more", open: Object.keys(response).length > 0 || Boolean(ratelimit.counting_expression) },
      h("summary", {}, "Custom response and counting expression"),
      responseFields,
      counting,
    );

    function showResponse() {
      responseFields.hidden = action.select.value !== "block";
    }
    showResponse();

    // Each control the API may point at, with the place for its error under it.
    const controls = {};
    for (const [name, wrapper, control] of [
      ["description", description, description.input],
      ["expression", expression, expression.textarea],
      ["characteristics", characteristics, characteristics.textarea],
      ["period", period, period.select],
      ["requests_per_period", requests, requests.input],
      ["action", action, action.select],
      ["mitigation_timeout", timeout, timeout.select],
      ["status_code", statusCode, statusCode.input],
      ["content_type", contentType, contentType.select],
      ["content", content, content.textarea],
      ["counting_expression", counting, counting.textarea],
    ]) {
      const message = h("p", { className: "field-error", id: `rate-limit-${name}-error`, role: "alert", hidden: true });
      wrapper.append(message);
      control.setAttribute("aria-describedby", `${control.getAttribute("aria-describedby") || ""} ${message.id}`.trim());
      controls[name] = { control, message };
    }

    function showRefusal(error) {
      const items = error && error.errors ? error.errors : [];
      const unplaced = [];
      const byMember = new Map();
      for (const item of items) {
        const member = pointedMember(item);
        if (member && controls[member]) byMember.set(member, [...(byMember.get(member) || []), item]);
        else unplaced.push(item);
      }
      for (const [name, { control, message }] of Object.entries(controls)) {
        const found = byMember.get(name) || [];
        message.hidden = found.length === 0;
        message.textContent = found.map((item) => `${item.message} (code ${item.code})`).join("; ");
        if (found.length > 0) control.setAttribute("aria-invalid", "true");
        else control.removeAttribute("aria-invalid");
      }
      if (error && (unplaced.length > 0 || items.length === 0)) formErrors.replaceChildren(errorBox({ errors: unplaced.length ? unplaced : items, message: error.message }));
      else formErrors.replaceChildren();
      const first = form.querySelector('[aria-invalid="true"]');
      if (first && more.contains(first)) more.open = true;
      if (first) first.focus();
    }

    function ruleBody() {
      const kept = Object.fromEntries(Object.entries(ratelimit).filter(([name]) => !FORM_MEMBERS.includes(name)));
      const written = {
        ...kept,
        characteristics: characteristics.textarea.value.split("\n").map((line) => line.trim()).filter(Boolean),
        period: Number(period.select.value),
        mitigation_timeout: Number(timeout.select.value),
      };
      if (requests.input.value.trim() !== "") written.requests_per_period = Number(requests.input.value);
      if (counting.textarea.value.trim() !== "") written.counting_expression = counting.textarea.value;
      const body = {
        description: description.input.value,
        expression: expression.textarea.value,
        action: action.select.value,
        enabled: enabled.checked,
        ratelimit: written,
      };
      if (body.action === "block") {
        const answer = {};
        if (statusCode.input.value.trim() !== "") answer.status_code = Number(statusCode.input.value);
        if (contentType.select.value) answer.content_type = contentType.select.value;
        if (content.textarea.value) answer.content = content.textarea.value;
        body.action_parameters = Object.keys(answer).length ? { response: answer } : {};
      }
      return body;
    }

    const form = h(
      "form",
      {
        className: "card rate-limit-editor",
        "aria-labelledby": "rate-limit-editor-heading",
        onsubmit: async (event) => {
          event.preventDefault();
          showRefusal(null);
          const body = ruleBody();
          try {
            await tab.save(rule, body);
          } catch (error) {
            showRefusal(error);
          }
        },
      },
      h("h2", { id: "rate-limit-editor-heading", tabindex: "-1" }, rule ? `Edit ${ruleLabel(rule)}` : "Add rate limiting rule"),
      formErrors,
      description,
      expression,
      h("fieldset", { className: "side-by-side rate" }, h("legend", {}, "Rate, and what happens over it"), characteristics, period, requests, action, timeout),
      more,
      h(
        "div",
        { className: "buttons" },
        h("span", { className: "field inline" }, enabled, h("label", { for: "rate-limit-enabled" }, "Enabled")),
        h("button", { type: "submit", className: "primary" }, "Save"),
        h("button", { type: "button", onclick: () => tab.close() }, "Cancel"),
      ),
    );
    return form;
  }

  return ruleTab({
    zone,
    phase: RATELIMIT_PHASE,
    className: "waf-rate-limits",
    description: "Rates per client, key or method: over its rate, a rule acts. They run after the custom rules.",
    addLabel: "Add rate limiting rule",
    list: ruleTable,
    editor: ruleEditor,
  });
}
