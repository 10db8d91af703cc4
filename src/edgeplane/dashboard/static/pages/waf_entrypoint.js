// The zone's phase entrypoints as the WAF pages read and write them (Rulesets API), and the small controls the
// WAF pages share. Every write goes to the API as it is; nothing is checked here.
import { ApiFailure, v4 } from "../api.js";
import { h } from "../dom.js";

export const MANAGED_PHASE = "http_request_firewall_managed";
export const CUSTOM_PHASE = "http_request_firewall_custom";

/** The zone's entrypoint of `phase` (the ruleset with its rules), or null when the zone has none (404, code 7003). */
export async function readEntrypoint(zone, phase) {
  try {
    return await v4("GET", `/zones/${zone.id}/rulesets/phases/${phase}/entrypoint`);
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 404) return null;
    throw error;
  }
}

/** Replaces the rules of the zone's entrypoint of `phase` (created when missing); `query` is appended as is. */
export async function writeEntrypoint(zone, phase, rules, query = "") {
  return v4("PUT", `/zones/${zone.id}/rulesets/phases/${phase}/entrypoint${query}`, { rules });
}

/** A rule as it can be PUT back: what a GET answers, without the members the API fills in itself. */
export function writableRule(rule) {
  const { version, last_updated, categories, ...kept } = rule;
  return kept;
}

let controlIds = 0;

/** A labelled select: options are [value, text] pairs. Returns the wrapper; the select is .select. */
export function selectField({ label, name, options, value, hint, onchange }) {
  controlIds += 1;
  const id = `waf-control-${controlIds}`;
  const hintId = hint ? `${id}-hint` : undefined;
  const select = h(
    "select",
    { id, name, "aria-describedby": hintId, onchange },
    options.map(([optionValue, text]) => h("option", { value: optionValue, selected: optionValue === value }, text)),
  );
  const wrapper = h(
    "div",
    { className: "field" },
    h("label", { for: id }, label),
    select,
    hint ? h("p", { className: "hint", id: hintId }, hint) : null,
  );
  wrapper.select = select;
  return wrapper;
}

/** A labelled textarea. Returns the wrapper; the textarea is .textarea. */
export function textareaField({ label, name, value, hint, rows = 3 }) {
  controlIds += 1;
  const id = `waf-control-${controlIds}`;
  const hintId = hint ? `${id}-hint` : undefined;
  const textarea = h("textarea", { id, name, rows, "aria-describedby": hintId, spellcheck: "false" });
  textarea.value = value || "";
  const wrapper = h(
    "div",
    { className: "field wide" },
    h("label", { for: id }, label),
    textarea,
    hint ? h("p", { className: "hint", id: hintId }, hint) : null,
  );
  wrapper.textarea = textarea;
  return wrapper;
}

/** The API's answer shown as it is, folded: what the page read back after a write. */
export function apiAnswer(summary, value) {
  return h("details", { className: "api-answer" }, h("summary", {}, summary), h("pre", {}, JSON.stringify(value, null, 2)));
}
