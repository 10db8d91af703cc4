"""The Web3 gateways page in a real browser: hostnames created, edited and deleted through the page, each read back
through the v4 API; the API's refusal shown inline; the endpoint URL; the other pages of the navigation."""

from __future__ import annotations

from typing import Any

import pytest

from tests.dashboard.conftest import sign_in_with_password
from tests.dashboard.first_screen import assert_in_first_screen, assert_nothing_runs_off_the_width, at_the_top
from tests.support.browser import DESKTOP, PHONE, Screenshots
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e


def hostnames(service: EdgeplaneProcess) -> dict[str, dict[str, Any]]:
    return {item["name"]: item for item in service.v4("GET", "/zones/{zone}/web3/hostnames")}


def open_create_form(page: Any) -> Any:
    page.get_by_role("button", name="Add a hostname").click()
    create = page.get_by_role("form", name="Add a hostname")
    assert create.get_by_label("Hostname", exact=True).evaluate("input => input === document.activeElement")
    return create


def test_create_edit_and_delete_a_hostname(page: Any, service: EdgeplaneProcess, screenshots: Screenshots) -> None:
    sign_in_with_password(page, service)
    assert page.get_by_role("combobox", name="Zone").input_value() == service.credentials["zone_id"]
    page.get_by_role("row", name="localhost").first.wait_for()
    # First the hostnames: the table's rows and the button that adds one, in the first screen.
    table = page.get_by_role("table", name="Web3 hostnames of localhost")
    for row in table.locator("tbody tr").all():
        assert_in_first_screen(page, row, "a hostname's row")
    assert_in_first_screen(page, page.get_by_role("button", name="Add a hostname"), "Add a hostname")
    at_the_top(page)
    screenshots(page, "web3-gateways", full_page=False)
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    assert_in_first_screen(page, table.locator("tbody tr").first.locator("th"), "the first hostname at phone width")
    page.set_viewport_size(DESKTOP)

    create = open_create_form(page)
    assert table.is_hidden()  # the form stands in place of the list
    assert_in_first_screen(page, create.get_by_role("button", name="Create hostname"), "the form's button")
    create.get_by_label("Hostname", exact=True).fill("rpc.localhost")
    create.get_by_label("Target", exact=True).select_option("ethereum")
    create.get_by_label("Description", exact=True).fill("the team's node")
    create.get_by_role("button", name="Create hostname").click()
    row = page.locator('tr[data-hostname="rpc.localhost"]')
    row.wait_for()
    assert create.count() == 0
    assert page.get_by_role("button", name="Add a hostname").evaluate("button => button === document.activeElement")
    page.get_by_role("status").filter(has_text="Created rpc.localhost").wait_for()
    created = hostnames(service)["rpc.localhost"]
    assert created["target"] == "ethereum"
    assert created["description"] == "the team's node"
    endpoint = page.get_by_label("Endpoint URL of rpc.localhost", exact=True)
    assert endpoint.input_value() == f"http://rpc.localhost:{service.edge_port}/v1/mainnet"

    row.get_by_role("button", name="Edit rpc.localhost").click()
    edit = page.get_by_role("form", name="Edit rpc.localhost")
    assert edit.get_by_label("Description", exact=True).evaluate("input => input === document.activeElement")
    assert_in_first_screen(page, edit.get_by_role("button", name="Save"), "the edit form's Save")
    edit.get_by_role("button", name="Cancel").click()  # back to the list, the focus where the edit started
    edit_button = row.get_by_role("button", name="Edit rpc.localhost")
    assert edit_button.evaluate("button => button === document.activeElement")
    edit_button.click()
    edit.get_by_label("Description", exact=True).fill("the team's archive node")
    edit.get_by_label("DNSLink", exact=True).fill("/ipns/example.com")
    screenshots(page, "web3-gateways-edit", phone=False)
    edit.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved rpc.localhost").wait_for()
    assert row.get_by_role("button", name="Edit rpc.localhost").evaluate("button => button === document.activeElement")
    edited = hostnames(service)["rpc.localhost"]
    assert edited["description"] == "the team's archive node"
    assert edited["dnslink"] == "/ipns/example.com"
    assert "the team's archive node" in row.inner_text()

    row.get_by_role("button", name="Delete rpc.localhost").click()
    dialog = page.get_by_role("dialog", name="Delete rpc.localhost?")
    dialog.wait_for()
    at_the_top(page)
    screenshots(page, "web3-gateways-delete", phone=False, full_page=False)  # the dialog over the window
    dialog.get_by_role("button", name="Delete").click()
    row.wait_for(state="detached")
    assert "rpc.localhost" not in hostnames(service)


def test_the_apis_refusal_is_shown_inline(page: Any, service: EdgeplaneProcess, screenshots: Screenshots) -> None:
    sign_in_with_password(page, service)
    create = open_create_form(page)
    create.get_by_label("Hostname", exact=True).fill("rpc.example.com")
    create.get_by_role("button", name="Create hostname").click()
    alert = create.get_by_role("alert")
    alert.wait_for()
    assert "name must be localhost or a subdomain of it" in alert.inner_text()
    hostname = create.get_by_label("Hostname", exact=True)
    assert hostname.get_attribute("aria-invalid") == "true"  # the field the API's error points at (/name)
    assert create.get_by_label("Target", exact=True).get_attribute("aria-invalid") is None
    screenshots(page, "web3-gateways-error", phone=False)
    assert "rpc.example.com" not in hostnames(service)

    # Taken already: the API's conflict, in the API's words.
    create.get_by_label("Hostname", exact=True).fill("localhost")
    create.get_by_role("button", name="Create hostname").click()
    page.get_by_role("alert").filter(has_text="already exists").wait_for()


def test_the_keyboard_reaches_the_controls_in_order(page: Any, service: EdgeplaneProcess) -> None:
    def focused() -> str:
        return str(page.evaluate("(document.activeElement.labels?.[0] ?? document.activeElement).textContent.trim()"))

    page.get_by_role("heading", name="Sign in to edgeplane").wait_for()
    assert focused() == "Email"  # the page starts where the user types
    order = []
    for _ in range(4):
        page.keyboard.press("Tab")
        order.append(focused())
    assert order == ["Password", "Sign in", "API token", "Sign in with token"]
    page.keyboard.press("Shift+Tab")
    for _ in range(4):
        page.keyboard.press("Shift+Tab")
    assert focused() == "Skip to content"
    page.get_by_label("API token", exact=True).fill(service.credentials["api_token"])
    page.keyboard.press("Enter")  # a form submits from the keyboard
    page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()


def test_the_zone_picker_chooses_the_zone_the_page_acts_on(page: Any, service: EdgeplaneProcess) -> None:
    account = {"id": service.credentials["account_id"]}
    zone = service.v4("POST", "/zones", json={"name": "picker.example", "account": account})
    service.v4("POST", f"/zones/{zone['id']}/web3/hostnames", json={"name": "rpc.picker.example", "target": "ethereum"})
    try:
        sign_in_with_password(page, service)
        page.get_by_label("Zone", exact=True).select_option(label="picker.example")
        page.locator('tr[data-hostname="rpc.picker.example"]').wait_for()
        assert page.locator('tr[data-hostname="localhost"]').count() == 0
        assert page.get_by_label("Zone", exact=True).evaluate("select => select === document.activeElement")

        page.reload()  # the choice holds for the browser tab's session
        page.locator('tr[data-hostname="rpc.picker.example"]').wait_for()
    finally:
        service.v4("DELETE", f"/zones/{zone['id']}")


def test_a_read_only_token_sees_the_hostnames_and_the_apis_refusal(page: Any, service: EdgeplaneProcess) -> None:
    zone = {f"com.cloudflare.api.account.zone.{service.credentials['zone_id']}": "*"}
    policies = [{"effect": "allow", "resources": zone, "permission_groups": [{"name": "Web3 Hostnames Read"}]}]
    token = service.v4("POST", "/user/tokens", json={"name": "read only", "policies": policies})
    try:
        page.get_by_label("API token", exact=True).fill(token["value"])
        page.get_by_role("button", name="Sign in with token").click()
        page.locator('tr[data-hostname="localhost"]').wait_for()
        create = open_create_form(page)
        create.get_by_label("Hostname", exact=True).fill("ro.localhost")
        create.get_by_role("button", name="Create hostname").click()
        alert = create.get_by_role("alert")
        alert.wait_for()
        assert "Authentication error (code 10000)" in alert.inner_text()
        assert "ro.localhost" not in hostnames(service)
    finally:
        service.v4("DELETE", f"/user/tokens/{token['id']}")
