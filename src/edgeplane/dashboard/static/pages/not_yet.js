// A page the dashboard does not have yet: says so, and where the API already does it.
import { h } from "../dom.js";

/** A placeholder page titled `title`, naming the v4 endpoints that serve it meanwhile. */
export function notYetPage(title, apiHint) {
  return async () =>
    h(
      "section",
      { className: "not-yet" },
      h("h1", { tabindex: "-1" }, title),
      h("p", {}, "Not yet: this page comes in a later version of the dashboard."),
      h("p", {}, "Meanwhile the v4 API does it: ", h("code", {}, apiHint), "."),
    );
}
