// The "Add Logpush job" flow (seed 001), also used to edit a job: 1. the dataset, 2. the fields and the filter,
// 3. the destination (with its ownership challenge when the API asks for one) and the name; Next between steps,
// Save at the end. The API judges everything: an error it answers sends the flow back to the step holding the
// member its source.pointer names, shown there inline.
import { v4 } from "./api.js";
import { h, errorBox, field, markInvalid } from "./dom.js";
import { filterBuilder } from "./filter_builder.js";

const STEPS = ["Dataset", "Fields and filter", "Destination"];
// The step holding each member a job's error may point at.
const STEP_OF_MEMBER = { dataset: 0, output_options: 1, logpull_options: 1, filter: 1 };

/** The job editor for `zone` (`job` null to add one). `onSaved(job)` runs after the API accepted it; `onCancel`
 * when the person gives up. `language` is GET /filter-language's answer. */
export function jobEditor({ zone, job, language, onSaved, onCancel }) {
  const base = `/zones/${zone.id}/logpush`;
  const creating = job === null;
  const title = creating ? "Add Logpush job" : `Edit Logpush job ${job.name || job.id}`;
  let step = 0;
  let builder = null;
  let chosenFields = job && job.output_options ? [...(job.output_options.field_names || [])] : [];
  let filter = job && job.filter ? job.filter : "";
  let fieldsOf = null; // the dataset the fields step was built for

  const errors = h("div", { className: "errors" });
  const stepHeading = h("h3", { tabindex: "-1", id: "job-step-heading" });
  const progress = h("ol", { className: "steps", "aria-label": "Steps" });

  const datasetSelect = h(
    "select",
    { id: "job-dataset", name: "dataset", disabled: !creating },
    Object.keys(language.datasets).map((name) =>
      h("option", { value: name, selected: job ? job.dataset === name : name === "http_requests" }, name),
    ),
  );
  const datasetStep = h(
    "div",
    { className: "step" },
    h("div", { className: "field" }, h("label", { for: "job-dataset" }, "Dataset"), datasetSelect),
    creating ? h("p", { className: "hint" }, "The records the job pushes. It cannot change once the job exists.") : null,
  );

  const fieldsHolder = h("div", {});
  const filterHolder = h("div", {});
  const fieldsStep = h("div", { className: "step" }, fieldsHolder, filterHolder);

  const name = field({ label: "Job name", name: "name", autocomplete: "off", value: job ? job.name || "" : "", hint: "Letters, digits, dots and dashes" });
  const destination = field({
    label: "Destination",
    name: "destination_conf",
    autocomplete: "off",
    required: true,
    value: job ? job.destination_conf : "",
    hint: "file:///dir, s3://bucket/prefix?region=us-east-1 or https://host/path; {DATE} becomes the batch's date",
  });
  const challenge = field({ label: "Ownership challenge", name: "ownership_challenge", autocomplete: "off", hint: "The token in the file edgeplane wrote to the destination" });
  const challengeOutcome = h("p", { className: "status", role: "status" });
  const ownership = h(
    "div",
    { className: "ownership", hidden: true },
    h("h4", {}, "Prove you own the destination"),
    h(
      "p",
      {},
      "edgeplane writes a file holding a token to this destination; the job is saved with the token you read there.",
    ),
    h(
      "button",
      {
        type: "button",
        onclick: async () => {
          errors.replaceChildren();
          try {
            const written = await v4("POST", `${base}/ownership`, { destination_conf: destination.input.value });
            challengeOutcome.textContent = `Wrote ${written.filename}: paste the token it holds.`;
            challenge.input.focus();
          } catch (error) {
            errors.replaceChildren(errorBox(error));
            markInvalid(form, error);
          }
        },
      },
      "Write the challenge file",
    ),
    challengeOutcome,
    challenge,
  );
  const destinationOutcome = h("p", { className: "status", role: "status" });
  const checkDestination = h(
    "button",
    {
      type: "button",
      onclick: async () => {
        errors.replaceChildren();
        destinationOutcome.textContent = "";
        try {
          const checked = await v4("POST", `${base}/validate/destination`, { destination_conf: destination.input.value });
          destinationOutcome.textContent = checked.valid ? "The destination is allowed." : `Not allowed: ${checked.message}`;
          if (checked.valid) destination.input.removeAttribute("aria-invalid");
          else destination.input.setAttribute("aria-invalid", "true");
        } catch (error) {
          errors.replaceChildren(errorBox(error));
          markInvalid(form, error);
        }
      },
    },
    "Check destination",
  );
  const enabled = h("input", { type: "checkbox", id: "job-enabled", name: "enabled", checked: job ? job.enabled : true });
  const destinationStep = h(
    "div",
    { className: "step" },
    name,
    destination,
    h("div", { className: "buttons check" }, checkDestination),
    destinationOutcome,
    ownership,
    h("div", { className: "field inline" }, enabled, h("label", { for: "job-enabled" }, "Push records now (enabled)")),
  );

  const steps = [datasetStep, fieldsStep, destinationStep];
  const back = h("button", { type: "button", onclick: () => show(step - 1) }, "Back");
  const next = h("button", { type: "submit", className: "primary" }, "Next");
  const form = h(
    "form",
    {
      className: "card job-editor",
      "aria-labelledby": "job-editor-heading",
      novalidate: true,
      onsubmit: async (event) => {
        event.preventDefault();
        if (step < steps.length - 1) await show(step + 1);
        else await save();
      },
    },
    h("h2", { id: "job-editor-heading" }, title),
    progress,
    stepHeading,
    errors,
    ...steps,
    h(
      "div",
      { className: "buttons" },
      back,
      next,
      h("button", { type: "button", onclick: onCancel }, "Cancel"),
    ),
  );

  // A control the API pointed at is no longer marked once the person changes it.
  form.addEventListener("input", (event) => {
    if (event.target.getAttribute("aria-invalid") === "true" && event.target.name !== "filter") {
      event.target.removeAttribute("aria-invalid");
    }
  });

  async function buildFieldsStep() {
    const dataset = datasetSelect.value;
    if (fieldsOf === dataset) return;
    const descriptions = await v4("GET", `${base}/datasets/${dataset}/fields`);
    const names = Object.keys(descriptions);
    if (fieldsOf !== null) chosenFields = [];
    fieldsOf = dataset;
    const boxes = names.map((fieldName) => {
      const id = `job-field-${fieldName}`;
      return h(
        "li",
        {},
        h("input", {
          type: "checkbox",
          id,
          name: "field_names",
          value: fieldName,
          checked: chosenFields.includes(fieldName),
          "aria-describedby": `${id}-description`,
        }),
        h("label", { for: id }, fieldName),
        h("span", { className: "hint", id: `${id}-description` }, descriptions[fieldName]),
      );
    });
    fieldsHolder.replaceChildren(
      h(
        "fieldset",
        { className: "job-fields" },
        h("legend", {}, "Select data fields"),
        h("p", { className: "hint" }, "None chosen: every field of the dataset, in its order."),
        h("ul", { className: "field-list" }, boxes),
      ),
    );
    if (builder !== null) filter = builder.text();
    builder = filterBuilder({ language, dataset, fieldNames: names, text: filter });
    filterHolder.replaceChildren(builder.element);
  }

  async function show(index, { focus = true } = {}) {
    errors.replaceChildren();
    if (index === 1) {
      try {
        await buildFieldsStep();
      } catch (error) {
        errors.replaceChildren(errorBox(error));
        return;
      }
    }
    step = index;
    steps.forEach((element, position) => {
      element.hidden = position !== step;
    });
    progress.replaceChildren(
      ...STEPS.map((label, position) =>
        h("li", { "aria-current": position === step ? "step" : undefined }, `${position + 1}. ${label}`),
      ),
    );
    stepHeading.textContent = `Step ${step + 1} of ${STEPS.length}: ${STEPS[step]}`;
    back.hidden = step === 0;
    next.textContent = step === steps.length - 1 ? "Save" : "Next";
    if (focus) stepHeading.focus();
  }

  function body() {
    const fieldNames = [...fieldsHolder.querySelectorAll('input[name="field_names"]:checked')].map((box) => box.value);
    const text = builder.text();
    const sent = {
      name: name.input.value,
      destination_conf: destination.input.value,
      enabled: enabled.checked,
      filter: text.trim() === "" ? null : text,
      output_options: { ...(job && job.output_options ? job.output_options : {}), field_names: fieldNames },
    };
    if (creating) sent.dataset = datasetSelect.value;
    if (challenge.input.value.trim() !== "") sent.ownership_challenge = challenge.input.value.trim();
    return sent;
  }

  async function save() {
    errors.replaceChildren();
    builder.clearErrors();
    markInvalid(form, null);
    try {
      const saved = creating
        ? await v4("POST", `${base}/jobs`, body())
        : await v4("PUT", `${base}/jobs/${job.id}`, body());
      await onSaved(saved);
    } catch (error) {
      const pointers = (error.errors || []).map((item) => (item.source && item.source.pointer ? item.source.pointer.split("/")[1] : null));
      const target = pointers.map((member) => STEP_OF_MEMBER[member]).find((index) => index !== undefined);
      if (pointers.includes("ownership_challenge")) ownership.hidden = false;
      if (target !== undefined && target !== step) await show(target, { focus: false });
      errors.replaceChildren(errorBox(error));
      markInvalid(form, error);
      if (pointers.includes("filter")) builder.showErrors(error);
      const invalid = form.querySelector('[aria-invalid="true"]');
      if (invalid && !invalid.closest("[hidden]")) invalid.focus();
      else stepHeading.focus();
    }
  }

  return { element: form, start: () => show(0) };
}
