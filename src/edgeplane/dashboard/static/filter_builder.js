// The Logpush filter builder: rows of field / operator / value in AND/OR groups nested to any depth, and the filter
// JSON they make, editable as text. Which operators a field takes, and the limits, come from GET /filter-language
// (read from the code that enforces them); the builder checks nothing itself: the API validates what is sent, and
// its errors are shown at the row their path (where.and[1].or[0].value) names.
import { h } from "./dom.js";

// The seed's names of the operators, shown beside their notation.
const OPERATOR_NAMES = {
  eq: "equals",
  "!eq": "does not equal",
  lt: "less than",
  leq: "less than or equal",
  gt: "greater than",
  geq: "greater than or equal",
  startsWith: "starts with",
  endsWith: "ends with",
  "!startsWith": "does not start with",
  "!endsWith": "does not end with",
  contains: "contains",
  "!contains": "does not contain",
  in: "is in",
  "!in": "is not in",
};

const NUMBER = /^-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?$/;

/** An empty group: the builder's root and each group added to it. */
export function emptyGroup(kind = "and") {
  return { kind, members: [] };
}

/** The filter text a tree makes: "" for an empty root group (no filter), else compact JSON as the API stores it.
 * Single values are written as strings (as the seed writes them); in an in/!in array numbers are written as numbers
 * for number and timestamp fields (digits only for timestamps; an RFC 3339 date stays a string). */
export function filterText(tree, language, dataset) {
  if (tree.members.length === 0) return "";
  const fields = language.datasets[dataset] || {};
  const setOperators = new Set(language.set_operators);
  const scalar = (text, type, inArray) => {
    const numeric = type === "int" || type === "float" || (type === "timestamp" && /^-?[0-9]+$/.test(text));
    return inArray && numeric && NUMBER.test(text) ? text : JSON.stringify(text);
  };
  const node = (item) => {
    if (item.members) return `{${JSON.stringify(item.kind)}:[${item.members.map(node).join(",")}]}`;
    const type = fields[item.key] ? fields[item.key].type : "string";
    const value = setOperators.has(item.operator)
      ? `[${item.value.map((text) => scalar(text, type, true)).join(",")}]`
      : scalar(item.value, type, false);
    return `{"key":${JSON.stringify(item.key)},"operator":${JSON.stringify(item.operator)},"value":${value}}`;
  };
  return `{"where":${node(tree)}}`;
}

/** The tree a filter text holds when the builder can show it (an object whose only member is `where`, holding
 * conditions and and/or groups), else null. A `where` that is one condition is shown in an AND group. */
export function treeFromText(text) {
  if (text.trim() === "") return emptyGroup();
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const isObject = (value) => value !== null && typeof value === "object" && !Array.isArray(value);
  const scalar = (value) => ["string", "number", "boolean"].includes(typeof value);
  const node = (value) => {
    if (!isObject(value)) return null;
    const keys = Object.keys(value);
    if (keys.length === 1 && (keys[0] === "and" || keys[0] === "or") && Array.isArray(value[keys[0]])) {
      const members = value[keys[0]].map(node);
      return members.includes(null) ? null : { kind: keys[0], members };
    }
    const { key, operator } = value;
    if (keys.length !== 3 || typeof key !== "string" || typeof operator !== "string" || !("value" in value)) return null;
    if (Array.isArray(value.value)) {
      return value.value.every(scalar) ? { key, operator, value: value.value.map(String) } : null;
    }
    return scalar(value.value) ? { key, operator, value: String(value.value) } : null;
  };
  if (!isObject(parsed) || Object.keys(parsed).length !== 1 || !("where" in parsed)) return null;
  const where = node(parsed.where);
  if (where === null) return null;
  return where.members ? where : { kind: "and", members: [where] };
}

/** The operators a filter text writes, counted as the API counts them (each condition and each group), or null
 * when the text is not JSON. */
export function operatorCount(text) {
  let parsed;
  try {
    parsed = JSON.parse(text);
  } catch {
    return null;
  }
  const count = (value) => {
    if (Array.isArray(value)) return value.reduce((total, item) => total + count(item), 0);
    if (value === null || typeof value !== "object") return 0;
    const own = "operator" in value || "and" in value || "or" in value ? 1 : 0;
    return own + Object.values(value).reduce((total, item) => total + count(item), 0);
  };
  return count(parsed);
}

/** The filter builder for `dataset`'s `fieldNames` (the API's field list, in its order), starting from `text`.
 * Returns {element, text(), showErrors(apiFailure), clearErrors()}. */
export function filterBuilder({ language, dataset, fieldNames, text = "" }) {
  const fields = language.datasets[dataset] || {};
  const filterable = fieldNames.filter((name) => fields[name] && fields[name].filterable);
  const setOperators = new Set(language.set_operators);
  const limits = language.limits;
  let tree = treeFromText(text) || emptyGroup();

  const rootHolder = h("div", { className: "filter-tree" });
  const jsonInput = h("textarea", {
    id: "filter-json",
    name: "filter",
    rows: 4,
    spellcheck: "false",
    "aria-describedby": "filter-json-hint filter-limits",
  });
  jsonInput.value = text;
  const jsonNote = h("p", { className: "hint", id: "filter-json-note", role: "status" });
  const meter = h("p", { className: "limits", id: "filter-limits", "aria-live": "polite" });

  function defaultCondition() {
    const key = filterable[0] || "";
    const operator = operatorsOf(key)[0] || "eq";
    return { key, operator, value: setOperators.has(operator) ? [] : "" };
  }

  function operatorsOf(key) {
    return fields[key] ? language.operators_by_type[fields[key].type] || [] : [];
  }

  function changed() {
    jsonInput.value = filterText(tree, language, dataset);
    jsonNote.textContent = "";
    clearErrors();
    showLimits();
  }

  function showLimits() {
    const bytes = new TextEncoder().encode(jsonInput.value).length;
    const operators = jsonInput.value.trim() === "" ? 0 : operatorCount(jsonInput.value);
    meter.replaceChildren(
      h("span", { className: bytes > limits.max_filter_bytes ? "over" : "" }, `${bytes} of ${limits.max_filter_bytes} bytes`),
      " · ",
      h(
        "span",
        { className: operators !== null && operators > limits.max_operators ? "over" : "" },
        `${operators === null ? "?" : operators} of ${limits.max_operators} operators`,
      ),
    );
  }

  function render() {
    rootHolder.replaceChildren(groupElement(tree, "where", null));
  }

  function groupElement(group, path, parent) {
    const membersPath = `${path}.${group.kind}`;
    const kindId = `group-kind-${path.replace(/[^a-zA-Z0-9]/g, "-")}`;
    const kind = h(
      "select",
      {
        id: kindId,
        name: "group",
        onchange: (event) => {
          group.kind = event.target.value;
          changed();
          render();
          document.getElementById(kindId).focus();
        },
      },
      h("option", { value: "and", selected: group.kind === "and" }, "all of (AND)"),
      h("option", { value: "or", selected: group.kind === "or" }, "any of (OR)"),
    );
    const depth = path.split(".").length;
    return h(
      "div",
      { className: "filter-group", role: "group", "aria-label": parent ? `Group at ${path}` : "Filter conditions", "data-path": path },
      h("div", { className: "group-head" }, h("label", { for: kindId }, parent ? `Nested group (level ${depth}): match` : "Match"), kind),
      group.members.length === 0 ? h("p", { className: "hint" }, parent ? "An empty group: add a condition." : "No filter: every record is pushed.") : null,
      h(
        "ol",
        { className: "filter-members" },
        group.members.map((member, index) =>
          h(
            "li",
            {},
            member.members
              ? groupElement(member, `${membersPath}[${index}]`, group)
              : conditionElement(member, `${membersPath}[${index}]`, group),
          ),
        ),
      ),
      h(
        "div",
        { className: "buttons" },
        h(
          "button",
          {
            type: "button",
            onclick: () => {
              group.members.push(defaultCondition());
              changed();
              render();
              focusLast(`${membersPath}[${group.members.length - 1}]`, "key");
            },
          },
          parent ? "Add condition to this group" : "Add condition",
        ),
        h(
          "button",
          {
            type: "button",
            onclick: () => {
              group.members.push({ kind: group.kind === "and" ? "or" : "and", members: [defaultCondition()] });
              changed();
              render();
              focusLast(`${membersPath}[${group.members.length - 1}]`, "group");
            },
          },
          parent ? "Add nested group" : "Add group",
        ),
        parent
          ? h(
              "button",
              {
                type: "button",
                className: "danger",
                onclick: () => {
                  parent.members.splice(parent.members.indexOf(group), 1);
                  changed();
                  render();
                  jsonInput.focus();
                },
              },
              "Remove group",
            )
          : null,
      ),
    );
  }

  function focusLast(path, name) {
    const control = rootHolder.querySelector(`[data-path="${path}"] [name="${name}"]`);
    if (control) control.focus();
  }

  function conditionElement(condition, path, parent) {
    const prefix = `cond-${path.replace(/[^a-zA-Z0-9]/g, "-")}`;
    const type = fields[condition.key] ? fields[condition.key].type : null;
    const keyNames = filterable.includes(condition.key) || !condition.key ? filterable : [condition.key, ...filterable];
    const key = h(
      "select",
      {
        id: `${prefix}-key`,
        name: "key",
        onchange: (event) => {
          const previousType = type;
          condition.key = event.target.value;
          const allowed = operatorsOf(condition.key);
          if (!allowed.includes(condition.operator)) condition.operator = allowed[0];
          if (fields[condition.key].type !== previousType) condition.value = setOperators.has(condition.operator) ? [] : "";
          changed();
          render();
          focusLast(path, "key");
        },
      },
      keyNames.map((name) =>
        h("option", { value: name, selected: name === condition.key }, fields[name] ? `${name} (${fields[name].type})` : name),
      ),
    );
    const operatorNames = operatorsOf(condition.key);
    const operator = h(
      "select",
      {
        id: `${prefix}-operator`,
        name: "operator",
        onchange: (event) => {
          const wasSet = setOperators.has(condition.operator);
          condition.operator = event.target.value;
          const isSet = setOperators.has(condition.operator);
          if (wasSet && !isSet) condition.value = condition.value[0] || "";
          if (!wasSet && isSet) condition.value = condition.value === "" ? [] : [condition.value];
          changed();
          render();
          focusLast(path, "operator");
        },
      },
      (operatorNames.includes(condition.operator) ? operatorNames : [condition.operator, ...operatorNames]).map((name) =>
        h("option", { value: name, selected: name === condition.operator }, `${name} (${OPERATOR_NAMES[name] || "unknown"})`),
      ),
    );
    const value = valueInput(condition, type, `${prefix}-value`);
    return h(
      "div",
      { className: "filter-condition", role: "group", "aria-label": `Condition at ${path}`, "data-path": path },
      h("div", { className: "field" }, h("label", { for: key.id }, "Field"), key),
      h("div", { className: "field" }, h("label", { for: operator.id }, "Operator"), operator),
      h(
        "div",
        { className: "field" },
        h("label", { for: value.id }, setOperators.has(condition.operator) ? "Values (one per line)" : "Value"),
        value,
      ),
      h(
        "button",
        {
          type: "button",
          className: "danger",
          "aria-label": `Remove the condition at ${path}`,
          onclick: () => {
            parent.members.splice(parent.members.indexOf(condition), 1);
            changed();
            render();
            jsonInput.focus();
          },
        },
        "Remove",
      ),
    );
  }

  // The input a value of the field's type is typed in: a list for in/!in, true/false for a boolean, a number input
  // for numbers, text for strings and timestamps (RFC 3339 or Unix nanoseconds, too large for a number input).
  function valueInput(condition, type, id) {
    const update = (value) => {
      condition.value = value;
      changed();
    };
    if (setOperators.has(condition.operator)) {
      const list = h("textarea", {
        id,
        name: "value",
        rows: 3,
        oninput: (event) =>
          update(
            event.target.value
              .split("\n")
              .map((line) => line.trim())
              .filter((line) => line !== ""),
          ),
      });
      list.value = condition.value.join("\n");
      return list;
    }
    if (type === "bool") {
      if (condition.value === "") condition.value = "true";
      return h(
        "select",
        { id, name: "value", onchange: (event) => update(event.target.value) },
        ["true", "false"].map((option) => h("option", { value: option, selected: option === condition.value }, option)),
      );
    }
    const numeric = type === "int" || type === "float";
    const input = h("input", {
      id,
      name: "value",
      type: numeric ? "number" : "text",
      step: type === "int" ? "1" : type === "float" ? "any" : undefined,
      placeholder: type === "timestamp" ? "2026-11-21T10:00:00Z" : undefined,
      autocomplete: "off",
      oninput: (event) => update(event.target.value),
    });
    input.value = condition.value;
    return input;
  }

  jsonInput.addEventListener("input", () => {
    const parsed = treeFromText(jsonInput.value);
    clearErrors();
    showLimits();
    if (parsed === null) {
      jsonNote.textContent = "The builder cannot show this JSON; it is sent as written.";
      return;
    }
    jsonNote.textContent = "";
    tree = parsed;
    render();
  });

  function clearErrors() {
    for (const message of element.querySelectorAll(".field-error")) message.remove();
    for (const control of element.querySelectorAll("[aria-invalid]")) control.removeAttribute("aria-invalid");
  }

  /** Shows the API's filter errors ("invalid filter: where.and[1].value: ...") at the control their path names,
   * or at the JSON when the path names the filter as a whole (its size, its operators, its syntax). */
  function showErrors(failure) {
    clearErrors();
    for (const error of failure.errors || []) {
      if (!error.source || error.source.pointer !== "/filter") continue;
      const match = /^invalid filter: (?:((?:where|[a-z]+)[^ :]*): )?(.*)$/s.exec(error.message);
      const path = match && match[1] ? match[1] : "";
      const member = /^(.*)\.(key|operator|value)(?:\[\d+\])?$/.exec(path);
      const row = member ? rootHolder.querySelector(`[data-path="${member[1]}"]`) : null;
      const control = row ? row.querySelector(`[name="${member[2]}"]`) : jsonInput;
      const id = `${control.id}-error`;
      const text = match ? match[2] : error.message;
      control.setAttribute("aria-invalid", "true");
      control.setAttribute("aria-errormessage", id);
      (row || jsonInput.parentElement).append(h("p", { className: "field-error", id }, path ? `${path}: ${text}` : text));
    }
  }

  const element = h(
    "fieldset",
    { className: "filter-builder" },
    h("legend", {}, "Filter"),
    h("p", { className: "hint" }, "Only the records the filter matches are pushed. Conditions join with AND or OR; groups nest."),
    rootHolder,
    h(
      "div",
      { className: "field wide" },
      h("label", { for: "filter-json" }, "Filter JSON"),
      h(
        "p",
        { className: "hint", id: "filter-json-hint" },
        "What the job stores. Edit it here and the builder follows when it can show it.",
      ),
      jsonInput,
      jsonNote,
      meter,
    ),
  );
  render();
  showLimits();
  return { element, text: () => jsonInput.value, showErrors, clearErrors };
}
