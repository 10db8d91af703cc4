// Charts drawn as SVG, with no library: a line chart of series over time buckets and a bar chart of totals. Every
// chart is a figure with a caption, a text summary on the SVG (role="img"), and a "Show table" toggle that reveals
// the same numbers as a table, for screen readers and for whoever would rather read them. A line chart is drawn
// "wide" (the page's main chart, across the width and not tall) or to sit in a grid of charts; the drawing scales
// with its box, so each size has the proportions it is shown at and its text stays readable.
import { h } from "./dom.js";

const SVG = "http://www.w3.org/2000/svg";
// Colours told apart by people with the common colour-vision deficiencies (Okabe and Ito's palette), then grey.
const COLOURS = ["#0072b2", "#e69f00", "#009e73", "#cc79a7", "#56b4e9", "#d55e00", "#f0e442", "#000000", "#999999"];
const SIZES = { wide: { width: 960, height: 180 }, grid: { width: 480, height: 200 } };
const WIDE_FROM = 560;
const MARGIN = { top: 10, right: 12, bottom: 28, left: 48 };

let chartIds = 0;

function svg(tag, attributes = {}, ...children) {
  const element = document.createElementNS(SVG, tag);
  for (const [name, value] of Object.entries(attributes)) element.setAttribute(name, String(value));
  for (const child of children) element.append(child instanceof Node ? child : document.createTextNode(String(child)));
  return element;
}

/** A short label of a bucket's start (an RFC 3339 time): the time of day, with the date when the range spans days. */
export function bucketLabel(start, withDate) {
  const date = new Date(start);
  const time = date.toISOString().slice(11, 16);
  return withDate ? `${date.toISOString().slice(5, 10)} ${time}` : time;
}

function niceMax(value) {
  if (value <= 0) return 1;
  const power = 10 ** Math.floor(Math.log10(value));
  for (const step of [1, 2, 2.5, 5, 10]) if (step * power >= value) return step * power;
  return 10 * power;
}

function tableToggle(id, table) {
  const holder = h("div", { id, className: "chart-table", hidden: true }, table);
  const button = h(
    "button",
    {
      type: "button",
      className: "table-toggle",
      "aria-expanded": "false",
      "aria-controls": id,
      onclick: () => {
        const showing = holder.hidden;
        holder.hidden = !showing;
        button.setAttribute("aria-expanded", String(showing));
        button.textContent = showing ? "Hide table" : "Show table";
      },
    },
    "Show table",
  );
  return [button, holder];
}

// The page's Content-Security-Policy refuses style attributes in markup; properties set through the DOM are allowed.
function styled(element, properties) {
  Object.assign(element.style, properties);
  return element;
}

function legend(series) {
  return h(
    "ul",
    { className: "legend" },
    series.map((item, index) =>
      h(
        "li",
        {},
        styled(h("span", { className: "swatch", "aria-hidden": "true" }), { background: COLOURS[index % COLOURS.length] }),
        `${item.key} (${item.total ?? ""})`.replace(" ()", ""),
      ),
    ),
  );
}

/** Under a chart: its legend (when it has one) and its table's toggle, side by side. */
function chartFoot(...parts) {
  return h("div", { className: "chart-foot" }, parts);
}

/** The SVG of a line chart at `size` (one of SIZES): its grid, its axes' labels, a path per series. */
function lineDrawing({ buckets, series, top, size, described, withDate }) {
  const { width, height } = SIZES[size];
  const plotWidth = width - MARGIN.left - MARGIN.right;
  const plotHeight = height - MARGIN.top - MARGIN.bottom;
  const x = (index) => MARGIN.left + (buckets.length <= 1 ? 0 : (index * plotWidth) / (buckets.length - 1));
  const y = (value) => MARGIN.top + plotHeight - (value / top) * plotHeight;
  const drawing = svg(
    "svg",
    { viewBox: `0 0 ${width} ${height}`, role: "img", "aria-label": described, class: `chart chart-${size}` },
  );
  for (const fraction of [0, 0.5, 1]) {
    const value = top * fraction;
    drawing.append(
      svg("line", { x1: MARGIN.left, x2: width - MARGIN.right, y1: y(value), y2: y(value), class: "grid" }),
      svg("text", { x: MARGIN.left - 6, y: y(value) + 4, "text-anchor": "end", class: "axis" }, Number(value.toFixed(2))),
    );
  }
  const ticks = Math.min(size === "wide" ? 9 : 6, buckets.length);
  for (let tick = 0; tick < ticks; tick += 1) {
    const index = Math.round((tick * (buckets.length - 1)) / Math.max(1, ticks - 1));
    drawing.append(
      svg(
        "text",
        { x: x(index), y: height - 8, "text-anchor": tick === 0 ? "start" : tick === ticks - 1 ? "end" : "middle", class: "axis" },
        bucketLabel(buckets[index], withDate),
      ),
    );
  }
  series.forEach((item, index) => {
    let path = "";
    let pen = "M";
    item.counts.forEach((value, bucket) => {
      if (value === null) {
        pen = "M";
        return;
      }
      path += `${pen}${x(bucket).toFixed(1)},${y(value).toFixed(1)} `;
      pen = "L";
    });
    const colour = COLOURS[index % COLOURS.length];
    if (path) drawing.append(svg("path", { d: path, fill: "none", stroke: colour, "stroke-width": 2 }));
    // A value with no neighbour draws no line: a dot shows it.
    item.counts.forEach((value, bucket) => {
      const alone = (item.counts[bucket - 1] ?? null) === null && (item.counts[bucket + 1] ?? null) === null;
      if (value !== null && alone) drawing.append(svg("circle", { cx: x(bucket), cy: y(value), r: 3, fill: colour }));
    });
  });
  return drawing;
}

/**
 * A line chart: `series` [{key, counts, total?}] over `buckets` (RFC 3339 starts); `unit` names the values ("requests",
 * "ms"). A null value is a gap. The summary says, per series, its total or its peak. `size` is "grid" (a chart among
 * others) or "wide" (the page's main chart, drawn as a grid chart while its box is narrower than WIDE_FROM pixels:
 * a phone's width).
 */
export function lineChart({ title, buckets, series, unit = "requests", summary, size = "grid" }) {
  chartIds += 1;
  const id = `chart-${chartIds}`;
  const withDate = buckets.length > 1 && Date.parse(buckets[buckets.length - 1]) - Date.parse(buckets[0]) > 86_400_000;
  const values = series.flatMap((item) => item.counts.filter((value) => value !== null));
  const top = niceMax(Math.max(0, ...values));
  const described =
    summary ||
    (series.length === 0
      ? `${title}: nothing in this range.`
      : `${title}: ${series.map((item) => `${item.key} ${item.total ?? Math.max(0, ...item.counts.filter((v) => v !== null))} ${unit}`).join(", ")}.`);
  const draw = (drawnAt) => lineDrawing({ buckets, series, top, size: drawnAt, described, withDate });
  let drawnAt = size;
  let drawing = draw(size);
  const table = h(
    "table",
    { className: "chart-data" },
    h("caption", {}, `${title} (${unit})`),
    h("thead", {}, h("tr", {}, h("th", { scope: "col" }, "From"), series.map((item) => h("th", { scope: "col" }, item.key)))),
    h(
      "tbody",
      {},
      buckets.map((start, bucket) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, bucketLabel(start, withDate)),
          series.map((item) => h("td", {}, item.counts[bucket] === null ? "–" : String(item.counts[bucket]))),
        ),
      ),
    ),
  );
  const [toggle, holder] = tableToggle(`${id}-table`, table);
  const figure = h(
    "figure",
    { className: `chart-figure card chart-figure-${size}` },
    h("figcaption", {}, h("h2", {}, title)),
    series.length === 0 ? h("p", { className: "hint" }, "Nothing in this range.") : drawing,
    chartFoot(series.length === 0 ? null : legend(series), toggle),
    holder,
  );
  if (size === "wide" && series.length > 0) {
    new ResizeObserver(([entry]) => {
      const fits = entry.contentRect.width < WIDE_FROM ? "grid" : "wide";
      if (fits === drawnAt) return;
      drawnAt = fits;
      const redrawn = draw(fits);
      drawing.replaceWith(redrawn);
      drawing = redrawn;
    }).observe(figure);
  }
  return figure;
}

/**
 * A horizontal bar chart of `items` [{label, value, detail?}], largest first as given. With `select(item)`, the
 * label of each item `selectable(item)` allows is a button that calls it (`selectLabel(item)` its accessible name):
 * the list is then a list of those buttons, named by the chart's summary, rather than one image.
 */
export function barChart({ title, items, unit = "requests", select, selectable = () => true, selectLabel }) {
  chartIds += 1;
  const id = `chart-${chartIds}`;
  const top = Math.max(1, ...items.map((item) => item.value));
  const summary =
    items.length === 0 ? `${title}: nothing in this range.` : `${title}: ${items.map((item) => `${item.label} ${item.value} ${unit}`).join(", ")}.`;
  const label = (item) =>
    select && selectable(item)
      ? h("button", { type: "button", className: "bar-label link-button", "aria-label": selectLabel ? selectLabel(item) : undefined, onclick: () => select(item) }, item.label)
      : h("span", { className: "bar-label" }, item.label);
  const bars = h(
    "ol",
    select ? { className: "bars", "aria-label": summary } : { className: "bars", role: "img", "aria-label": summary },
    items.map((item) =>
      h(
        "li",
        select ? {} : { "aria-hidden": "true" },
        label(item),
        h(
          "span",
          { className: "bar-track", "aria-hidden": "true" },
          styled(h("span", { className: "bar" }), { width: `${((100 * item.value) / top).toFixed(1)}%` }),
        ),
        h("span", { className: "bar-value" }, String(item.value), select ? h("span", { className: "visually-hidden" }, ` ${unit}`) : null),
      ),
    ),
  );
  const detailColumns = items.length && items[0].detail ? Object.keys(items[0].detail) : [];
  const table = h(
    "table",
    { className: "chart-data" },
    h("caption", {}, `${title} (${unit})`),
    h(
      "thead",
      {},
      h("tr", {}, h("th", { scope: "col" }, "Name"), h("th", { scope: "col" }, unit), detailColumns.map((name) => h("th", { scope: "col" }, name))),
    ),
    h(
      "tbody",
      {},
      items.map((item) =>
        h(
          "tr",
          {},
          h("th", { scope: "row" }, item.label),
          h("td", {}, String(item.value)),
          detailColumns.map((name) => h("td", {}, item.detail[name] === null ? "–" : String(item.detail[name]))),
        ),
      ),
    ),
  );
  const [toggle, holder] = tableToggle(`${id}-table`, table);
  return h(
    "figure",
    { className: "chart-figure card" },
    h("figcaption", {}, h("h2", {}, title)),
    items.length === 0 ? h("p", { className: "hint" }, "Nothing in this range.") : bars,
    chartFoot(toggle),
    holder,
  );
}
