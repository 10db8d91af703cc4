"""What a person sees first: whether an element is inside the window before any scrolling, how many lines a bar
takes, and whether anything runs off a phone's width. Measured in the browser (bounding boxes, computed styles), so
the assertions hold for what is drawn, whatever the markup."""

from __future__ import annotations

from typing import Any

# Every element drawn wider than the page, but those inside a box that clips or scrolls it (a chart's table, an SVG):
# those stay within their box, which is itself checked.
_OFF_THE_WIDTH = """() => {
    const width = document.documentElement.clientWidth;
    const insideAClip = (element) => {
        for (let parent = element.parentElement; parent && parent !== document.body; parent = parent.parentElement) {
            if (getComputedStyle(parent).overflowX !== "visible") return true;
        }
        return false;
    };
    const off = [];
    for (const element of document.body.querySelectorAll("*")) {
        const box = element.getBoundingClientRect();
        if (box.width === 0 || box.height === 0 || box.right <= width + 0.5 || insideAClip(element)) continue;
        off.push(`${element.tagName.toLowerCase()}.${element.className} ends at ${Math.round(box.right)}`);
    }
    return { width, scrollWidth: document.documentElement.scrollWidth, off: off.slice(0, 8) };
}"""

# The lines a bar's controls sit on: their boxes grouped by the line they share.
_LINES = """(bar) => {
    const boxes = [...bar.querySelectorAll("select, input, button, .chip, label")]
        .map((element) => element.getBoundingClientRect())
        .filter((box) => box.width > 1 && box.height > 1)
        .sort((a, b) => a.top - b.top);
    let lines = 0;
    let bottom = -Infinity;
    for (const box of boxes) {
        if (box.top >= bottom - 4) {
            lines += 1;
            bottom = box.bottom;
        } else {
            bottom = Math.max(bottom, box.bottom);
        }
    }
    return lines;
}"""


def at_the_top(page: Any) -> None:
    """Scrolls the window back to where a page opens."""
    page.evaluate("window.scrollTo(0, 0)")
    assert page.evaluate("window.scrollY") == 0


def assert_in_first_screen(page: Any, locator: Any, what: str) -> dict[str, float]:
    """``locator`` is drawn wholly inside the window with the page scrolled to its top; returns its box."""
    at_the_top(page)
    box = locator.bounding_box()
    assert box is not None, f"{what} is not drawn"
    viewport = page.viewport_size
    inside = (
        box["y"] >= 0
        and box["y"] + box["height"] <= viewport["height"]
        and box["x"] >= 0
        and box["x"] + box["width"] <= viewport["width"]
    )
    assert inside, f"{what} is not in the first screen ({viewport['width']}x{viewport['height']}): {box}"
    return dict(box)


def assert_starts_in_first_screen(page: Any, locator: Any, what: str, *, visible_px: float = 60) -> None:
    """``locator`` begins inside the window, with at least ``visible_px`` of it shown (a card taller than what is left
    of the screen), the page scrolled to its top."""
    at_the_top(page)
    box = locator.bounding_box()
    assert box is not None, f"{what} is not drawn"
    height = page.viewport_size["height"]
    assert 0 <= box["y"] <= height - min(visible_px, box["height"]), f"{what} does not start in the first screen: {box}"


def lines_of(locator: Any) -> int:
    """How many lines the controls of ``locator`` (a toolbar, a filter bar) take as drawn."""
    return int(locator.evaluate(_LINES))


def assert_nothing_runs_off_the_width(page: Any) -> None:
    """Neither the page nor any element on it is wider than the window (a scroll box's content may be)."""
    measured = page.evaluate(_OFF_THE_WIDTH)
    assert measured["scrollWidth"] <= measured["width"], measured
    assert measured["off"] == [], measured
