// The dashboard's shell: sign in, then the navigation, the account and zone pickers, and the page of the current
// location (#/web3, #/analytics, ...). Pages are functions of the context (session, account, zone) to a node.
import { v4All } from "./api.js";
import { h, errorBox } from "./dom.js";
import { currentSession, signOut } from "./session.js";
import { analyticsPage } from "./pages/analytics.js";
import { eventsPage } from "./pages/events.js";
import { logpushPage } from "./pages/logpush.js";
import { signInPage } from "./pages/sign_in.js";
import { wafPage } from "./pages/waf.js";
import { web3Page } from "./pages/web3.js";

const PAGES = [
  { route: "/web3", section: null, title: "Web3 gateways", render: web3Page },
  { route: "/analytics", section: null, title: "Analytics", render: analyticsPage },
  { route: "/logs/logpush", section: "Logs", title: "Logpush", render: logpushPage },
  {
    route: "/security/waf",
    section: "Security",
    title: "WAF",
    render: wafPage,
  },
  { route: "/security/events", section: "Security", title: "Events", render: eventsPage },
];
const DEFAULT_ROUTE = "/web3";
const app = document.getElementById("app");

const state = { session: null, accounts: [], allZones: [], zones: [], account: null, zone: null };

function currentRoute() {
  const route = location.hash.replace(/^#/, "");
  return PAGES.find((page) => page.route === route) || PAGES.find((page) => page.route === DEFAULT_ROUTE);
}

async function start() {
  state.session = await currentSession();
  if (state.session === null) showSignIn();
  else await showShell();
}

function showSignIn() {
  document.title = "Sign in · edgeplane";
  const page = signInPage(async (session) => {
    state.session = session;
    await showShell();
  });
  app.replaceChildren(page);
  page.querySelector("input").focus();
}

// The accounts are those GET /accounts lists and those of the zones GET /zones lists: a token that reaches some
// zones of an account, and not the account itself, still picks them by their account.
async function loadAccountsAndZones() {
  const [accounts, zones] = await Promise.all([v4All("/accounts"), v4All("/zones")]);
  const byId = new Map(accounts.map((account) => [account.id, account]));
  for (const zone of zones) {
    if (!byId.has(zone.account.id)) byId.set(zone.account.id, { id: zone.account.id, name: zone.account.name });
  }
  state.accounts = [...byId.values()];
  state.allZones = zones;
  const remembered = sessionStorage.getItem("edgeplane.account");
  state.account = state.accounts.find((a) => a.id === remembered) || state.accounts[0] || null;
  chooseZone();
}

function chooseZone() {
  state.zones = state.account ? state.allZones.filter((zone) => zone.account.id === state.account.id) : [];
  const remembered = sessionStorage.getItem("edgeplane.zone");
  state.zone = state.zones.find((z) => z.id === remembered) || state.zones[0] || null;
}

function picker(id, label, items, chosen, onchange) {
  return h(
    "div",
    { className: "picker" },
    h("label", { for: id }, label),
    h(
      "select",
      { id, onchange, disabled: items.length === 0 },
      items.length === 0 ? h("option", {}, "none") : null,
      items.map((item) => h("option", { value: item.id, selected: chosen && item.id === chosen.id }, item.name)),
    ),
  );
}

function navigation(active) {
  const link = (page) =>
    h(
      "a",
      { href: `#${page.route}`, "aria-current": page === active ? "page" : undefined },
      page.title,
    );
  const topLevel = PAGES.filter((page) => page.section === null).map((page) => h("li", {}, link(page)));
  const sections = [...new Set(PAGES.map((page) => page.section).filter(Boolean))].map((section) =>
    h(
      "li",
      {},
      h("span", { className: "nav-section", id: `nav-${section}` }, section),
      h(
        "ul",
        { "aria-labelledby": `nav-${section}` },
        PAGES.filter((page) => page.section === section).map((page) => h("li", {}, link(page))),
      ),
    ),
  );
  return h("nav", { "aria-label": "Main" }, h("ul", {}, topLevel, sections));
}

async function showShell() {
  try {
    await loadAccountsAndZones();
  } catch (error) {
    app.replaceChildren(h("main", { id: "main" }, h("h1", {}, "edgeplane"), errorBox(error)));
    return;
  }
  await renderPage();
}

async function renderPage() {
  const active = currentRoute();
  const user = state.session.user.email + (state.session.token_id ? " (API token)" : "");
  const main = h("main", { id: "main", tabindex: "-1" }, h("p", { className: "loading" }, "Loading…"));
  const header = h(
    "header",
    { className: "topbar" },
    h("a", { className: "brand", href: `#${DEFAULT_ROUTE}` }, "edgeplane"),
    h(
      "div",
      { className: "pickers" },
      picker("account-picker", "Account", state.accounts, state.account, async (event) => {
        state.account = state.accounts.find((a) => a.id === event.target.value);
        sessionStorage.setItem("edgeplane.account", state.account.id);
        sessionStorage.removeItem("edgeplane.zone");
        chooseZone();
        await renderPage();
        document.getElementById("account-picker").focus();
      }),
      picker("zone-picker", "Zone", state.zones, state.zone, async (event) => {
        state.zone = state.zones.find((z) => z.id === event.target.value);
        sessionStorage.setItem("edgeplane.zone", state.zone.id);
        await renderPage();
        document.getElementById("zone-picker").focus();
      }),
    ),
    h(
      "div",
      { className: "who" },
      h("span", {}, user),
      h(
        "button",
        {
          type: "button",
          onclick: async () => {
            try {
              await signOut();
            } finally {
              state.session = null;
              showSignIn();
            }
          },
        },
        "Sign out",
      ),
    ),
  );
  app.replaceChildren(header, h("div", { className: "layout" }, navigation(active), main));
  document.title = `${active.title} · edgeplane`;
  const context = { session: state.session, account: state.account, zone: state.zone, gateway: state.session.gateway };
  try {
    main.replaceChildren(await active.render(context));
  } catch (error) {
    if (error.status === 401) {
      state.session = null;
      showSignIn();
      return;
    }
    main.replaceChildren(h("h1", {}, active.title), errorBox(error));
  }
}

window.addEventListener("hashchange", async () => {
  if (state.session === null) return;
  await renderPage();
  const heading = document.querySelector("main h1");
  if (heading) heading.focus();
});

start().catch((error) => app.replaceChildren(h("main", { id: "main" }, h("h1", {}, "edgeplane"), errorBox(error))));
