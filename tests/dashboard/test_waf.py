"""Security → WAF in a real browser: the Managed rules tab deploys the OWASP Core Ruleset at a paranoia level and
sensitivity (read back through the Rulesets API); an Enterprise zone still on the previous WAF runs the migration of
seed 002 (Review configuration → Deploy → validation mode → Ready to update → Turn off previous version), its
status checked through the API at each step; a zone with URI-based WAF overrides gets the API's reason; custom
rules are added, edited and deleted, and a bad expression shows the API's error at the expression field."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from tests.dashboard.conftest import sign_in_with_password
from tests.dashboard.first_screen import assert_in_first_screen, assert_nothing_runs_off_the_width, at_the_top
from tests.support.browser import PHONE, Screenshots
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

MANAGED_PHASE = "/zones/{zone}/rulesets/phases/http_request_firewall_managed/entrypoint"
CUSTOM_PHASE = "/zones/{zone}/rulesets/phases/http_request_firewall_custom/entrypoint"
OWASP = "4814384a9e5d4991b9815dcfc25d2f1f"
SCORE_RULE = "6179ae15870a4bb7b2d480d4843b323c"


def open_waf(page: Any, service: EdgeplaneProcess, zone_name: str | None = None) -> None:
    sign_in_with_password(page, service)
    if zone_name is not None:
        page.get_by_label("Zone", exact=True).select_option(label=zone_name)
        page.get_by_role("heading", name="Web3 gateways", level=1).wait_for()
    page.get_by_role("navigation", name="Main").get_by_role("link", name="WAF", exact=True).click()
    page.get_by_role("heading", name="WAF", level=1).wait_for()


def open_migration(page: Any) -> Any:
    """The migration panel of the Managed rules tab, unfolded (it opens folded to its state, under way or not)."""
    migration = page.locator("section.migration")
    migration.get_by_role("heading", name="Update to the new WAF managed rules").wait_for()
    show = migration.get_by_role("button", name="Show the update")
    assert show.get_attribute("aria-expanded") == "false"
    show.click()
    assert migration.get_by_role("button", name="Hide the update").get_attribute("aria-expanded") == "true"
    return migration


def new_zone(service: EdgeplaneProcess, name: str, plan: str) -> str:
    account = service.v4("GET", "/zones/{zone}")["account"]["id"]
    zone: dict[str, Any] = service.v4("POST", "/zones", json={"name": name, "account": {"id": account}, "plan": plan})
    return str(zone["id"])


@pytest.fixture
def default_managed_entrypoint(service: EdgeplaneProcess) -> Iterator[list[dict[str, Any]]]:
    """The bootstrap zone's managed entrypoint as it was, put back after the test."""
    rules = service.v4("GET", MANAGED_PHASE)["rules"]
    yield rules
    kept = [{key: value for key, value in rule.items() if key not in ("version", "last_updated")} for rule in rules]
    service.v4("PUT", MANAGED_PHASE, json={"rules": kept})


def test_deploy_the_owasp_core_ruleset_at_a_paranoia_level(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, default_managed_entrypoint: list[dict[str, Any]]
) -> None:
    open_waf(page, service)
    heading = page.get_by_role("heading", name="WAF", level=1)
    assert heading.evaluate("heading => heading === document.activeElement")
    assert page.get_by_role("tab", name="Managed rules").get_attribute("aria-selected") == "true"
    managed = page.locator('[data-ruleset="efb7b8c949ac4650a09736fc376e9aee"]')
    assert "Deployed, enabled" in managed.inner_text()  # the default deployment, as the API answers it
    # First the rulesets, side by side: each card whole in the first screen, the migration folded above them.
    owasp = page.locator(f'[data-ruleset="{OWASP}"]')
    first, second = (assert_in_first_screen(page, card, "a ruleset's card") for card in (managed, owasp))
    assert first["y"] == second["y"]
    page.get_by_role("button", name="Deploy Cloudflare OWASP Core Ruleset").click()
    editor = page.get_by_role("form", name="Deploy Cloudflare OWASP Core Ruleset")
    # The form opens in place of the cards (and of the migration), its heading focused in the first screen.
    assert editor.get_by_role("heading", name="Deploy Cloudflare OWASP Core Ruleset").evaluate(
        "heading => heading === document.activeElement"
    )
    assert_in_first_screen(page, editor.locator("h2"), "the form's heading")
    assert managed.is_hidden()
    editor.get_by_label("Paranoia level").select_option("2")
    editor.get_by_label("Sensitivity").select_option("25")
    editor.get_by_label("Score action").select_option("log")
    editor.get_by_role("button", name="Add category override").click()
    editor.get_by_label("Category", exact=True).select_option("attack-protocol")
    editor.get_by_label("Enabled", exact=True).last.select_option("false")
    editor.get_by_label("Search rules").fill("942100")
    rule_row = editor.locator("table.managed-rules tbody tr").first
    rule_id = rule_row.get_attribute("data-rule")
    rule_row.get_by_role("combobox").first.select_option("block")
    screenshots(page, "security-waf-owasp-deploy")
    editor.get_by_role("button", name="Deploy", exact=True).click()
    page.get_by_role("status").filter(has_text="Deployed Cloudflare OWASP Core Ruleset").wait_for()

    rules = service.v4("GET", MANAGED_PHASE)["rules"]
    executed = [rule for rule in rules if rule["action"] == "execute" and rule["action_parameters"]["id"] == OWASP]
    assert len(executed) == 1
    overrides = executed[0]["action_parameters"]["overrides"]
    assert overrides["categories"] == [
        {"category": "paranoia-level-3", "enabled": False},
        {"category": "paranoia-level-4", "enabled": False},
        {"category": "attack-protocol", "enabled": False},
    ]
    assert {"id": SCORE_RULE, "score_threshold": 25, "action": "log"} in overrides["rules"]
    assert {"id": rule_id, "action": "block"} in overrides["rules"]
    summary = owasp.inner_text()  # what the deployment is, read back from the API
    for shown in ("Deployed, enabled", "PL2", "Score threshold\n25", "attack-protocol: disabled"):
        assert shown in summary
    assert owasp.get_by_role("heading", name="Cloudflare OWASP Core Ruleset").evaluate(
        "heading => heading === document.activeElement"
    )
    at_the_top(page)
    screenshots(page, "security-waf-managed", full_page=False)
    configure = owasp.get_by_role("button", name="Configure Cloudflare OWASP Core Ruleset")
    assert_in_first_screen(page, configure, "Configure")
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    page.set_viewport_size({"width": 1280, "height": 800})

    owasp.get_by_role("button", name="Configure Cloudflare OWASP Core Ruleset").click()
    editor = page.get_by_role("form", name="Configure Cloudflare OWASP Core Ruleset")
    assert editor.get_by_label("Paranoia level").input_value() == "2"  # the editor reads the deployment back
    assert editor.get_by_label("Sensitivity").input_value() == "25"
    editor.get_by_role("button", name="Cancel").click()
    owasp.get_by_role("button", name="Undeploy Cloudflare OWASP Core Ruleset").click()
    page.get_by_role("status").filter(has_text="Undeployed Cloudflare OWASP Core Ruleset").wait_for()
    rules = service.v4("GET", MANAGED_PHASE)["rules"]
    assert not [rule for rule in rules if rule["action_parameters"]["id"] == OWASP]


def test_an_enterprise_zone_migrates_through_the_managed_rules_tab(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots
) -> None:
    zone_id = new_zone(service, "migrate-enterprise.localhost", "enterprise")
    zone = f"/zones/{zone_id}"
    service.v4("PATCH", f"{zone}/settings/waf", json={"value": "on"})
    service.v4(
        "POST",
        f"{zone}/firewall/rules",
        json=[
            {
                "action": "bypass",
                "products": ["waf"],
                "description": "office",
                "filter": {"expression": "ip.src eq 192.0.2.7"},
            }
        ],
    )
    open_waf(page, service, "migrate-enterprise.localhost")
    migration = page.locator("section.migration")
    migration.get_by_role("heading", name="Update to the new WAF managed rules").wait_for()
    assert "Phase 2" not in migration.inner_text()  # folded: the state only, the rulesets below it in view
    assert_in_first_screen(page, page.locator('[data-ruleset="efb7b8c949ac4650a09736fc376e9aee"] h2'), "a ruleset")
    migration = open_migration(page)
    text = migration.inner_text()
    assert "Migration state\nstart" in text
    assert "Previous version\nenabled" in text
    assert "Phase 2: this zone is eligible for the update." in text
    # The API's words for phase 1, which a bypassing firewall rule breaks:
    assert "Phase 1: not eligible. The API says: the zone is not eligible in phase 1" in text
    migration.locator("summary").click()  # the previous WAF, read-only
    package = migration.locator(".previous-package").first
    package.locator("table.previous-groups tbody tr").first.wait_for()
    package.locator("table.previous-groups tbody tr").first.get_by_role("button").click()
    package.locator(".previous-rule-list li").first.wait_for()
    screenshots(page, "security-waf-migration-eligible")
    migration.locator("summary").click()  # folded again for the next steps' screenshots

    migration.get_by_role("button", name="Review configuration").click()
    review = migration.get_by_role("heading", name="Review configuration")
    review.wait_for()
    assert "skip" in migration.locator(".migration-rules").inner_text()  # the bypass rule became a skip rule
    assert "Execute Cloudflare Managed Ruleset" in migration.locator(".migration-rules").inner_text()
    screenshots(page, "security-waf-migration-review")
    migration.get_by_role("button", name="Deploy", exact=True).click()
    page.get_by_role("status").filter(has_text="validation mode").wait_for()
    status = service.v4("GET", f"{zone}/waf_migration/status")
    assert (status["migration_state"], status["old_waf_status"], status["new_waf_status"]) == (
        "validation",
        "enabled",
        "enabled",
    )
    screenshots(page, "security-waf-migration-validation")

    migration.get_by_role("button", name="Ready to update").click()
    screenshots(page, "security-waf-migration-ready", phone=False)
    migration.get_by_role("button", name="Turn off previous version").click()
    page.get_by_role("status").filter(has_text="the migration finished").wait_for()
    status = service.v4("GET", f"{zone}/waf_migration/status")
    assert (status["migration_state"], status["old_waf_status"], status["new_waf_status"]) == (
        "complete",
        "disabled",
        "enabled",
    )
    assert "Migration state\ncomplete" in page.locator("section.migration").inner_text()
    assert page.locator("details.previous-waf").count() == 0  # the previous WAF is gone with the migration
    screenshots(page, "security-waf-migration-complete", phone=False)


def test_a_pro_zone_migrates_in_one_step(page: Any, service: EdgeplaneProcess) -> None:
    zone_id = new_zone(service, "migrate-pro.localhost", "pro")
    service.v4("PATCH", f"/zones/{zone_id}/settings/waf", json={"value": "on"})
    open_waf(page, service, "migrate-pro.localhost")
    # Deploying a managed ruleset beside the previous version of a Pro zone is the migration's to do: the API's
    # refusal is shown in the form that sent it.
    page.get_by_role("button", name="Deploy Cloudflare OWASP Core Ruleset").click()
    editor = page.get_by_role("form", name="Deploy Cloudflare OWASP Core Ruleset")
    editor.get_by_role("button", name="Deploy", exact=True).click()
    assert "(code 10226)" in editor.get_by_role("alert").inner_text()
    editor.get_by_role("button", name="Cancel").click()
    migration = open_migration(page)
    migration.get_by_role("button", name="Review configuration").click()
    migration.get_by_role("heading", name="Review configuration").wait_for()
    assert "turns the previous version off" in migration.inner_text()  # no validation mode below Enterprise
    migration.get_by_role("button", name="Deploy", exact=True).click()
    page.get_by_role("status").filter(has_text="the migration finished").wait_for()
    status = service.v4("GET", f"/zones/{zone_id}/waf_migration/status")
    assert (status["migration_state"], status["old_waf_status"], status["new_waf_status"]) == (
        "complete",
        "disabled",
        "enabled",
    )


def test_a_zone_with_uri_overrides_gets_the_apis_reason(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots
) -> None:
    zone_id = new_zone(service, "migrate-overrides.localhost", "pro")
    service.v4("POST", f"/zones/{zone_id}/firewall/waf/overrides", json={"urls": ["migrate-overrides.localhost/api/*"]})
    open_waf(page, service, "migrate-overrides.localhost")
    migration = open_migration(page)
    assert "Phase 2: not eligible. The API says: the zone has URI-based WAF overrides" in migration.inner_text()
    assert "(code 10221)" in migration.inner_text()
    assert migration.get_by_role("button", name="Review configuration").is_disabled()
    screenshots(page, "security-waf-migration-not-eligible", phone=False)


def test_a_zone_with_too_many_bypassing_firewall_rules_gets_the_migration_error(
    page: Any, service: EdgeplaneProcess
) -> None:
    zone_id = new_zone(service, "migrate-firewall.localhost", "business")
    bypasses = [
        {"action": "bypass", "products": ["waf"], "filter": {"expression": f"ip.src eq 192.0.2.{index % 250}"}}
        for index in range(201)
    ]
    service.v4("POST", f"/zones/{zone_id}/firewall/rules", json=bypasses)
    open_waf(page, service, "migrate-firewall.localhost")
    migration = open_migration(page)
    text = migration.inner_text()
    assert "Phase 2: this zone is eligible for the update." in text  # the check says yes; the configuration cannot
    assert "The configuration cannot be migrated: migration error:" in text
    assert "(code 10224)" in text
    assert migration.get_by_role("button", name="Review configuration").is_disabled()


@pytest.fixture
def no_custom_rules(service: EdgeplaneProcess) -> Iterator[None]:
    yield
    service.v4("PUT", CUSTOM_PHASE, json={"rules": []})


def test_custom_rules_added_edited_deleted_and_a_bad_expression_refused(
    page: Any, service: EdgeplaneProcess, screenshots: Screenshots, no_custom_rules: None
) -> None:
    open_waf(page, service)
    page.get_by_role("tab", name="Managed rules").focus()
    page.keyboard.press("ArrowRight")  # the tabs from the keyboard
    custom_tab = page.get_by_role("tab", name="Custom rules")
    page.get_by_role("button", name="Add custom rule").wait_for()
    assert custom_tab.get_attribute("aria-selected") == "true"
    assert custom_tab.evaluate("tab => tab === document.activeElement")
    page.get_by_role("button", name="Add custom rule").click()
    editor = page.get_by_role("form", name="Add custom rule")
    assert_in_first_screen(page, editor.get_by_role("button", name="Save"), "the form's Save")
    assert page.get_by_role("button", name="Add custom rule").is_hidden()  # the form is in place of the list
    editor.get_by_label("Rule name (description)").fill("admin paths")
    editor.get_by_label("Expression").fill('http.request.uri.path contains "/admin" and')
    editor.get_by_role("button", name="Save").click()
    error = editor.locator("#expression-error")
    error.wait_for()
    assert "(code 20002)" in error.inner_text()  # the API's words, at the field
    assert editor.get_by_label("Expression").get_attribute("aria-invalid") == "true"
    assert editor.get_by_label("Expression").evaluate("area => area === document.activeElement")
    screenshots(page, "security-waf-custom-error")

    editor.get_by_label("Expression").fill('http.request.uri.path contains "/admin"')
    editor.get_by_label("Action").select_option("log")
    editor.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved rule “admin paths”").wait_for()
    rules = service.v4("GET", CUSTOM_PHASE)["rules"]
    assert [(rule["description"], rule["expression"], rule["action"]) for rule in rules] == [
        ("admin paths", 'http.request.uri.path contains "/admin"', "log")
    ]
    page.get_by_role("button", name="Edit rule “admin paths”").click()
    editor = page.get_by_role("form", name="Edit rule “admin paths”")
    editor.get_by_label("Expression").fill("http.request.uri.path contains")  # PATCH refuses it the same way
    editor.get_by_role("button", name="Save").click()
    editor.locator("#expression-error").filter(has_text="(code 20002)").wait_for()
    editor.get_by_label("Expression").fill('http.request.uri.path contains "/admin"')
    editor.get_by_label("Action").select_option("block")
    editor.get_by_role("button", name="Save").click()
    page.get_by_role("status").filter(has_text="Saved").wait_for()
    page.locator("table.custom-rules").get_by_text("block", exact=True).wait_for()
    assert service.v4("GET", CUSTOM_PHASE)["rules"][0]["action"] == "block"
    assert page.get_by_role("button", name="Add custom rule").evaluate("button => button === document.activeElement")
    assert_in_first_screen(page, page.locator("table.custom-rules tbody tr").first, "the first custom rule")
    at_the_top(page)
    screenshots(page, "security-waf-custom", full_page=False)
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    page.set_viewport_size({"width": 1280, "height": 800})

    page.get_by_role("button", name="Delete rule “admin paths”").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    page.get_by_role("status").filter(has_text="Deleted rule “admin paths”").wait_for()
    assert service.v4("GET", CUSTOM_PHASE)["rules"] == []
