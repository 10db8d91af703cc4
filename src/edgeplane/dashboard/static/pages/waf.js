// Security → WAF: the zone's managed rules (with the migration from the previous WAF while the zone has not finished
// it), its custom rules and its rate limiting rules, as tabs of one page. Each tab is its own module, a function of the context to its panel's
// content; this one only switches between them (a new tab is one more entry of TABS).
import { h, errorBox, pageHead } from "../dom.js";
import { customRulesTab } from "./waf_custom.js";
import { managedRulesTab } from "./waf_managed.js";
import { rateLimitingRulesTab } from "./waf_rate_limits.js";

const TABS = [
  { id: "managed", title: "Managed rules", render: managedRulesTab },
  { id: "custom", title: "Custom rules", render: customRulesTab },
  { id: "rate-limits", title: "Rate limiting rules", render: rateLimitingRulesTab },
];
let chosenTab = "managed";

/** The WAF page of `context.zone`, on the tab chosen last in this browser tab. */
export async function wafPage(context) {
  const { zone } = context;
  const section = h("section", { className: "waf" });
  const heading = h("h1", { tabindex: "-1" }, "WAF");
  if (!zone) {
    section.append(heading, h("p", {}, "No zone: pick or create a zone first."));
    return section;
  }
  const panel = h("div", { role: "tabpanel", id: "waf-panel", tabindex: "-1" });
  const tabButtons = TABS.map((tab) =>
    h(
      "button",
      {
        type: "button",
        role: "tab",
        id: `waf-tab-${tab.id}`,
        "aria-controls": "waf-panel",
        onclick: () => show(tab),
        onkeydown: (event) => moveBetweenTabs(event, tab),
      },
      tab.title,
    ),
  );

  function moveBetweenTabs(event, tab) {
    const step = { ArrowRight: 1, ArrowLeft: -1 }[event.key];
    if (!step) return;
    const next = TABS[(TABS.indexOf(tab) + step + TABS.length) % TABS.length];
    show(next).then(() => document.getElementById(`waf-tab-${next.id}`).focus());
  }

  async function show(tab) {
    chosenTab = tab.id;
    for (const [index, button] of tabButtons.entries()) {
      const selected = TABS[index] === tab;
      button.setAttribute("aria-selected", String(selected));
      button.tabIndex = selected ? 0 : -1;
    }
    panel.setAttribute("aria-labelledby", `waf-tab-${tab.id}`);
    panel.replaceChildren(h("p", { className: "loading" }, "Loading…"));
    try {
      panel.replaceChildren(await tab.render(context));
    } catch (error) {
      panel.replaceChildren(errorBox(error));
    }
  }

  section.append(
    pageHead(heading, `The web application firewall of ${zone.name}: managed rulesets, your own rules and rate limits, through the Rulesets API.`),
    h("div", { role: "tablist", "aria-label": "WAF", className: "tabs" }, tabButtons),
    panel,
  );
  await show(TABS.find((tab) => tab.id === chosenTab));
  return section;
}
