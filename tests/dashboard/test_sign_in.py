"""Signing in to the dashboard in a real browser: the password of ``credentials.json``, a wrong one, an API token,
signing out; and the session cookie refused on a write without its CSRF token."""

from __future__ import annotations

import json
from typing import Any

import pytest

from tests.dashboard.conftest import sign_in_with_password
from tests.support.browser import Screenshots
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def fetch(page: Any, method: str, path: str, headers: dict[str, str] | None = None, body: Any = None) -> Any:
    """``fetch`` from inside the page (its cookies go along): ``{status, body}``."""
    return page.evaluate(
        """async ([method, path, headers, body]) => {
            const response = await fetch(path, {
                method, headers: {"Content-Type": "application/json", ...headers},
                body: body === null ? undefined : JSON.stringify(body),
            });
            return {status: response.status, body: await response.json()};
        }""",
        [method, path, headers or {}, body],
    )


def test_sign_in_with_the_password_then_sign_out(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots
) -> None:
    page.get_by_role("heading", name="Sign in to edgeplane").wait_for()
    screenshots(page, "sign-in")
    credentials = service.credentials

    page.get_by_label("Email", exact=True).fill(credentials["email"])
    page.get_by_label("Password", exact=True).fill("not the password")
    page.get_by_role("button", name="Sign in", exact=True).click()
    alert = page.get_by_role("alert")
    alert.wait_for()
    assert "Wrong email or password" in alert.inner_text()
    screenshots(page, "sign-in-wrong-password", phone=False)

    page.get_by_label("Password", exact=True).fill(credentials["password"])
    page.get_by_role("button", name="Sign in", exact=True).click()
    page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()
    assert credentials["email"] in page.locator("header").inner_text()

    (cookie,) = [c for c in page.context.cookies() if c["name"] == "edgeplane_session"]
    assert cookie["httpOnly"] is True
    assert cookie["secure"] is True
    assert cookie["sameSite"] == "Strict"
    assert page.evaluate("document.cookie") == ""  # out of the pages' reach

    page.reload()  # the session outlives the page
    page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()

    page.get_by_role("button", name="Sign out").click()
    page.get_by_role("heading", name="Sign in to edgeplane").wait_for()
    assert [c for c in page.context.cookies() if c["name"] == "edgeplane_session"] == []
    assert fetch(page, "GET", "/session")["status"] == 401


def test_sign_in_with_an_api_token(page: Any, service: EdgeplaneProcess) -> None:
    page.get_by_label("API token", exact=True).fill(service.credentials["api_token"])
    page.get_by_role("button", name="Sign in with token").click()
    page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()
    assert "(API token)" in page.locator("header").inner_text()
    session = fetch(page, "GET", "/session")["body"]["result"]
    assert session["token_id"] is not None


def test_a_write_with_the_cookie_but_without_the_csrf_token_is_refused(page: Any, service: EdgeplaneProcess) -> None:
    sign_in_with_password(page, service)
    path = f"/client/v4/zones/{service.credentials['zone_id']}/web3/hostnames"
    hostname = {"name": "csrf.localhost", "target": "ethereum"}

    refused = fetch(page, "POST", path, body=hostname)
    assert refused["status"] == 403
    assert refused["body"]["success"] is False
    assert refused["body"]["result"] is None
    assert [error["code"] for error in refused["body"]["errors"]] == [10000, 9111]
    names = [item["name"] for item in service.v4("GET", "/zones/{zone}/web3/hostnames")]
    assert "csrf.localhost" not in names

    # The same request with the token the page holds goes through: the refusal was the missing token's.
    token = fetch(page, "GET", "/session")["body"]["result"]["csrf_token"]
    accepted = fetch(page, "POST", path, headers={"X-CSRF-Token": token}, body=hostname)
    assert accepted["status"] == 200
    assert accepted["body"]["success"] is True
    service.v4("DELETE", f"/zones/{{zone}}/web3/hostnames/{accepted['body']['result']['id']}")


def test_the_service_says_where_the_dashboard_is(service: EdgeplaneProcess) -> None:
    lines = [json.loads(line) for line in service.log_path.read_text().splitlines() if line.startswith("{")]
    (announced,) = [line for line in lines if line.get("event", "").startswith("dashboard:")]
    assert announced["url"] == f"{service.api_url}/"
    assert announced["credentials_file"] == str(service.data_dir / "credentials.json")
    assert announced["email"] == service.credentials["email"]
