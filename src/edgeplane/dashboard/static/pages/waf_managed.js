// Security → WAF → Managed rules: which managed rulesets the zone's http_request_firewall_managed entrypoint executes
// and how (deploy, configure, undeploy), one card per ruleset side by side, read back from the API after every write;
// the deploy/configure form opens in place of the cards. Above them, while the zone has not finished it, the
// migration from the previous WAF (waf_migration.js), folded to its state unless it is under way.
import { v4 } from "../api.js";
import { h, errorBox } from "../dom.js";
import { formPlace } from "../in_place_form.js";
import { MANAGED_PHASE, apiAnswer, readEntrypoint, writableRule, writeEntrypoint } from "./waf_entrypoint.js";
import { managedRulesetEditor, describeOverrides } from "./waf_managed_editor.js";
import { migrationPanel } from "./waf_migration.js";

/** The managed rulesets the zone may execute, with their rules (GET /rulesets lists them, GET /rulesets/{id} reads one). */
async function managedRulesets(zone) {
  const listed = await v4("GET", `/zones/${zone.id}/rulesets?per_page=1000`);
  const managed = listed.filter((ruleset) => ruleset.kind === "managed");
  return Promise.all(managed.map((ruleset) => v4("GET", `/zones/${zone.id}/rulesets/${ruleset.id}`)));
}

function executes(rule, ruleset) {
  return rule.action === "execute" && rule.action_parameters && rule.action_parameters.id === ruleset.id;
}

/** The Managed rules tab of `context.zone`. */
export async function managedRulesTab(context) {
  const { zone } = context;
  const root = h("div", { className: "waf-managed" });
  const status = h("p", { className: "status", role: "status" });
  const errors = h("div", { className: "errors" });
  const migrationHolder = h("div", {});
  const deployments = h("div", { className: "deployments" });
  const place = formPlace(migrationHolder, deployments);
  const rulesets = await managedRulesets(zone);
  let entrypoint = null;

  const currentRules = () => (entrypoint ? entrypoint.rules || [] : []);

  async function reload() {
    errors.replaceChildren();
    try {
      entrypoint = await readEntrypoint(zone, MANAGED_PHASE);
      deployments.replaceChildren(...rulesets.map(deploymentCard), otherRules());
    } catch (error) {
      errors.replaceChildren(errorBox(error));
    }
  }

  async function save(rules, outcome) {
    entrypoint = await writeEntrypoint(zone, MANAGED_PHASE, rules);
    status.textContent = outcome;
    await reload();
    await migrationHolder.refresh();
  }

  function deploymentCard(ruleset) {
    const placed = currentRules()
      .map((rule, index) => ({ rule, index }))
      .filter(({ rule }) => executes(rule, ruleset));
    const cardErrors = h("div", { className: "errors" });
    const card = h(
      "section",
      { className: "card deployment", "data-ruleset": ruleset.id, "aria-labelledby": `ruleset-${ruleset.id}` },
      h("h2", { id: `ruleset-${ruleset.id}`, tabindex: "-1" }, ruleset.name),
      ruleset.description ? h("p", { className: "hint" }, ruleset.description) : null,
      cardErrors,
    );
    if (placed.length === 0) {
      card.append(
        h("p", {}, h("strong", {}, "Not deployed"), ` in ${zone.name}.`),
        h(
          "button",
          { type: "button", className: "primary", "aria-label": `Deploy ${ruleset.name}`, onclick: () => openEditor(ruleset, null) },
          "Deploy",
        ),
      );
      return card;
    }
    for (const { rule, index } of placed) {
      card.append(
        deploymentSummary(ruleset, rule),
        h(
          "div",
          { className: "buttons" },
          h(
            "button",
            { type: "button", "aria-label": `Configure ${ruleset.name}`, onclick: () => openEditor(ruleset, index) },
            "Configure",
          ),
          h(
            "button",
            {
              type: "button",
              "aria-label": `${rule.enabled === false ? "Enable" : "Disable"} ${ruleset.name}`,
              onclick: () =>
                change(cardErrors, () => {
                  const rules = currentRules().map(writableRule);
                  rules[index] = { ...rules[index], enabled: rule.enabled === false };
                  return save(rules, `${rule.enabled === false ? "Enabled" : "Disabled"} ${ruleset.name}`);
                }),
            },
            rule.enabled === false ? "Enable" : "Disable",
          ),
          h(
            "button",
            {
              type: "button",
              className: "danger",
              "aria-label": `Undeploy ${ruleset.name}`,
              onclick: () =>
                change(cardErrors, () => {
                  const rules = currentRules().map(writableRule).filter((_, position) => position !== index);
                  return save(rules, `Undeployed ${ruleset.name}`);
                }),
            },
            "Undeploy",
          ),
        ),
      );
    }
    return card;
  }

  async function change(where, write) {
    where.replaceChildren();
    try {
      await write();
    } catch (error) {
      where.replaceChildren(errorBox(error));
    }
  }

  function deploymentSummary(ruleset, rule) {
    const lines = [
      ["State", rule.enabled === false ? "Deployed, disabled" : "Deployed, enabled"],
      ["Runs on", rule.expression === "true" ? "all incoming requests" : h("code", {}, rule.expression)],
      ...describeOverrides(ruleset, rule),
    ];
    return h(
      "div",
      { className: "deployment-summary" },
      h("dl", {}, lines.flatMap(([term, detail]) => [h("dt", {}, term), h("dd", {}, detail)])),
      apiAnswer(`The rule as the API answers it (entrypoint version ${entrypoint.version})`, rule),
    );
  }

  // Rules of the entrypoint that execute no managed ruleset (skip rules the migration made, log rules): listed so
  // that what runs is all on the page; they are edited through the API.
  function otherRules() {
    const all = currentRules();
    const others = all.filter((rule) => !rulesets.some((ruleset) => executes(rule, ruleset)));
    if (others.length === 0) return h("div", {});
    return h(
      "section",
      { className: "card other-rules-card" },
      h("h2", {}, "Other rules of the managed phase"),
      h(
        "ul",
        { className: "other-rules" },
        others.map((rule) =>
          h(
            "li",
            {},
            `Rule ${all.indexOf(rule) + 1} of ${all.length}: `,
            h("strong", {}, rule.action),
            rule.enabled === false ? " (disabled)" : "",
            " ",
            rule.description || "",
            " ",
            h("code", {}, rule.expression),
          ),
        ),
      ),
    );
  }

  function openEditor(ruleset, index) {
    status.textContent = ""; // the last outcome is not this edit's
    const existing = index === null ? null : currentRules()[index];
    const editor = managedRulesetEditor({
      ruleset,
      rule: existing,
      onSubmit: async (rule) => {
        const rules = currentRules().map(writableRule);
        if (index === null) rules.push(rule);
        else rules[index] = rule;
        await save(rules, `${index === null ? "Deployed" : "Saved"} ${ruleset.name}`);
        place.close();
        const heading = document.getElementById(`ruleset-${ruleset.id}`);
        if (heading) heading.focus();
      },
      onCancel: () => place.close(),
    });
    place.open(editor);
    editor.querySelector("h2").focus();
  }

  root.append(status, errors, migrationHolder, place.element, deployments);
  await migrationPanel(context, migrationHolder, reload);
  await reload();
  return root;
}
