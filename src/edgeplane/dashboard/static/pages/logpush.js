// Logs → Logpush: the zone's jobs (GET /zones/{zone}/logpush/jobs) with their state, enable/disable and delete, and
// the "Add Logpush job" flow (logpush_job_editor.js) that also edits a job, opened in place of the list. The API's
// errors are shown inline.
import { request, v4 } from "../api.js";
import { h, confirmDeletion, errorBox, pageHead } from "../dom.js";
import { formPlace } from "../in_place_form.js";
import { jobEditor } from "../logpush_job_editor.js";

let language = null;

/** What the filter builder knows of the filter language (GET /filter-language), read once per page load. */
async function filterLanguage() {
  if (language === null) language = (await request("GET", "/filter-language")).result;
  return language;
}

function jobLabel(job) {
  return job.name ? `${job.name} (job ${job.id})` : `job ${job.id}`;
}

function jobState(job) {
  const lines = [h("strong", {}, job.enabled ? "Enabled" : "Disabled")];
  if (job.last_complete) lines.push(h("span", {}, `Last pushed ${job.last_complete}`));
  if (job.last_error) lines.push(h("span", { className: "job-error" }, `Last error ${job.last_error}`));
  if (job.error_message) lines.push(h("span", { className: "job-error" }, job.error_message));
  if (!job.last_complete && !job.last_error) lines.push(h("span", { className: "hint" }, "Nothing pushed yet"));
  return h("div", { className: "job-state" }, lines);
}

/** The Logpush page of `context.zone`. */
export async function logpushPage(context) {
  const { zone } = context;
  const section = h("section", { className: "logpush" });
  if (!zone) {
    section.append(h("h1", { tabindex: "-1" }, "Logpush"), h("p", {}, "No zone: pick or create a zone first."));
    return section;
  }
  const path = `/zones/${zone.id}/logpush/jobs`;
  const listErrors = h("div", { className: "errors" });
  const tableHolder = h("div", { className: "table-holder" });
  const status = h("p", { className: "status", role: "status" });
  const addButton = h("button", { type: "button", className: "primary", onclick: () => openEditor(null) }, "Add Logpush job");
  const head = pageHead(
    h("h1", { tabindex: "-1" }, "Logpush"),
    `Jobs that push the logs of ${zone.name} to a destination, filtered or whole.`,
    addButton,
  );
  const place = formPlace(head.tools, listErrors, tableHolder);

  async function reload() {
    listErrors.replaceChildren();
    try {
      tableHolder.replaceChildren(jobTable(await v4("GET", path)));
    } catch (error) {
      listErrors.replaceChildren(errorBox(error));
    }
  }

  function jobTable(jobs) {
    if (jobs.length === 0) return h("p", {}, `No Logpush jobs in ${zone.name} yet.`);
    return h(
      "table",
      { className: "jobs" },
      h("caption", {}, `Logpush jobs of ${zone.name}`),
      h(
        "thead",
        {},
        h("tr", {}, ["Job", "Dataset", "Destination", "State", "Actions"].map((title) => h("th", { scope: "col" }, title))),
      ),
      h("tbody", {}, jobs.map(jobRow)),
    );
  }

  function jobRow(job) {
    const label = jobLabel(job);
    const rowErrors = h("div", { className: "errors" });
    return h(
      "tr",
      { "data-job": job.id },
      h("th", { scope: "row", "data-title": "Job" }, label, job.filter ? h("span", { className: "hint filtered" }, "filtered") : null),
      h("td", { "data-title": "Dataset" }, job.dataset),
      h("td", { "data-title": "Destination" }, h("code", { className: "destination" }, job.destination_conf)),
      h("td", { "data-title": "State" }, jobState(job)),
      h(
        "td",
        { "data-title": "Actions", className: "actions" },
        rowErrors,
        h(
          "button",
          {
            type: "button",
            "aria-label": `${job.enabled ? "Disable" : "Enable"} ${label}`,
            onclick: async () => {
              rowErrors.replaceChildren();
              try {
                await v4("PUT", `${path}/${job.id}`, { enabled: !job.enabled });
                status.textContent = `${job.enabled ? "Disabled" : "Enabled"} ${label}`;
                await reload();
                const again = tableHolder.querySelector(`tr[data-job="${job.id}"] button`);
                if (again) again.focus();
              } catch (error) {
                rowErrors.replaceChildren(errorBox(error));
              }
            },
          },
          job.enabled ? "Disable" : "Enable",
        ),
        h("button", { type: "button", "aria-label": `Edit ${label}`, onclick: () => openEditor(job) }, "Edit"),
        h(
          "button",
          { type: "button", className: "danger", "aria-label": `Delete ${label}`, onclick: () => confirmDelete(job) },
          "Delete",
        ),
      ),
    );
  }

  async function openEditor(job) {
    status.textContent = ""; // the last outcome is not this edit's
    let editor;
    try {
      editor = jobEditor({
        zone,
        job,
        language: await filterLanguage(),
        onSaved: async (saved) => {
          place.close();
          await reload();
          addButton.focus();
          status.textContent = `Saved ${jobLabel(saved)}`; // once the list shows it
        },
        onCancel: () => place.close(),
      });
    } catch (error) {
      listErrors.replaceChildren(errorBox(error));
      return;
    }
    place.open(editor.element);
    await editor.start();
  }

  function confirmDelete(job) {
    const label = jobLabel(job);
    confirmDeletion(section, {
      name: label,
      consequence: "It stops pushing at once.",
      remove: () => v4("DELETE", `${path}/${job.id}`),
      done: async () => {
        status.textContent = `Deleted ${label}`;
        await reload();
      },
    });
  }

  section.append(head, status, place.element, listErrors, tableHolder);
  await reload();
  return section;
}
