// The form that deploys or configures one managed ruleset: the execute rule's overrides as the Rulesets API takes
// them. For the OWASP Core Ruleset, the paranoia level (the paranoia-level categories above it disabled) and the
// sensitivity (the score rule's score_threshold and action); for any managed ruleset, an action for the whole
// ruleset, overrides by category, and overrides by rule found with a search over the ruleset's rules.
import { h, errorBox } from "../dom.js";
import { selectField } from "./waf_entrypoint.js";

export const OWASP_RULESET_ID = "4814384a9e5d4991b9815dcfc25d2f1f";
export const SCORE_RULE_ID = "6179ae15870a4bb7b2d480d4843b323c";
const PARANOIA = /^paranoia-level-([1-4])$/;
const SENSITIVITIES = [
  ["60", "Low: score threshold 60"],
  ["40", "Medium: score threshold 40"],
  ["25", "High: score threshold 25"],
];
const ACTIONS = [
  ["block", "Block"],
  ["managed_challenge", "Managed challenge"],
  ["js_challenge", "JS challenge"],
  ["challenge", "Challenge"],
  ["log", "Log"],
];
const ENABLED = [
  ["", "Default"],
  ["true", "Enabled"],
  ["false", "Disabled"],
];
const SHOWN_MATCHES = 25;

function actionName(value) {
  const found = ACTIONS.find(([action]) => action === value);
  return found ? found[1] : value;
}

/** What the overrides of an execute rule do, as [term, detail] lines (the summary under a deployed ruleset). */
export function describeOverrides(ruleset, rule) {
  const overrides = (rule.action_parameters && rule.action_parameters.overrides) || {};
  const lines = [["Action", overrides.action ? `${actionName(overrides.action)} (every rule)` : "each rule's own"]];
  if (overrides.enabled !== undefined) lines.push(["Rules", overrides.enabled ? "all enabled" : "all disabled"]);
  const settings = readSettings(ruleset, rule);
  if (ruleset.id === OWASP_RULESET_ID) {
    lines.push(["Paranoia level", `PL${settings.paranoiaLevel}`]);
    lines.push(["Score threshold", String(settings.scoreThreshold)]);
    lines.push(["Score action", settings.scoreAction ? actionName(settings.scoreAction) : "Block (default)"]);
  }
  const describe = (override) =>
    [override.action ? actionName(override.action) : null, override.enabled === undefined ? null : override.enabled ? "enabled" : "disabled"]
      .filter(Boolean)
      .join(", ") || "no change";
  lines.push([
    "Category overrides",
    settings.categories.length === 0
      ? "none"
      : h("ul", {}, settings.categories.map((override) => h("li", {}, `${override.category}: ${describe(override)}`))),
  ]);
  const byId = new Map((ruleset.rules || []).map((managed) => [managed.id, managed]));
  lines.push([
    "Rule overrides",
    settings.rules.size === 0
      ? "none"
      : h(
          "ul",
          {},
          [...settings.rules.entries()].map(([id, override]) =>
            h("li", {}, `${byId.has(id) ? byId.get(id).description : id}: ${describe(override)}`),
          ),
        ),
  ]);
  return lines;
}

/** The editor's settings read from an execute rule (null: a new deployment, with the defaults). */
function readSettings(ruleset, rule) {
  const overrides = (rule && rule.action_parameters && rule.action_parameters.overrides) || {};
  const owasp = ruleset.id === OWASP_RULESET_ID;
  let paranoiaLevel = rule ? 4 : 1;
  const categories = [];
  for (const override of overrides.categories || []) {
    const level = PARANOIA.exec(override.category);
    if (owasp && level && override.enabled === false && override.action === undefined) {
      paranoiaLevel = Math.min(paranoiaLevel, Number(level[1]) - 1);
    } else {
      categories.push(override);
    }
  }
  let scoreThreshold = 40;
  let scoreAction = "";
  const rules = new Map();
  for (const override of overrides.rules || []) {
    if (owasp && override.id === SCORE_RULE_ID) {
      if (override.score_threshold !== undefined) scoreThreshold = override.score_threshold;
      scoreAction = override.action || "";
    } else {
      rules.set(override.id, { action: override.action, enabled: override.enabled });
    }
  }
  return {
    enabled: rule ? rule.enabled !== false : true,
    action: overrides.action || "",
    paranoiaLevel: Math.max(paranoiaLevel, 1),
    scoreThreshold,
    scoreAction,
    categories,
    rules,
  };
}

function overrideOf(action, enabled) {
  const override = {};
  if (action) override.action = action;
  if (enabled !== "" && enabled !== undefined) override.enabled = enabled === "true" || enabled === true;
  return override;
}

function enabledChoice(enabled) {
  return enabled === undefined ? "" : String(enabled);
}

/** The deploy/configure form of `ruleset`; `rule` is its execute rule (null to deploy it). `onSubmit(rule)` writes
 * the rule and may reject with the API's failure, which the form shows at its top. */
export function managedRulesetEditor({ ruleset, rule, onSubmit, onCancel }) {
  const owasp = ruleset.id === OWASP_RULESET_ID;
  const settings = readSettings(ruleset, rule);
  const verb = rule ? "Configure" : "Deploy";
  const errors = h("div", { className: "errors" });
  const enabled = h("input", { type: "checkbox", id: "managed-enabled", name: "enabled", checked: settings.enabled });
  const rulesetAction = selectField({
    label: "Action for every rule",
    name: "action",
    options: [["", "Each rule's own action"], ...ACTIONS],
    value: settings.action,
    hint: "overrides.action: the scoring rules of the Core Ruleset keep adding to the score whatever it says",
  });
  const owaspControls = owasp ? owaspFieldset(settings) : null;
  const categoryRows = h("ul", { className: "override-rows" });
  const categoryNames = [...new Set((ruleset.rules || []).flatMap((managed) => managed.categories || []))]
    .filter((category) => !(owasp && PARANOIA.test(category)))
    .sort();
  for (const override of settings.categories) categoryRows.append(categoryRow(override));

  function categoryRow(override) {
    const names = categoryNames.includes(override.category) ? categoryNames : [override.category, ...categoryNames];
    const row = h("li", { className: "override-row" });
    const category = selectField({ label: "Category", name: "category", options: names.map((name) => [name, name]), value: override.category });
    const action = selectField({ label: "Action", name: "category-action", options: [["", "Default"], ...ACTIONS], value: override.action || "" });
    const state = selectField({ label: "Enabled", name: "category-enabled", options: ENABLED, value: enabledChoice(override.enabled) });
    row.append(
      category,
      action,
      state,
      h("button", { type: "button", "aria-label": "Remove this category override", onclick: () => row.remove() }, "Remove"),
    );
    row.read = () => ({ category: category.select.value, ...overrideOf(action.select.value, state.select.value) });
    return row;
  }

  const ruleOverrides = new Map(settings.rules);
  const search = h("input", { type: "search", id: "managed-rule-search", name: "rule-search", "aria-describedby": "managed-rule-search-hint" });
  const matches = h("div", { className: "rule-matches" });
  search.addEventListener("input", showMatches);

  function showMatches() {
    const query = search.value.trim().toLowerCase();
    const candidates = (ruleset.rules || []).filter((managed) => !(owasp && managed.id === SCORE_RULE_ID));
    const found = candidates.filter(
      (managed) =>
        ruleOverrides.has(managed.id) ||
        (query !== "" &&
          [managed.id, managed.ref, managed.description, ...(managed.categories || [])]
            .filter(Boolean)
            .some((text) => String(text).toLowerCase().includes(query))),
    );
    if (found.length === 0) {
      matches.replaceChildren(h("p", { className: "hint" }, query ? `No rule matches “${search.value}”.` : "No rule overrides yet."));
      return;
    }
    const shown = found.slice(0, SHOWN_MATCHES);
    matches.replaceChildren(
      h(
        "table",
        { className: "managed-rules" },
        h("caption", {}, `${found.length} rule${found.length === 1 ? "" : "s"} (overridden, or matching the search)`),
        h("thead", {}, h("tr", {}, ["Rule", "Categories", "Default", "Action", "Enabled"].map((title) => h("th", { scope: "col" }, title)))),
        h("tbody", {}, shown.map(ruleRow)),
      ),
    );
    if (found.length > shown.length) {
      matches.append(h("p", { className: "hint" }, `And ${found.length - shown.length} more: narrow the search.`));
    }
  }

  function ruleRow(managed) {
    const override = ruleOverrides.get(managed.id) || {};
    const label = managed.description || managed.id;
    const update = () => {
      const chosen = overrideOf(action.value, state.value);
      if (Object.keys(chosen).length === 0) ruleOverrides.delete(managed.id);
      else ruleOverrides.set(managed.id, chosen);
    };
    const action = h(
      "select",
      { name: "rule-action", "aria-label": `Action of ${label}`, onchange: update },
      [["", "Default"], ...ACTIONS].map(([value, text]) => h("option", { value, selected: value === (override.action || "") }, text)),
    );
    const state = h(
      "select",
      { name: "rule-enabled", "aria-label": `Enabled: ${label}`, onchange: update },
      ENABLED.map(([value, text]) => h("option", { value, selected: value === enabledChoice(override.enabled) }, text)),
    );
    return h(
      "tr",
      { "data-rule": managed.id },
      h("th", { scope: "row", "data-title": "Rule" }, label, h("span", { className: "hint rule-id" }, managed.id)),
      h("td", { "data-title": "Categories" }, (managed.categories || []).join(", ")),
      h("td", { "data-title": "Default" }, `${managed.action}${managed.enabled === false ? " (disabled)" : ""}`),
      h("td", { "data-title": "Action" }, action),
      h("td", { "data-title": "Enabled" }, state),
    );
  }

  function built() {
    const overrides = {};
    if (rulesetAction.select.value) overrides.action = rulesetAction.select.value;
    const categories = [];
    const rules = [];
    if (owaspControls) {
      const level = Number(owaspControls.paranoia.select.value);
      for (let above = level + 1; above <= 4; above += 1) categories.push({ category: `paranoia-level-${above}`, enabled: false });
      const score = { id: SCORE_RULE_ID, score_threshold: Number(owaspControls.sensitivity.select.value) };
      if (owaspControls.scoreAction.select.value) score.action = owaspControls.scoreAction.select.value;
      rules.push(score);
    }
    for (const row of categoryRows.children) categories.push(row.read());
    for (const [id, override] of ruleOverrides) rules.push({ id, ...override });
    if (categories.length > 0) overrides.categories = categories;
    if (rules.length > 0) overrides.rules = rules;
    const parameters = { ...((rule && rule.action_parameters) || {}), id: ruleset.id };
    delete parameters.overrides;
    if (Object.keys(overrides).length > 0) parameters.overrides = overrides;
    const base = rule
      ? Object.fromEntries(Object.entries(rule).filter(([name]) => !["version", "last_updated", "categories"].includes(name)))
      : { action: "execute", expression: "true", description: `Execute ${ruleset.name}` };
    return { ...base, enabled: enabled.checked, action_parameters: parameters };
  }

  const form = h(
    "form",
    {
      className: "card managed-editor",
      "aria-labelledby": "managed-editor-heading",
      onsubmit: async (event) => {
        event.preventDefault();
        errors.replaceChildren();
        try {
          await onSubmit(built());
        } catch (error) {
          errors.replaceChildren(errorBox(error));
          errors.querySelector("[role=alert]").scrollIntoView({ block: "nearest" });
        }
      },
    },
    h("h2", { id: "managed-editor-heading", tabindex: "-1" }, `${verb} ${ruleset.name}`),
    h("p", { className: "hint" }, "An execute rule of the zone's http_request_firewall_managed entrypoint, on all incoming requests; saved with the Rulesets API."),
    errors,
    h("div", { className: "field inline" }, enabled, h("label", { for: "managed-enabled" }, "Enabled")),
    rulesetAction,
    owaspControls ? owaspControls.element : null,
    h(
      "fieldset",
      {},
      h("legend", {}, "Overrides by category"),
      categoryRows,
      h(
        "button",
        {
          type: "button",
          onclick: () => {
            const row = categoryRow({ category: categoryNames[0] });
            categoryRows.append(row);
            row.querySelector("select").focus();
          },
        },
        "Add category override",
      ),
    ),
    h(
      "fieldset",
      {},
      h("legend", {}, "Overrides by rule"),
      h(
        "div",
        { className: "field" },
        h("label", { for: "managed-rule-search" }, "Search rules"),
        search,
        h("p", { className: "hint", id: "managed-rule-search-hint" }, `Description, id or category, among the ${(ruleset.rules || []).length} rules of the ruleset`),
      ),
      matches,
    ),
    h(
      "div",
      { className: "buttons" },
      h("button", { type: "submit", className: "primary" }, rule ? "Save" : "Deploy"),
      h("button", { type: "button", onclick: onCancel }, "Cancel"),
    ),
  );
  showMatches();
  return form;
}

function owaspFieldset(settings) {
  const paranoia = selectField({
    label: "Paranoia level",
    name: "paranoia-level",
    options: [1, 2, 3, 4].map((level) => [String(level), `PL${level}`]),
    value: String(settings.paranoiaLevel),
    hint: "Higher levels run more rules and catch more, with more false positives: the categories above it are disabled",
  });
  const thresholds = SENSITIVITIES.some(([value]) => value === String(settings.scoreThreshold))
    ? SENSITIVITIES
    : [...SENSITIVITIES, [String(settings.scoreThreshold), `Score threshold ${settings.scoreThreshold}`]];
  const sensitivity = selectField({
    label: "Sensitivity",
    name: "score-threshold",
    options: thresholds,
    value: String(settings.scoreThreshold),
    hint: "The anomaly score at which the score rule acts: the lower, the more sensitive",
  });
  const scoreAction = selectField({
    label: "Score action",
    name: "score-action",
    options: [["", "Default (block)"], ...ACTIONS],
    value: settings.scoreAction,
  });
  return {
    paranoia,
    sensitivity,
    scoreAction,
    element: h("fieldset", { className: "side-by-side" }, h("legend", {}, "OWASP anomaly scoring"), paranoia, sensitivity, scoreAction),
  };
}
