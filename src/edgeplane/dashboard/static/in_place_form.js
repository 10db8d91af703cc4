// Forms open in place of what they edit: while a form is open, the list it belongs to and the controls that open
// forms are hidden, and the form stands where they were, at the top of the page's content. A form never pushes the
// page's main thing below the first screen, nor opens far from where it was asked for. Closing it puts the list back
// and the focus on the control that opened it, when that control is still there (a page that reloads its list
// focuses the new one itself).
import { h } from "./dom.js";

/** The place of a page's forms over the elements `covered` (hidden while a form is open). `element` goes where the
 * form is to appear; `open(form)` shows one, `close()` removes it. */
export function formPlace(...covered) {
  const element = h("div", { className: "form-place" });
  let opener = null;
  return {
    element,
    open(form) {
      if (!element.firstChild) opener = document.activeElement;
      for (const item of covered) item.hidden = true;
      element.replaceChildren(form);
    },
    close() {
      element.replaceChildren();
      for (const item of covered) item.hidden = false;
      if (opener && opener.isConnected) opener.focus();
      opener = null;
    },
  };
}
