// Security → WAF → Custom rules: the rules of the zone's http_request_firewall_custom entrypoint; list, add, edit
// (the form in place of the list), delete (asked first, in a dialog). The expression is checked by the API only: its
// refusal (code 20002, with the position) is shown under the expression field. The pattern of a WAF tab
// (waf_rule_tab.js): a head with what the tab holds and its "Add" button, the status of the last change, the list, the
// form in its place.
import { h, errorBox, field } from "../dom.js";
import { CUSTOM_PHASE, selectField, textareaField } from "./waf_entrypoint.js";
import { ruleLabel, ruleTab } from "./waf_rule_tab.js";

const ACTIONS = [
  ["block", "Block"],
  ["managed_challenge", "Managed challenge"],
  ["js_challenge", "JS challenge"],
  ["challenge", "Challenge"],
  ["log", "Log"],
  ["skip", "Skip"],
];

/** The member an API error points at: the last segment of its `source.pointer` (`/rules/0/expression` → expression). */
function pointedMember(item) {
  return item.source && item.source.pointer ? item.source.pointer.split("/").pop() : null;
}

/** The Custom rules tab of `context.zone`. */
export async function customRulesTab(context) {
  const { zone } = context;

  function ruleTable(rules, tab) {
    if (rules.length === 0) return h("p", {}, `No custom rules in ${zone.name} yet.`);
    return h(
      "table",
      { className: "custom-rules" },
      h("caption", {}, `Custom rules of ${zone.name}, in the order they run`),
      h("thead", {}, h("tr", {}, ["Rule", "Expression", "Action", "State", "Actions"].map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, rules.map((rule) => ruleRow(rule, tab))),
    );
  }

  function ruleRow(rule, tab) {
    const label = ruleLabel(rule);
    const rowErrors = h("div", { className: "errors" });
    return h(
      "tr",
      { "data-rule": rule.id },
      h("th", { scope: "row", "data-title": "Rule" }, rule.description || "(no description)", h("span", { className: "hint rule-id" }, rule.id)),
      h("td", { "data-title": "Expression" }, h("code", { className: "expression" }, rule.expression)),
      h("td", { "data-title": "Action" }, rule.action),
      h("td", { "data-title": "State" }, rule.enabled === false ? "Disabled" : "Enabled"),
      h(
        "td",
        { "data-title": "Actions", className: "actions" },
        rowErrors,
        h("button", { type: "button", "aria-label": `Edit ${label}`, onclick: () => tab.edit(rule) }, "Edit"),
        h(
          "button",
          { type: "button", className: "danger", "aria-label": `Delete ${label}`, onclick: () => tab.remove(rule, "It stops running at once.") },
          "Delete",
        ),
      ),
    );
  }

  function ruleEditor(rule, tab) {
    const formErrors = h("div", { className: "errors" });
    const description = field({ label: "Rule name (description)", name: "description", value: rule ? rule.description || "" : "", maxlength: "500" });
    const expression = textareaField({
      label: "Expression",
      name: "expression",
      value: rule ? rule.expression : "",
      rows: 4,
      hint: "Rules language, for example: http.request.uri.path contains \"/admin\" and ip.src ne 192.0.2.1",
    });
    const expressionError = h("p", { className: "field-error", id: "expression-error", role: "alert", hidden: true });
    expression.append(expressionError);
    expression.textarea.setAttribute("aria-describedby", `${expression.textarea.getAttribute("aria-describedby")} expression-error`);
    const action = selectField({ label: "Action", name: "action", options: ACTIONS, value: rule ? rule.action : "block" });
    const enabled = h("input", { type: "checkbox", id: "custom-enabled", name: "enabled", checked: rule ? rule.enabled !== false : true });

    function showRefusal(error) {
      const items = error && error.errors ? error.errors : [];
      const atExpression = items.filter((item) => pointedMember(item) === "expression");
      const elsewhere = items.filter((item) => pointedMember(item) !== "expression");
      expressionError.hidden = atExpression.length === 0;
      expressionError.textContent = atExpression.map((item) => `${item.message} (code ${item.code})`).join("; ");
      if (atExpression.length > 0) expression.textarea.setAttribute("aria-invalid", "true");
      else expression.textarea.removeAttribute("aria-invalid");
      const pointed = new Set(elsewhere.map(pointedMember).filter(Boolean));
      for (const control of form.querySelectorAll("input, select")) {
        if (pointed.has(control.name)) control.setAttribute("aria-invalid", "true");
        else control.removeAttribute("aria-invalid");
      }
      if (error && (elsewhere.length > 0 || items.length === 0)) formErrors.replaceChildren(errorBox(error));
      else formErrors.replaceChildren();
      const first = form.querySelector('[aria-invalid="true"]');
      if (first) first.focus();
    }

    const form = h(
      "form",
      {
        className: "card custom-editor",
        "aria-labelledby": "custom-editor-heading",
        onsubmit: async (event) => {
          event.preventDefault();
          showRefusal(null);
          const body = {
            description: description.input.value,
            expression: expression.textarea.value,
            action: action.select.value,
            enabled: enabled.checked,
          };
          try {
            await tab.save(rule, body);
          } catch (error) {
            showRefusal(error);
          }
        },
      },
      h("h2", { id: "custom-editor-heading", tabindex: "-1" }, rule ? `Edit ${ruleLabel(rule)}` : "Add custom rule"),
      formErrors,
      description,
      expression,
      action,
      h("div", { className: "field inline" }, enabled, h("label", { for: "custom-enabled" }, "Enabled")),
      h(
        "div",
        { className: "buttons" },
        h("button", { type: "submit", className: "primary" }, "Save"),
        h("button", { type: "button", onclick: () => tab.close() }, "Cancel"),
      ),
    );
    return form;
  }

  return ruleTab({
    zone,
    phase: CUSTOM_PHASE,
    className: "waf-custom",
    description: "Your own rules, run before the managed rules: each matches requests with an expression and acts on them.",
    addLabel: "Add custom rule",
    list: ruleTable,
    editor: ruleEditor,
  });
}
