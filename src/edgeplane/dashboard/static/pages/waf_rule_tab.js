// The frame of a WAF tab over the rules of one of the zone's phase entrypoints (Custom rules, Rate limiting rules):
// the head with what the tab holds and its Add button, the status of the last change, the list, the form in place of
// the list, and the writes every such tab makes (add, edit, delete). The tab gives its list and its form; this module
// owns the rest, so that each tab reads as what it shows.
import { v4 } from "../api.js";
import { h, confirmDeletion, errorBox, pageHead } from "../dom.js";
import { formPlace } from "../in_place_form.js";
import { readEntrypoint, writeEntrypoint } from "./waf_entrypoint.js";

/** How a rule is named on buttons and in the status: its description, else its id. */
export function ruleLabel(rule) {
  return rule.description ? `rule “${rule.description}”` : `rule ${rule.id}`;
}

/** A tab over the rules of `zone`'s entrypoint of `phase`, as an element. `list(rules, tab)` draws the rules (the
 * entrypoint's, [] when the zone has none); `editor(rule, tab)` builds the form for `rule` (null: a new rule), whose
 * first h2 is focused when it opens. `tab` offers the form and the list:
 * - `tab.edit(rule)` opens the editor in place of the list;
 * - `tab.close()` closes it;
 * - `tab.save(rule, body)` writes: PATCH of the rule, else POST of a new rule, else PUT of the entrypoint when the
 *   zone has none; then closes the form, reads the list again and says "Saved …". It rejects with the ApiFailure
 *   for the form to show, and then changes nothing on the page;
 * - `tab.remove(rule, consequence)` asks first (in the dialog), then deletes the rule and says "Deleted …". */
export async function ruleTab({ zone, phase, className, description, addLabel, list, editor }) {
  const root = h("div", { className });
  const status = h("p", { className: "status", role: "status" });
  const errors = h("div", { className: "errors" });
  const listHolder = h("div", {});
  const addButton = h("button", { type: "button", className: "primary", onclick: () => tab.edit(null) }, addLabel);
  const head = pageHead(null, description, addButton);
  const place = formPlace(head.tools, errors, listHolder);
  const rulesPath = () => `/zones/${zone.id}/rulesets/${entrypoint.id}/rules`;
  let entrypoint = null;

  async function reload() {
    errors.replaceChildren();
    try {
      entrypoint = await readEntrypoint(zone, phase);
      listHolder.replaceChildren(list(entrypoint ? entrypoint.rules || [] : [], tab));
    } catch (error) {
      errors.replaceChildren(errorBox(error));
    }
  }

  const tab = {
    edit(rule) {
      status.textContent = ""; // the last outcome is not this edit's
      const form = editor(rule, tab);
      place.open(form);
      form.querySelector("h2").focus();
    },
    close() {
      place.close();
    },
    async save(rule, body) {
      if (rule) await v4("PATCH", `${rulesPath()}/${rule.id}`, body);
      else if (entrypoint) await v4("POST", rulesPath(), body);
      else await writeEntrypoint(zone, phase, [body]);
      place.close();
      await reload();
      addButton.focus();
      status.textContent = `Saved ${ruleLabel(body)}`; // once the list shows it
    },
    remove(rule, consequence) {
      const label = ruleLabel(rule);
      confirmDeletion(root, {
        name: label,
        consequence,
        remove: () => v4("DELETE", `${rulesPath()}/${rule.id}`),
        done: async () => {
          status.textContent = `Deleted ${label}`;
          await reload();
        },
      });
    },
  };

  root.append(head, status, place.element, errors, listHolder);
  await reload();
  return root;
}
