"""Logs → Logpush in a real browser: a job added through the "Add Logpush job" flow with a two-level AND/OR filter
built row by row, read back through the v4 API; the filter JSON edited as text; the API's refusals (a filter over
the limit, a value of the wrong type, a missing ownership challenge) shown at the control they point at; enable,
disable and delete read back through the API."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.dashboard.conftest import sign_in_with_password
from tests.dashboard.first_screen import assert_in_first_screen, assert_nothing_runs_off_the_width, at_the_top
from tests.support.browser import PHONE, Screenshots
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

BUILT_FILTER = {
    "where": {
        "and": [
            {"key": "ClientRequestHost", "operator": "eq", "value": "example.com"},
            {
                "or": [
                    {"key": "BotScore", "operator": "lt", "value": "30"},
                    {"key": "EdgeResponseStatus", "operator": "in", "value": [403, 429]},
                ]
            },
        ]
    }
}


def jobs(service: EdgeplaneProcess) -> dict[int, dict[str, Any]]:
    return {job["id"]: job for job in service.v4("GET", "/zones/{zone}/logpush/jobs")}


@pytest.fixture
def no_jobs(service: EdgeplaneProcess) -> Iterator[None]:
    """The zone without Logpush jobs before and after the test (a zone holds at most 4)."""
    for job_id in jobs(service):
        service.v4("DELETE", f"/zones/{{zone}}/logpush/jobs/{job_id}")
    yield
    for job_id in jobs(service):
        service.v4("DELETE", f"/zones/{{zone}}/logpush/jobs/{job_id}")


def open_logpush(page: Any, service: EdgeplaneProcess) -> None:
    sign_in_with_password(page, service)
    page.get_by_role("navigation", name="Main").get_by_role("link", name="Logpush", exact=True).click()
    page.get_by_role("heading", name="Logpush", level=1).wait_for()


def condition(page: Any, path: str) -> Any:
    return page.locator(f'[data-path="{path}"]')


def test_the_navigation_reaches_the_logpush_page(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_jobs: None
) -> None:
    open_logpush(page, service)
    nav = page.get_by_role("navigation", name="Main")
    heading = page.get_by_role("heading", name="Logpush", level=1)
    assert heading.evaluate("heading => heading === document.activeElement")  # focus follows the page
    assert nav.get_by_role("link", name="Logpush", exact=True).get_attribute("aria-current") == "page"
    assert "No Logpush jobs in localhost yet." in page.locator("main").inner_text()


def test_add_a_job_with_a_two_level_filter_built_row_by_row(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_jobs: None
) -> None:
    open_logpush(page, service)
    page.get_by_role("button", name="Add Logpush job").click()
    editor = page.get_by_role("form", name="Add Logpush job")
    step = editor.get_by_role("heading", name="Step 1 of 3: Dataset")
    step.wait_for()
    assert step.evaluate("heading => heading === document.activeElement")
    # The flow stands in place of the list: its step and its Next in the first screen, the list hidden.
    assert_in_first_screen(page, editor.get_by_role("button", name="Next"), "the flow's Next")
    assert page.get_by_text("No Logpush jobs in localhost yet.").is_hidden()
    editor.get_by_label("Dataset", exact=True).select_option("http_requests")
    screenshots(page, "logs-logpush-add-dataset", phone=False)
    editor.get_by_role("button", name="Next").click()

    editor.get_by_role("heading", name="Step 2 of 3: Fields and filter").wait_for()
    for name in ("RayID", "ClientRequestHost", "EdgeResponseStatus"):  # the API's field list, as checkboxes
        editor.get_by_label(name, exact=True).check()
    editor.get_by_role("button", name="Add condition", exact=True).click()
    first = condition(page, "where.and[0]")
    assert first.get_by_label("Field").evaluate("select => select === document.activeElement")
    first.get_by_label("Field").select_option("ClientRequestHost")
    # A string field offers the string operators, an int field the numeric ones: GET /filter-language's table.
    assert "startsWith" in first.get_by_label("Operator").inner_text()
    assert "lt (less than)" not in first.get_by_label("Operator").inner_text()
    first.get_by_label("Operator").select_option("eq")
    first.get_by_label("Value").fill("example.com")

    editor.get_by_role("button", name="Add group", exact=True).click()
    group = condition(page, "where.and[1]")
    group.get_by_label("Nested group (level 2): match").select_option("or")
    bot_score = condition(page, "where.and[1].or[0]")
    bot_score.get_by_label("Field").select_option("BotScore")
    assert "startsWith" not in bot_score.get_by_label("Operator").inner_text()
    bot_score.get_by_label("Operator").select_option("lt")
    assert bot_score.get_by_label("Value").get_attribute("type") == "number"  # a number for an int field
    bot_score.get_by_label("Value").fill("30")
    group.get_by_role("button", name="Add condition to this group").click()
    status = condition(page, "where.and[1].or[1]")
    status.get_by_label("Field").select_option("EdgeResponseStatus")
    status.get_by_label("Operator").select_option("in")
    status.get_by_label("Values (one per line)").fill("403\n429")

    filter_json = editor.get_by_label("Filter JSON")
    assert json.loads(filter_json.input_value()) == BUILT_FILTER
    limits = editor.locator("#filter-limits").inner_text()
    assert f"{len(filter_json.input_value().encode())} of 1000 bytes" in limits
    assert "5 of 30 operators" in limits  # three conditions and two groups
    screenshots(page, "logs-logpush-add-filter")
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    page.set_viewport_size({"width": 1280, "height": 800})
    editor.get_by_role("button", name="Next").click()

    editor.get_by_role("heading", name="Step 3 of 3: Destination").wait_for()
    conf = f"file://{service.data_dir / 'destinations'}/dashboard"
    editor.get_by_label("Job name", exact=True).fill("edge-errors")
    editor.get_by_label("Destination", exact=True).fill(conf)
    editor.get_by_role("button", name="Save").click()
    # A directory on this machine needs its ownership challenge: the API says so, and the flow asks for it.
    editor.get_by_role("alert").filter(has_text="ownership challenge").wait_for()
    challenge = editor.get_by_label("Ownership challenge", exact=True)
    assert challenge.get_attribute("aria-invalid") == "true"
    editor.get_by_role("button", name="Write the challenge file").click()
    written = editor.get_by_role("status").filter(has_text="Wrote ")
    written.wait_for()
    filename = written.inner_text().removeprefix("Wrote ").split(": paste")[0]
    challenge.fill(Path(filename).read_text().strip())
    screenshots(page, "logs-logpush-add-destination", phone=False)
    editor.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved edge-errors").wait_for()

    (job,) = jobs(service).values()
    assert json.loads(job["filter"]) == BUILT_FILTER  # what was built is what the API stores
    assert job["filter"] == filter_json_text(BUILT_FILTER)
    assert job["name"] == "edge-errors"
    assert job["dataset"] == "http_requests"
    assert job["destination_conf"] == conf
    assert job["enabled"] is True
    # in the order of the API's field list
    assert job["output_options"]["field_names"] == ["ClientRequestHost", "EdgeResponseStatus", "RayID"]
    row = page.locator(f'tr[data-job="{job["id"]}"]')
    assert "Enabled" in row.inner_text()
    assert editor.count() == 0
    assert page.get_by_role("button", name="Add Logpush job").evaluate("button => button === document.activeElement")
    assert_in_first_screen(page, row, "the job's row")
    at_the_top(page)
    screenshots(page, "logs-logpush", full_page=False)
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    assert_in_first_screen(page, row.locator("th"), "the job at phone width")
    page.set_viewport_size({"width": 1280, "height": 800})

    # Editing reuses the flow; the filter JSON edited as text updates the builder, and is saved as written.
    row.get_by_role("button", name=f"Edit edge-errors (job {job['id']})").click()
    edit = page.get_by_role("form", name="Edit Logpush job edge-errors")
    assert page.get_by_role("status").filter(has_text="Saved edge-errors").count() == 0  # a new edit, no old outcome
    assert edit.get_by_label("Dataset", exact=True).is_disabled()  # fixed once the job exists
    edit.get_by_role("button", name="Next").click()
    assert edit.get_by_label("RayID", exact=True).is_checked()
    edited = (
        '{"where":{"or":[{"key":"ClientCountry","operator":"in","value":["fr","de"]},'
        '{"key":"BotScore","operator":"geq","value":"90"}]}}'
    )
    edit.get_by_label("Filter JSON").fill(edited)
    assert condition(page, "where.or[0]").get_by_label("Field").input_value() == "ClientCountry"
    assert condition(page, "where.or[0]").get_by_label("Values (one per line)").input_value() == "fr\nde"
    assert condition(page, "where.or[1]").get_by_label("Value").input_value() == "90"
    edit.get_by_role("button", name="Next").click()
    edit.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved edge-errors").wait_for()
    assert jobs(service)[job["id"]]["filter"] == edited


def filter_json_text(document: dict[str, Any]) -> str:
    return json.dumps(document, separators=(",", ":"))


def test_the_apis_filter_errors_are_shown_where_they_point(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_jobs: None
) -> None:
    job = service.v4(
        "POST", "/zones/{zone}/logpush/jobs", json={"name": "limits", **service.file_destination("limits")}
    )
    open_logpush(page, service)
    page.get_by_role("button", name=f"Edit limits (job {job['id']})").click()
    edit = page.get_by_role("form", name="Edit Logpush job limits")
    edit.get_by_role("button", name="Next").click()
    edit.get_by_role("button", name="Add condition", exact=True).click()
    host = condition(page, "where.and[0]")
    host.get_by_label("Field").select_option("ClientRequestHost")
    host.get_by_label("Value").fill("a" * 1000)
    assert edit.locator("#filter-limits .over").inner_text().endswith("of 1000 bytes")  # shown as it is built
    edit.get_by_role("button", name="Next").click()
    edit.get_by_role("button", name="Save").click()

    # The API's refusal sends the flow back to the filter, its message at the JSON (the filter as a whole).
    alert = edit.get_by_role("alert")
    alert.wait_for()
    assert "1000 bytes" in alert.inner_text()
    assert "(code 1004)" in alert.inner_text()
    edit.get_by_role("heading", name="Step 2 of 3: Fields and filter").wait_for()
    assert edit.get_by_label("Filter JSON").get_attribute("aria-invalid") == "true"
    assert "1000 bytes" in edit.locator(".field-error").inner_text()
    screenshots(page, "logs-logpush-filter-error", phone=False)
    assert jobs(service)[job["id"]]["filter"] is None

    # An error with a path is shown at the row and the control it names (where.and[1].value[0]).
    wrong = (
        '{"where":{"and":[{"key":"ClientRequestHost","operator":"eq","value":"a"},'
        '{"key":"BotScore","operator":"in","value":["30"]}]}}'
    )
    edit.get_by_label("Filter JSON").fill(wrong)
    edit.get_by_role("button", name="Next").click()
    edit.get_by_role("button", name="Save").click()
    values = condition(page, "where.and[1]").get_by_label("Values (one per line)")
    values.and_(page.locator('[aria-invalid="true"]')).wait_for()
    assert values.evaluate("control => control === document.activeElement")
    message = condition(page, "where.and[1]").locator(".field-error").inner_text()
    assert message.startswith("where.and[1].value[0]: must be an integer for field BotScore")
    assert condition(page, "where.and[0]").locator("[aria-invalid]").count() == 0
    assert jobs(service)[job["id"]]["filter"] is None


def test_enable_disable_and_delete_a_job(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_jobs: None
) -> None:
    job = service.v4(
        "POST", "/zones/{zone}/logpush/jobs", json={"name": "toggled", **service.file_destination("toggled")}
    )
    assert job["enabled"] is False
    label = f"toggled (job {job['id']})"
    open_logpush(page, service)
    row = page.locator(f'tr[data-job="{job["id"]}"]')
    assert "Disabled" in row.inner_text()
    assert "Nothing pushed yet" in row.inner_text()

    row.get_by_role("button", name=f"Enable {label}").click()
    page.get_by_role("status").filter(has_text=f"Enabled {label}").wait_for()
    assert jobs(service)[job["id"]]["enabled"] is True
    assert row.get_by_role("button", name=f"Disable {label}").evaluate("button => button === document.activeElement")

    row.get_by_role("button", name=f"Disable {label}").click()
    page.get_by_role("status").filter(has_text=f"Disabled {label}").wait_for()
    assert jobs(service)[job["id"]]["enabled"] is False

    row.get_by_role("button", name=f"Delete {label}").click()
    dialog = page.get_by_role("dialog", name=f"Delete {label}?")
    dialog.wait_for()
    assert dialog.get_by_role("button", name="Cancel").evaluate("button => button === document.activeElement")
    at_the_top(page)
    screenshots(page, "logs-logpush-delete", phone=False, full_page=False)
    dialog.get_by_role("button", name="Delete").click()
    row.wait_for(state="detached")
    assert job["id"] not in jobs(service)


def test_the_builder_is_worked_from_the_keyboard(page: Any, service: EdgeplaneProcess, no_jobs: None) -> None:
    def focused() -> str:
        return str(page.evaluate("(document.activeElement.labels?.[0] ?? document.activeElement).textContent.trim()"))

    open_logpush(page, service)
    page.get_by_role("button", name="Add Logpush job").focus()
    page.keyboard.press("Enter")
    editor = page.get_by_role("form", name="Add Logpush job")
    editor.get_by_role("heading", name="Step 1 of 3: Dataset").wait_for()
    page.keyboard.press("Tab")
    assert focused() == "Dataset"
    page.keyboard.press("Tab")
    assert focused() == "Next"  # Back is not there on the first step
    page.keyboard.press("Enter")
    editor.get_by_role("heading", name="Step 2 of 3: Fields and filter").wait_for()
    editor.get_by_role("button", name="Add condition", exact=True).focus()
    page.keyboard.press("Enter")
    assert focused() == "Field"  # a new condition starts at its field
    order = []
    for _ in range(5):
        page.keyboard.press("Tab")
        order.append(focused())
    assert order == ["Operator", "Value", "Remove", "Add condition", "Add group"]
    page.keyboard.press("Enter")  # Add group: its match comes first, then its first condition
    assert focused() == "Nested group (level 2): match"
    page.keyboard.press("Tab")
    assert focused() == "Field"
    assert page.evaluate("document.activeElement.closest('[data-path]').dataset.path") == "where.and[1].or[0]"


def test_json_the_builder_cannot_show_is_kept_as_written(page: Any, service: EdgeplaneProcess, no_jobs: None) -> None:
    open_logpush(page, service)
    page.get_by_role("button", name="Add Logpush job").click()
    editor = page.get_by_role("form", name="Add Logpush job")
    editor.get_by_role("button", name="Next").click()
    filter_json = editor.get_by_label("Filter JSON")
    filter_json.fill('{"where":{"key":"BotScore","operator":"lt","value":"30"}}')
    only = condition(page, "where.and[0]")  # a where of one condition, shown in an AND group
    assert only.get_by_label("Field").input_value() == "BotScore"
    assert only.get_by_label("Operator").input_value() == "lt"
    filter_json.fill('{"where":{"and":[')
    editor.get_by_role("status").filter(has_text="The builder cannot show this JSON").wait_for()
    assert filter_json.input_value() == '{"where":{"and":['
    assert only.get_by_label("Field").input_value() == "BotScore"  # the builder keeps what it last showed
    assert "? of 30 operators" in editor.locator("#filter-limits").inner_text()


def test_the_destination_is_checked_before_saving(page: Any, service: EdgeplaneProcess, no_jobs: None) -> None:
    open_logpush(page, service)
    page.get_by_role("button", name="Add Logpush job").click()
    editor = page.get_by_role("form", name="Add Logpush job")
    editor.get_by_role("button", name="Next").click()
    editor.get_by_role("button", name="Next").click()
    destination = editor.get_by_label("Destination", exact=True)
    destination.fill("file:///etc/edgeplane")  # outside the operator's file root
    editor.get_by_role("button", name="Check destination").click()
    editor.get_by_role("status").filter(has_text="Not allowed:").wait_for()
    assert destination.get_attribute("aria-invalid") == "true"
    destination.fill(f"file://{service.data_dir / 'destinations'}/checked")
    assert destination.get_attribute("aria-invalid") is None  # changed: no longer marked
    editor.get_by_role("button", name="Check destination").click()
    editor.get_by_role("status").filter(has_text="The destination is allowed.").wait_for()
    assert jobs(service) == {}


def test_a_read_only_token_sees_the_jobs_and_the_apis_refusal(
    page: Any, service: EdgeplaneProcess, no_jobs: None
) -> None:
    job = service.v4("POST", "/zones/{zone}/logpush/jobs", json={"name": "seen", **service.file_destination("seen")})
    zone = {f"com.cloudflare.api.account.zone.{service.credentials['zone_id']}": "*"}
    policies = [{"effect": "allow", "resources": zone, "permission_groups": [{"name": "Logs Read"}]}]
    token = service.v4("POST", "/user/tokens", json={"name": "logs read only", "policies": policies})
    try:
        page.get_by_label("API token", exact=True).fill(token["value"])
        page.get_by_role("button", name="Sign in with token").click()
        page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()
        page.get_by_role("navigation", name="Main").get_by_role("link", name="Logpush", exact=True).click()
        row = page.locator(f'tr[data-job="{job["id"]}"]')
        row.get_by_role("button", name=f"Enable seen (job {job['id']})").click()
        alert = row.get_by_role("alert")
        alert.wait_for()
        assert "(code 10000)" in alert.inner_text()
        assert jobs(service)[job["id"]]["enabled"] is False
    finally:
        service.v4("DELETE", f"/user/tokens/{token['id']}")
