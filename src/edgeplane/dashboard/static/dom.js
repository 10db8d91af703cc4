// Building markup without innerHTML: text from the API is always set as text, never parsed as HTML.

/** An element: h("button", {type: "submit", onclick}, "Save"). Attributes starting with "on" are listeners. */
export function h(tag, attributes = {}, ...children) {
  const element = document.createElement(tag);
  for (const [name, value] of Object.entries(attributes)) {
    if (value === undefined || value === null || value === false) continue;
    if (name.startsWith("on")) element.addEventListener(name.slice(2), value);
    else if (name === "className") element.className = value;
    else element.setAttribute(name, value === true ? "" : String(value));
  }
  for (const child of children.flat()) {
    if (child === undefined || child === null || child === false) continue;
    element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return element;
}

/** An inline error region for an ApiFailure or any error: one line per API error, announced to screen readers. */
export function errorBox(error) {
  const errors = error && error.errors ? error.errors : [{ message: String(error && error.message ? error.message : error) }];
  return h(
    "div",
    { className: "error", role: "alert" },
    h(
      "ul",
      {},
      errors.map((item) =>
        h("li", {}, item.code ? `${item.message} (code ${item.code})` : item.message),
      ),
    ),
  );
}

let fieldIds = 0;

/** A labelled input: {label, name, ...input attributes, hint}. Returns the wrapper; the input is .input. */
export function field({ label, hint, ...attributes }) {
  fieldIds += 1;
  const id = `field-${fieldIds}`;
  const hintId = hint ? `${id}-hint` : undefined;
  const input = h("input", { id, "aria-describedby": hintId, ...attributes });
  const wrapper = h(
    "div",
    { className: "field" },
    h("label", { for: id }, label),
    input,
    hint ? h("p", { className: "hint", id: hintId }, hint) : null,
  );
  wrapper.input = input;
  return wrapper;
}

/** Marks the controls of `form` that the API's errors point at (`source.pointer` "/name" → the control named
 * "name") with aria-invalid, and clears the mark from the others; `error` null clears them all. */
export function markInvalid(form, error) {
  const pointed = new Set(
    (error && error.errors ? error.errors : [])
      .map((item) => (item.source && item.source.pointer ? item.source.pointer.split("/")[1] : null))
      .filter(Boolean),
  );
  for (const control of form.querySelectorAll("input, select, textarea")) {
    if (pointed.has(control.name)) control.setAttribute("aria-invalid", "true");
    else control.removeAttribute("aria-invalid");
  }
}

/** Asks, in a modal dialog appended to `container`, whether to delete `name` (`consequence`: what deleting does);
 * Delete runs `remove()` (the API call): on success the dialog closes and `done()` runs, on an error the error is
 * shown in the dialog. Cancel is focused first, so Enter never deletes by accident. */
export function confirmDeletion(container, { name, consequence, remove, done }) {
  const errors = h("div", { className: "errors" });
  const dialog = h(
    "dialog",
    { "aria-labelledby": "delete-heading", onclose: () => dialog.remove() },
    h("h2", { id: "delete-heading" }, `Delete ${name}?`),
    h("p", {}, consequence),
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
              await remove();
              dialog.close();
              await done();
            } catch (error) {
              errors.replaceChildren(errorBox(error));
            }
          },
        },
        "Delete",
      ),
      h("button", { type: "button", autofocus: true, onclick: () => dialog.close() }, "Cancel"),
    ),
  );
  container.append(dialog);
  dialog.showModal();
}

/** A page's or a tab's head, on as few lines as the width allows: `title` (an h1, or null in a tab) over its
 * `description` on the left, the page's tools (the time range, "Add ...") on the right, wrapping under them on a
 * narrow screen. The tools are `.tools`, for a page that hides them while a form is open. */
export function pageHead(title, description, ...tools) {
  const toolbar = h("div", { className: "page-tools" }, tools);
  const head = h(
    "div",
    { className: "page-head" },
    h("div", { className: "page-title" }, title, description ? h("p", { className: "hint page-description" }, description) : null),
    toolbar,
  );
  head.tools = toolbar;
  return head;
}

/** A filter applied, as a chip: its text (cut with an ellipsis when long; the whole text stays its name) and a
 * button "×" named "Remove the filter <text>" that calls `onremove()`. */
export function chip(text, onremove) {
  return h(
    "span",
    { className: "chip" },
    h("span", { className: "chip-text", title: text }, text),
    h("button", { type: "button", "aria-label": `Remove the filter ${text}`, onclick: onremove }, "×"),
  );
}
