// The time-range picker shared by Analytics and Security → Events: the last 30 minutes, 6 hours, 24 hours or 7 days,
// as the since and until query parameters of the read endpoints.
import { h } from "./dom.js";

export const RANGES = [
  { id: "30m", label: "Last 30 minutes", seconds: 30 * 60 },
  { id: "6h", label: "Last 6 hours", seconds: 6 * 3600 },
  { id: "24h", label: "Last 24 hours", seconds: 24 * 3600 },
  { id: "7d", label: "Last 7 days", seconds: 7 * 86400 },
];

/** `since=...&until=...` for the range `id`, ending now. */
export function rangeQuery(id) {
  const range = RANGES.find((item) => item.id === id) || RANGES[2];
  const until = new Date();
  const since = new Date(until.getTime() - range.seconds * 1000);
  const text = (date) => date.toISOString().replace(/\.\d{3}Z$/, "Z");
  return `since=${encodeURIComponent(text(since))}&until=${encodeURIComponent(text(until))}`;
}

/** A labelled select of the ranges, its label beside it; calls `onchange(id)` when another is chosen. */
export function rangePicker(chosen, onchange) {
  const select = h(
    "select",
    { id: "time-range", onchange: () => onchange(select.value) },
    RANGES.map((range) => h("option", { value: range.id, selected: range.id === chosen }, range.label)),
  );
  return h("div", { className: "field inline range-picker" }, h("label", { for: "time-range" }, "Time range"), select);
}
