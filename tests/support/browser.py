"""A real browser for the dashboard's tests: Debian's ``chromium``, headless, driven by Playwright for Python.

Playwright's own browser download is not used (nor reachable here): the system browser's executable is launched.
Without it (or without Playwright) the browser tests are skipped with the reason, which ``tests/conftest.py`` turns
into a failure. Screenshots go to ``EDGEPLANE_SCREENSHOTS`` when it is set (``docs/dashboard/`` to refresh the
documentation's), else to the test session's temporary directory: ``<name>.png`` at 1280x800 and ``<name>-phone.png``
at phone width.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

DESKTOP = {"width": 1280, "height": 800}
PHONE = {"width": 390, "height": 844}
_CANDIDATES = ("chromium", "chromium-browser")


def system_chromium() -> str | None:
    """The system browser's executable (``EDGEPLANE_CHROMIUM`` when set), or None."""
    configured = os.environ.get("EDGEPLANE_CHROMIUM")
    if configured:
        return configured if Path(configured).is_file() else None
    for name in _CANDIDATES:
        found = shutil.which(name)
        if found:
            return found
    return None


@pytest.fixture(scope="session")
def browser() -> Iterator[Any]:
    """Headless chromium, launched once for the session; skips (a failure) when Playwright or the browser is missing."""
    sync_api = pytest.importorskip("playwright.sync_api", reason="Playwright for Python is not installed")
    executable = system_chromium()
    if executable is None:
        pytest.skip("the chromium package is not installed (scripts/bootstrap dev installs it as root)")
    with sync_api.sync_playwright() as playwright:
        launched = playwright.chromium.launch(executable_path=executable, headless=True)
        try:
            yield launched
        finally:
            launched.close()


@pytest.fixture(scope="session")
def screenshot_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Where the pages' screenshots are saved (the test artifact)."""
    configured = os.environ.get("EDGEPLANE_SCREENSHOTS")
    directory = Path(configured) if configured else tmp_path_factory.mktemp("screenshots")
    directory.mkdir(parents=True, exist_ok=True)
    return directory


class Screenshots:
    """Saves a page as ``<name>.png`` at 1280x800, and ``<name>-phone.png`` at phone width, then restores the size."""

    def __init__(self, directory: Path) -> None:
        self.directory = directory

    def __call__(self, page: Any, name: str, *, phone: bool = True, full_page: bool = True) -> None:
        page.set_viewport_size(DESKTOP)
        page.screenshot(path=str(self.directory / f"{name}.png"), full_page=full_page, animations="disabled")
        if phone:
            page.set_viewport_size(PHONE)
            page.screenshot(path=str(self.directory / f"{name}-phone.png"), full_page=True, animations="disabled")
            page.set_viewport_size(DESKTOP)


@pytest.fixture(scope="session")
def screenshots(screenshot_dir: Path) -> Screenshots:
    return Screenshots(screenshot_dir)
