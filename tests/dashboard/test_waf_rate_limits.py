"""Security → WAF → Rate limiting rules in a real browser: a rule added (its characteristics without ``cf.colo.id``
refused first, the API's code 20013 at the field), read back through the API as the form wrote it; edited (a
requests count of 0 refused at its field, a challenge with a block duration refused at the timeout, then saved as a
throttle); the list's first row in the first screen and nothing off a phone's width; deleted."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.first_screen import assert_in_first_screen, assert_nothing_runs_off_the_width, at_the_top
from tests.dashboard.test_waf import open_waf
from tests.support.browser import PHONE, Screenshots
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

RATELIMIT_PHASE = "/zones/{zone}/rulesets/phases/http_ratelimit/entrypoint"


@pytest.fixture
def no_rate_limiting_rules(service: EdgeplaneProcess) -> Iterator[None]:
    yield
    service.v4("PUT", RATELIMIT_PHASE, json={"rules": []})


def field_error(editor: Any, member: str) -> Any:
    error = editor.locator(f"#rate-limit-{member}-error")
    error.wait_for()
    return error


def test_rate_limiting_rules_added_edited_deleted_and_refusals_at_their_fields(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_rate_limiting_rules: None
) -> None:
    open_waf(page, service)
    page.get_by_role("tab", name="Rate limiting rules").click()
    add = page.get_by_role("button", name="Add rate limiting rule")
    add.wait_for()
    assert page.get_by_role("tab", name="Rate limiting rules").get_attribute("aria-selected") == "true"
    page.get_by_text("No rate limiting rules in").wait_for()

    add.click()
    editor = page.get_by_role("form", name="Add rate limiting rule")
    assert_in_first_screen(page, editor.get_by_role("button", name="Save"), "the form's Save")
    assert editor.get_by_role("heading", name="Add rate limiting rule").evaluate("h => h === document.activeElement")
    assert add.is_hidden()  # the form is in place of the list
    editor.get_by_label("Rule name (description)", exact=True).fill("per address")
    editor.get_by_label("Expression", exact=True).fill('http.request.uri.path eq "/v1/mainnet"')
    characteristics = editor.get_by_label("Counted per (characteristics, one a line)", exact=True)
    characteristics.fill("ip.src")
    editor.get_by_label("Requests per period", exact=True).fill("100")
    editor.get_by_role("button", name="Save").click()
    assert "(code 20013)" in field_error(editor, "characteristics").inner_text()  # the API's words, at the field
    assert characteristics.get_attribute("aria-invalid") == "true"
    assert characteristics.evaluate("area => area === document.activeElement")
    screenshots(page, "security-waf-rate-limits-error")

    characteristics.fill("cf.colo.id\nip.src")
    editor.get_by_label("Period", exact=True).select_option(label="1 minute")
    editor.get_by_label("Then", exact=True).select_option(label="For 10 minutes")
    editor.get_by_text("Custom response and counting expression").click()  # folded: most rules leave them out
    editor.get_by_label("Response status code", exact=True).fill("429")
    editor.get_by_label("Response content type", exact=True).select_option("application/json")
    editor.get_by_label("Response body", exact=True).fill('{"error":"rate limited"}')
    editor.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved rule “per address”").wait_for()
    (rule,) = service.v4("GET", RATELIMIT_PHASE)["rules"]
    assert rule["ratelimit"] == {
        "characteristics": ["cf.colo.id", "ip.src"],
        "period": 60,
        "mitigation_timeout": 600,
        "requests_per_period": 100,
    }
    assert rule["action"] == "block"
    assert rule["action_parameters"] == {
        "response": {"status_code": 429, "content_type": "application/json", "content": '{"error":"rate limited"}'}
    }
    row = page.locator(f'tr[data-rule="{rule["id"]}"]')
    assert "100 requests per 1 minute" in row.inner_text()
    assert "block 429, for 10 minutes" in row.inner_text()

    page.get_by_role("button", name="Edit rule “per address”").click()
    editor = page.get_by_role("form", name="Edit rule “per address”")
    assert (
        editor.get_by_label("Requests per period", exact=True).input_value() == "100"
    )  # the form opens on what the API holds
    editor.get_by_label("Requests per period", exact=True).fill("0")
    editor.get_by_role("button", name="Save").click()
    assert "(code 20016)" in field_error(editor, "requests_per_period").inner_text()
    editor.get_by_label("Requests per period", exact=True).fill("50")
    editor.get_by_label("Action", exact=True).select_option("managed_challenge")
    assert editor.get_by_label("Response body", exact=True).is_hidden()  # a response is only for block
    editor.get_by_role("button", name="Save").click()
    assert "(code 20012)" in field_error(editor, "mitigation_timeout").inner_text()
    assert editor.locator("#rate-limit-requests_per_period-error").is_hidden()  # that one was fixed
    editor.get_by_label("Then", exact=True).select_option("0")
    editor.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved").wait_for()
    page.locator("table.rate-limit-rules").get_by_text("managed_challenge, throttle").wait_for()
    (rule,) = service.v4("GET", RATELIMIT_PHASE)["rules"]
    assert (rule["action"], rule["ratelimit"]["requests_per_period"], rule["ratelimit"]["mitigation_timeout"]) == (
        "managed_challenge",
        50,
        0,
    )
    assert "action_parameters" not in rule
    assert add.evaluate("button => button === document.activeElement")
    assert_in_first_screen(page, page.locator("table.rate-limit-rules tbody tr").first, "the first rate limiting rule")
    at_the_top(page)
    screenshots(page, "security-waf-rate-limits", full_page=False)
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("button", name="Delete rule “per address”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    page.get_by_role("status").filter(has_text="Deleted rule “per address”").wait_for()
    assert service.v4("GET", RATELIMIT_PHASE)["rules"] == []
