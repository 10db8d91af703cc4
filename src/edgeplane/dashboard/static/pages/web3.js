// Web3 gateways: the zone's hostnames (GET/POST /zones/{zone}/web3/hostnames, PATCH/DELETE .../{id}), each with the
// endpoint URL a client sends JSON-RPC to; adding and editing open a form in place of the list. What a hostname may
// be is the API's to say: its errors are shown inline.
import { v4, v4All } from "../api.js";
import { h, confirmDeletion, errorBox, field, markInvalid, pageHead } from "../dom.js";
import { formPlace } from "../in_place_form.js";

const TARGETS = ["ethereum", "ipfs", "ipfs_universal_path"];

/** The gateway's URL for `hostname` on `network`: the edge listener's port, path /v1/<network>. */
export function endpointUrl(hostname, gateway, network) {
  const port = gateway && gateway.port && gateway.port !== 80 ? `:${gateway.port}` : "";
  return `http://${hostname}${port}/v1/${network}`;
}

/** The Web3 gateways page of `context.zone`. */
export async function web3Page(context) {
  const { zone, gateway } = context;
  const section = h("section", { className: "web3" });
  if (!zone) {
    section.append(h("h1", { tabindex: "-1" }, "Web3 gateways"), h("p", {}, "No zone: pick or create a zone first."));
    return section;
  }
  const path = `/zones/${zone.id}/web3/hostnames`;
  const networks = gateway && gateway.networks.length ? gateway.networks : ["mainnet"];
  let network = networks.includes("mainnet") ? "mainnet" : networks[0];

  const listErrors = h("div", { className: "errors" });
  const tableHolder = h("div", { className: "table-holder" });
  const status = h("p", { className: "status", role: "status" });
  const head = pageHead(
    h("h1", { tabindex: "-1" }, "Web3 gateways"),
    `Hostnames of ${zone.name} that serve the Ethereum gateway. Send JSON-RPC to an endpoint URL.`,
  );
  const place = formPlace(head.tools, listErrors, tableHolder);

  async function reload() {
    listErrors.replaceChildren();
    try {
      tableHolder.replaceChildren(hostnameTable(await v4All(path)));
    } catch (error) {
      listErrors.replaceChildren(errorBox(error));
    }
  }

  function hostnameTable(hostnames) {
    if (hostnames.length === 0) return h("p", {}, `No web3 hostnames in ${zone.name} yet.`);
    return h(
      "table",
      { className: "hostnames" },
      h("caption", {}, `Web3 hostnames of ${zone.name}`),
      h(
        "thead",
        {},
        h(
          "tr",
          {},
          ["Hostname", "Target", "Status", "Description", "Endpoint URL", "Actions"].map((title) =>
            h("th", { scope: "col" }, title),
          ),
        ),
      ),
      h("tbody", {}, hostnames.map(hostnameRow)),
    );
  }

  function hostnameRow(hostname) {
    const url = endpointUrl(hostname.name, gateway, network);
    const urlInput = h("input", {
      type: "text",
      readonly: true,
      value: url,
      className: "endpoint",
      "aria-label": `Endpoint URL of ${hostname.name}`,
      onfocus: (event) => event.target.select(),
    });
    const copy = h(
      "button",
      {
        type: "button",
        "aria-label": `Copy the endpoint URL of ${hostname.name}`,
        onclick: async () => {
          try {
            await navigator.clipboard.writeText(url);
            status.textContent = `Copied ${url}`;
          } catch {
            urlInput.focus();
            urlInput.select();
            status.textContent = "Selected the URL: copy it with Ctrl+C";
          }
        },
      },
      "Copy",
    );
    return h(
      "tr",
      { "data-hostname": hostname.name },
      h("th", { scope: "row", "data-title": "Hostname" }, hostname.name),
      h("td", { "data-title": "Target" }, hostname.target),
      h("td", { "data-title": "Status" }, hostname.status),
      h("td", { "data-title": "Description" }, hostname.description || "—"),
      h(
        "td",
        { "data-title": "Endpoint URL" },
        hostname.target === "ethereum" ? h("div", { className: "copyable" }, urlInput, copy) : "—",
      ),
      h(
        "td",
        { "data-title": "Actions", className: "actions" },
        h(
          "button",
          { type: "button", "aria-label": `Edit ${hostname.name}`, onclick: () => showEdit(hostname) },
          "Edit",
        ),
        h(
          "button",
          { type: "button", className: "danger", "aria-label": `Delete ${hostname.name}`, onclick: () => confirmDelete(hostname) },
          "Delete",
        ),
      ),
    );
  }

  function showEdit(hostname) {
    status.textContent = ""; // the last outcome is not this edit's
    const errors = h("div", { className: "errors" });
    const description = field({ label: "Description", name: "description", value: hostname.description });
    const dnslink = field({ label: "DNSLink", name: "dnslink", value: hostname.dnslink });
    const form = h(
      "form",
      {
        className: "card",
        "aria-labelledby": "edit-heading",
        onsubmit: async (event) => {
          event.preventDefault();
          errors.replaceChildren();
          try {
            await v4("PATCH", `${path}/${hostname.id}`, {
              description: description.input.value,
              dnslink: dnslink.input.value,
            });
            place.close();
            await reload();
            focusRow(hostname.name);
            status.textContent = `Saved ${hostname.name}`; // once the list shows it
          } catch (error) {
            errors.replaceChildren(errorBox(error));
            markInvalid(event.target, error);
          }
        },
      },
      h("h2", { id: "edit-heading" }, `Edit ${hostname.name}`),
      errors,
      description,
      dnslink,
      h(
        "div",
        { className: "buttons" },
        h("button", { type: "submit", className: "primary" }, "Save"),
        h("button", { type: "button", onclick: () => place.close() }, "Cancel"),
      ),
    );
    place.open(form);
    description.input.focus();
  }

  function focusRow(name) {
    const row = [...tableHolder.querySelectorAll("tr[data-hostname]")].find((item) => item.dataset.hostname === name);
    if (row) row.querySelector(".actions button").focus(); // its Edit button: where the edit started
  }

  function confirmDelete(hostname) {
    confirmDeletion(section, {
      name: hostname.name,
      consequence: "Its gateway stops answering at once.",
      remove: () => v4("DELETE", `${path}/${hostname.id}`),
      done: async () => {
        status.textContent = `Deleted ${hostname.name}`;
        await reload();
      },
    });
  }

  function showCreate() {
    status.textContent = "";
    const createErrors = h("div", { className: "errors" });
    const name = field({
      label: "Hostname",
      name: "name",
      required: true,
      autocomplete: "off",
      hint: `${zone.name} or a subdomain of it`,
    });
    const target = h("select", { id: "create-target", name: "target" }, TARGETS.map((t) => h("option", { value: t }, t)));
    const description = field({ label: "Description", name: "description", autocomplete: "off" });
    const createForm = h(
      "form",
      {
        className: "card",
        "aria-labelledby": "create-heading",
        onsubmit: async (event) => {
          event.preventDefault();
          createErrors.replaceChildren();
          try {
            const created = await v4("POST", path, {
              name: name.input.value,
              target: target.value,
              description: description.input.value,
            });
            place.close();
            await reload();
            status.textContent = `Created ${created.name}`; // once the list shows it
          } catch (error) {
            createErrors.replaceChildren(errorBox(error));
            markInvalid(event.target, error);
          }
        },
      },
      h("h2", { id: "create-heading" }, "Add a hostname"),
      createErrors,
      name,
      h("div", { className: "field" }, h("label", { for: "create-target" }, "Target"), target),
      description,
      h(
        "div",
        { className: "buttons" },
        h("button", { type: "submit", className: "primary" }, "Create hostname"),
        h("button", { type: "button", onclick: () => place.close() }, "Cancel"),
      ),
    );
    place.open(createForm);
    name.input.focus();
  }

  const networkSelect = h(
    "select",
    {
      id: "endpoint-network",
      onchange: async (event) => {
        network = event.target.value;
        await reload();
      },
    },
    networks.map((n) => h("option", { value: n, selected: n === network }, n)),
  );

  head.tools.append(
    h("div", { className: "field inline" }, h("label", { for: "endpoint-network" }, "Endpoint network"), networkSelect),
    h("button", { type: "button", className: "primary", onclick: () => showCreate() }, "Add a hostname"),
  );
  section.append(head, status, place.element, listErrors, tableHolder);
  await reload();
  return section;
}
