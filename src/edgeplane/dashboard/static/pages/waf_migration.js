// The migration of seed 002, on the Managed rules tab of a zone still on the previous WAF: its state and eligibility
// as the API reports them, then Review configuration → Deploy (Enterprise: validation mode, both versions running;
// other plans: the migration finishes), then, in validation mode, Ready to update → Turn off previous version.
// Each step is one call of the migration API; nothing is decided here that the API does not say. The panel shows its
// state on one line and folds the rest (the eligibility, the step, the previous WAF) behind "Show the update", open
// by itself while the migration is under way (validation mode) or once a step was taken, so that the managed
// rulesets below it stay within the first screen.
import { ApiFailure, v4 } from "../api.js";
import { h, errorBox } from "../dom.js";
import { MANAGED_PHASE, apiAnswer, readEntrypoint, writableRule, writeEntrypoint } from "./waf_entrypoint.js";
import { previousWafBrowser } from "./waf_previous.js";

const RULESET_NAMES = {
  efb7b8c949ac4650a09736fc376e9aee: "Cloudflare Managed Ruleset",
  "4814384a9e5d4991b9815dcfc25d2f1f": "Cloudflare OWASP Core Ruleset",
};

/** The answer of a GET, or the ApiFailure it was refused with (the refusal is the message to show). */
async function answerOrRefusal(path) {
  try {
    return { answer: await v4("GET", path) };
  } catch (error) {
    if (error instanceof ApiFailure && error.status === 400) return { refusal: error };
    throw error;
  }
}

function refusalText(refusal) {
  return refusal.errors.map((item) => `${item.message} (code ${item.code})`).join("; ");
}

/** Fills `holder` with the migration of `context.zone` (nothing more than a line once it finished); `holder.refresh()`
 * reads it again. `onChanged` is called after a step wrote the managed entrypoint. */
export async function migrationPanel(context, holder, onChanged) {
  const { zone } = context;
  const base = `/zones/${zone.id}/waf_migration`;
  const enterprise = zone.plan && zone.plan.legacy_id === "enterprise";
  const status = h("p", { className: "status", role: "status" });
  let expanded = null; // whether the update's details are shown (null: as the state has it)

  holder.refresh = async () => {
    try {
      holder.replaceChildren(await render());
    } catch (error) {
      holder.replaceChildren(errorBox(error));
    }
  };

  async function render() {
    const state = await v4("GET", `${base}/status`);
    if (state.migration_state === "complete") {
      return h(
        "section",
        { className: "card migration", "aria-labelledby": "migration-heading" },
        h("h2", { id: "migration-heading", tabindex: "-1" }, "WAF managed rules: new version"),
        status,
        stateList(state),
        h("p", {}, "The migration finished: the previous version is off for good, and the managed rulesets below are the zone's managed WAF."),
      );
    }
    const [phaseTwo, phaseOne, configTwo, configOne] = await Promise.all([
      v4("GET", `${base}/check?phase_two=1`),
      v4("GET", `${base}/check`),
      answerOrRefusal(`${base}/config?phase_two=1`),
      answerOrRefusal(`${base}/config`),
    ]);
    const eligible = phaseTwo.compatible && !configTwo.refusal;
    if (expanded === null) expanded = state.migration_state === "validation";
    const step = h("div", { className: "migration-step" });
    const details = h(
      "div",
      { id: "migration-details", hidden: !expanded },
      h("p", {}, `${zone.name} still has the previous version of the managed rules. The update is irreversible: afterwards the previous version's API stops working and the Rulesets API configures the managed rules.`),
      eligibility(phaseTwo, phaseOne, configTwo, configOne),
      step,
      previousWafBrowser(zone),
    );
    const toggle = h(
      "button",
      {
        type: "button",
        "aria-expanded": String(expanded),
        "aria-controls": "migration-details",
        onclick: () => {
          expanded = !expanded;
          details.hidden = !expanded;
          toggle.setAttribute("aria-expanded", String(expanded));
          toggle.textContent = expanded ? "Hide the update" : "Show the update";
        },
      },
      expanded ? "Hide the update" : "Show the update",
    );
    if (state.migration_state === "validation") validationStep(step);
    else startStep(step, eligible);
    return h(
      "section",
      { className: "card migration", "aria-labelledby": "migration-heading" },
      h("div", { className: "migration-head" }, h("h2", { id: "migration-heading", tabindex: "-1" }, "Update to the new WAF managed rules"), toggle),
      stateList(state, [["Update", eligible ? "eligible" : "not eligible"]]),
      status,
      details,
    );
  }

  /** The migration's state as a row of terms, each over its value (`more`: [term, value] pairs after them). */
  function stateList(state, more = []) {
    const rows = [
      ["Migration state", state.migration_state],
      ["Previous version", state.old_waf_status],
      ["New version", state.new_waf_status],
      ["Plan", zone.plan ? zone.plan.name : "unknown"],
      ...more,
    ];
    if (state.created) rows.push(["Changed", `${state.created} (through ${state.source})`]);
    return h("dl", { className: "migration-state" }, rows.map(([term, detail]) => h("div", {}, h("dt", {}, term), h("dd", {}, detail))));
  }

  function eligibility(phaseTwo, phaseOne, configTwo, configOne) {
    const lines = [];
    if (phaseTwo.compatible) lines.push(h("li", { className: "eligible" }, "Phase 2: this zone is eligible for the update."));
    else lines.push(h("li", { className: "not-eligible" }, `Phase 2: not eligible${configTwo.refusal ? `. The API says: ${refusalText(configTwo.refusal)}` : "."}`));
    if (phaseTwo.compatible && configTwo.refusal) {
      lines.push(h("li", { className: "not-eligible" }, `The configuration cannot be migrated: ${refusalText(configTwo.refusal)}`));
    }
    if (phaseOne.compatible) lines.push(h("li", { className: "eligible" }, "Phase 1: eligible too (the stricter rules of the first phase)."));
    else lines.push(h("li", { className: "hint" }, `Phase 1: not eligible${configOne.refusal ? `. The API says: ${refusalText(configOne.refusal)}` : "."}`));
    return h("div", { className: "eligibility" }, h("h3", {}, "Eligibility"), h("ul", {}, lines));
  }

  function startStep(step, eligible) {
    const errors = h("div", { className: "errors" });
    const review = h(
      "button",
      {
        type: "button",
        className: "primary",
        disabled: !eligible,
        onclick: async () => {
          errors.replaceChildren();
          try {
            expanded = true; // a step taken: its outcome stays in view
            const configuration = await v4("GET", `${base}/config?phase_two=1`);
            step.replaceChildren(reviewStep(configuration));
            step.querySelector("h3").focus();
          } catch (error) {
            errors.replaceChildren(errorBox(error));
          }
        },
      },
      "Review configuration",
    );
    step.replaceChildren(errors, review);
  }

  function reviewStep(configuration) {
    const errors = h("div", { className: "errors" });
    const mode = enterprise ? "validation" : "pending";
    return h(
      "div",
      { className: "review" },
      h("h3", { tabindex: "-1" }, "Review configuration"),
      h("p", {}, "The new version's configuration, built by the API from the previous settings (GET …/waf_migration/config?phase_two=1):"),
      h("ol", { className: "migration-rules" }, configuration.rules.map(configurationRule)),
      apiAnswer("The configuration as the API answers it", configuration),
      h(
        "p",
        {},
        enterprise
          ? "Deploy starts validation mode: the new version runs side by side with the previous one (the new one first). Review the Activity log in Security → Events, then turn off the previous version."
          : "Deploy saves this configuration and turns the previous version off: the migration finishes at once and cannot be undone.",
      ),
      errors,
      h(
        "div",
        { className: "buttons" },
        h(
          "button",
          {
            type: "button",
            className: "primary",
            onclick: () =>
              write(errors, configuration.rules, mode, enterprise ? "Deployed: validation mode, both versions run" : "Deployed: the migration finished"),
          },
          "Deploy",
        ),
        h("button", { type: "button", onclick: () => holder.refresh() }, "Cancel"),
      ),
    );
  }

  function configurationRule(rule) {
    const parameters = rule.action_parameters || {};
    const overrides = parameters.overrides || {};
    const what =
      rule.action === "execute"
        ? `Execute ${RULESET_NAMES[parameters.id] || parameters.id}`
        : `${rule.action}${parameters.ruleset ? ` (ruleset ${parameters.ruleset})` : ""}`;
    const details = [];
    if (overrides.categories) details.push(`${overrides.categories.length} category overrides`);
    if (overrides.rules) details.push(`${overrides.rules.length} rule overrides`);
    return h(
      "li",
      {},
      h("strong", {}, what),
      rule.enabled === false ? " (disabled)" : "",
      " on ",
      h("code", {}, rule.expression),
      details.length ? ` · ${details.join(", ")}` : "",
      rule.description ? h("span", { className: "hint rule-id" }, rule.description) : null,
    );
  }

  function validationStep(step) {
    const ready = h(
      "button",
      {
        type: "button",
        className: "primary",
        onclick: () => {
          const errors = h("div", { className: "errors" });
          step.replaceChildren(
            h("h3", { tabindex: "-1" }, "Ready to update"),
            h("p", {}, "Turning off the previous version finishes the migration with the managed rules deployed below. It cannot be undone."),
            errors,
            h(
              "div",
              { className: "buttons" },
              h(
                "button",
                {
                  type: "button",
                  className: "danger",
                  onclick: async () => {
                    errors.replaceChildren();
                    try {
                      const entrypoint = await readEntrypoint(zone, MANAGED_PHASE);
                      const rules = entrypoint ? entrypoint.rules.map(writableRule) : [];
                      await write(errors, rules, "pending", "Turned off the previous version: the migration finished");
                    } catch (error) {
                      errors.replaceChildren(errorBox(error));
                    }
                  },
                },
                "Turn off previous version",
              ),
              h("button", { type: "button", onclick: () => validationStep(step) }, "Cancel"),
            ),
          );
          step.querySelector("h3").focus();
        },
      },
      "Ready to update",
    );
    step.replaceChildren(
      h(
        "p",
        {},
        "Validation mode: both versions run, the new one first. Review the Activity log in Security → Events and adjust the managed rules below; when they behave as expected, finish the update.",
      ),
      ready,
    );
  }

  async function write(errors, rules, mode, outcome) {
    errors.replaceChildren();
    try {
      await writeEntrypoint(zone, MANAGED_PHASE, rules, `?waf_migration=${mode}&phase_two=1`);
    } catch (error) {
      errors.replaceChildren(errorBox(error));
      return;
    }
    await holder.refresh();
    holder.querySelector(".status").textContent = outcome;
    holder.querySelector("#migration-heading").focus();
    await onChanged();
  }

  await holder.refresh();
}
