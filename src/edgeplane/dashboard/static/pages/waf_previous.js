// The previous WAF's packages, groups and rules, read-only with their modes, for a zone that has not finished the
// migration (after it the API answers 403, code 10220). Loaded when opened: a package has hundreds of rules.
import { v4All } from "../api.js";
import { h, errorBox } from "../dom.js";

/** A folded section listing the previous WAF of `zone`. */
export function previousWafBrowser(zone) {
  const base = `/zones/${zone.id}/firewall/waf/packages`;
  const content = h("div", {}, h("p", { className: "loading" }, "Loading…"));
  let loaded = false;
  const details = h(
    "details",
    {
      className: "previous-waf",
      ontoggle: async () => {
        if (!details.open || loaded) return;
        loaded = true;
        try {
          const packages = await v4All(base, 100);
          content.replaceChildren(...packages.map(packageSection));
        } catch (error) {
          content.replaceChildren(errorBox(error));
        }
      },
    },
    h("summary", {}, "The previous WAF: packages, groups and rules (read-only)"),
    content,
  );

  function packageSection(wafPackage) {
    const facts = [`detection mode ${wafPackage.detection_mode}`];
    if (wafPackage.sensitivity) facts.push(`sensitivity ${wafPackage.sensitivity}`);
    if (wafPackage.action_mode) facts.push(`action mode ${wafPackage.action_mode}`);
    const groups = h("div", {}, h("p", { className: "loading" }, "Loading…"));
    v4All(`${base}/${wafPackage.id}/groups`, 100)
      .then((found) => groups.replaceChildren(groupTable(wafPackage, found)))
      .catch((error) => groups.replaceChildren(errorBox(error)));
    return h(
      "section",
      { className: "previous-package", "data-package": wafPackage.id },
      h("h3", {}, wafPackage.name),
      h("p", { className: "hint" }, wafPackage.description, " · ", facts.join(" · ")),
      groups,
    );
  }

  function groupTable(wafPackage, groups) {
    return h(
      "table",
      { className: "previous-groups" },
      h("caption", {}, `Groups of ${wafPackage.name}`),
      h("thead", {}, h("tr", {}, ["Group", "Rules", "Mode", ""].map((title) => h("th", { scope: "col" }, title)))),
      h("tbody", {}, groups.flatMap((group) => groupRow(wafPackage, group))),
    );
  }

  function groupRow(wafPackage, group) {
    const rules = h("td", { colspan: "4", className: "previous-rules" });
    const rulesRow = h("tr", { hidden: true }, rules);
    const button = h(
      "button",
      {
        type: "button",
        "aria-expanded": "false",
        "aria-label": `Rules of ${group.name}`,
        onclick: async () => {
          const opening = rulesRow.hidden;
          rulesRow.hidden = !opening;
          button.setAttribute("aria-expanded", String(opening));
          if (!opening || rules.childElementCount > 0) return;
          try {
            const found = await v4All(`${base}/${wafPackage.id}/rules?group_id=${group.id}`, 100);
            rules.replaceChildren(ruleList(found));
          } catch (error) {
            rules.replaceChildren(errorBox(error));
          }
        },
      },
      "Rules",
    );
    return [
      h(
        "tr",
        { "data-group": group.id },
        h("th", { scope: "row" }, group.name, group.description ? h("span", { className: "hint rule-id" }, group.description) : null),
        h("td", {}, `${group.rules_count} (${group.modified_rules_count} changed)`),
        h("td", {}, h("strong", {}, group.mode)),
        h("td", {}, button),
      ),
      rulesRow,
    ];
  }

  function ruleList(rules) {
    return h(
      "ul",
      { className: "previous-rule-list" },
      rules.map((rule) =>
        h("li", { "data-rule": rule.id }, h("code", {}, rule.id), " ", rule.description, " — ", h("strong", {}, rule.mode), rule.default_mode ? ` (default ${rule.default_mode})` : ""),
      ),
    );
  }

  return details;
}
