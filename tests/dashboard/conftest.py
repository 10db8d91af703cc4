"""The dashboard in a real browser against a real ``edgeplane serve`` the suite starts (``tests.support.browser``)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.support.browser import DESKTOP, Screenshots, browser, screenshot_dir, screenshots
from tests.support.edgeplane import EdgeplaneProcess

__all__ = ["Screenshots", "browser", "screenshot_dir", "screenshots"]


@pytest.fixture(scope="session")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    """One edgeplane for the browser tests (its mainnet upstream is never asked: no test sends JSON-RPC)."""
    data_dir = tmp_path_factory.mktemp("dashboard") / "data"
    with EdgeplaneProcess(data_dir, upstreams=("mainnet=http://127.0.0.1:9",)) as process:
        yield process


@pytest.fixture
def page(browser: Any, service: EdgeplaneProcess) -> Iterator[Any]:
    """A fresh browser context (no cookies) on the dashboard's sign-in page."""
    context = browser.new_context(viewport=DESKTOP, base_url=service.api_url)
    opened = context.new_page()
    opened.set_default_timeout(15_000)
    opened.goto("/")
    try:
        yield opened
    finally:
        context.close()


def sign_in_with_password(page: Any, service: EdgeplaneProcess) -> None:
    """Signs in as the admin user with the password of ``credentials.json``; waits for the first page."""
    credentials = service.credentials
    page.get_by_label("Email", exact=True).fill(credentials["email"])
    page.get_by_label("Password", exact=True).fill(credentials["password"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()
