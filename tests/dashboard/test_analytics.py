"""Analytics and Security → Events in a real browser: requests sent through the edge (JSON-RPC calls to an anvil
node, an error, and one a custom rule blocks) appear in the Analytics charts and in the security events, with the
blocked request's event detail naming the rule that matched."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import httpx
import pytest

from tests.dashboard.conftest import sign_in_with_password
from tests.dashboard.first_screen import (
    assert_in_first_screen,
    assert_nothing_runs_off_the_width,
    assert_starts_in_first_screen,
    at_the_top,
    lines_of,
)
from tests.support.anvil import AnvilNode, AnvilNotInstalled
from tests.support.browser import DESKTOP, PHONE, Screenshots
from tests.support.edgeplane import EdgeplaneProcess

BOT = "analytics-test-bot/1.0"


@pytest.fixture(scope="module")
def service(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    """An edgeplane of this module's own, in front of an anvil node, so that its requests have an upstream time."""
    try:
        node = AnvilNode().start()
    except AnvilNotInstalled as missing:
        pytest.skip(str(missing))
    try:
        data_dir = tmp_path_factory.mktemp("dashboard-analytics") / "data"
        with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={node.url}",)) as process:
            yield process
    finally:
        node.stop()


def eventually(check: Callable[[], Any], seconds: float = 30.0) -> Any:
    deadline = time.monotonic() + seconds
    while not (found := check()):
        assert time.monotonic() < deadline, "the records did not arrive"
        time.sleep(0.25)
    return found


def last_hour() -> str:
    now = datetime.now(UTC)
    text = lambda moment: moment.strftime("%Y-%m-%dT%H:%M:%SZ")  # noqa: E731
    return f"since={text(now - timedelta(hours=1))}&until={text(now + timedelta(minutes=1))}"


@pytest.fixture(scope="module")
def traffic(service: EdgeplaneProcess) -> dict[str, Any]:
    """Requests through the edge: calls that succeed, one that fails, and one blocked by a custom rule; waits until
    the read endpoints hold them all. Returns the blocking rule and its ruleset."""
    entrypoint = service.v4(
        "PUT",
        "/zones/{zone}/rulesets/phases/http_request_firewall_custom/entrypoint",
        json={
            "rules": [
                {
                    "action": "block",
                    # Naming the attack score has the request scored: the event's detail shows the scores.
                    "expression": f'http.user_agent eq "{BOT}" and cf.waf.score ge 1',
                    "description": "no test bots",
                },
                {
                    "action": "log",
                    "expression": 'any(http.request.headers["x-audit"][*] eq "analytics-test")',
                    "description": "audited calls",
                },
            ]
        },
    )
    with httpx.Client(timeout=30) as client:
        calls = [("eth_chainId", []), ("eth_chainId", []), ("eth_blockNumber", []), ("eth_gasPrice", [])]
        calls.append(("eth_getBalance", ["not an address", "latest"]))  # the node answers an error
        for method, params in calls:
            client.post(service.rpc_url(), json={"jsonrpc": "2.0", "id": 1, "method": method, "params": params})
        audited = client.post(
            service.rpc_url(),
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []},
            headers={"x-audit": "analytics-test"},
        )
        assert audited.status_code == 200
        blocked = client.post(
            service.rpc_url(),
            json={"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []},
            headers={"user-agent": BOT},
        )
    assert blocked.status_code == 403
    eventually(
        lambda: service.v4("GET", f"/zones/{{zone}}/analytics/requests?{last_hour()}")["totals"]["requests"] >= 7
    )
    eventually(lambda: len(service.v4("GET", f"/zones/{{zone}}/security/events?{last_hour()}")) >= 2)
    return {
        "rule": entrypoint["rules"][0],
        "log_rule": entrypoint["rules"][1],
        "ruleset_id": entrypoint["id"],
        "ray": blocked.headers["cf-ray"].split("-")[0],
    }


def open_page(page: Any, link: str, heading: str) -> Any:
    nav = page.get_by_role("navigation", name="Main")
    nav.get_by_role("link", name=link, exact=True).click()
    title = page.get_by_role("heading", name=heading, level=1)
    title.wait_for()
    assert title.evaluate("heading => heading === document.activeElement")  # focus follows the page
    assert nav.get_by_role("link", name=link, exact=True).get_attribute("aria-current") == "page"
    return title


def figure_of(total: Any) -> str:
    return str(total.locator("dd").first.inner_text())


def test_requests_through_the_edge_appear_in_analytics(
    page: Any, service: EdgeplaneProcess, traffic: dict[str, Any], screenshots: Screenshots
) -> None:
    sign_in_with_password(page, service)
    open_page(page, "Analytics", "Analytics")
    main = page.locator("main")
    network = main.get_by_role("figure", name="Requests by network")
    network.get_by_role("img").wait_for()
    assert "mainnet" in (network.get_by_role("img").get_attribute("aria-label") or "")
    methods = main.get_by_role("figure", name="Top JSON-RPC methods")
    label = methods.get_by_role("list").get_attribute("aria-label") or ""
    assert "eth_chainId" in label
    assert "eth_blockNumber 2 requests" in label
    errors = main.get_by_role("figure", name="Errors by code")
    # The blocked request's answer is the firewall's JSON-RPC error, and its record says so.
    assert "JSON-RPC -32003" in (errors.get_by_role("img").get_attribute("aria-label") or "")
    assert main.get_by_role("figure", name="Upstream time").get_by_role("img").is_visible()

    # First: the totals as one row of figures, then the requests over time across the width, then a grid.
    answered = service.v4("GET", f"/zones/{{zone}}/analytics/requests?{last_hour()}")["totals"]
    totals = main.locator(".totals .total")
    names = [total.locator("dt").inner_text() for total in totals.all()]
    assert names == ["Requests", "JSON-RPC calls", "Errors", "Upstream p50", "Upstream p99", "Cache hit ratio"]
    assert figure_of(totals.nth(0)) == "7"
    assert figure_of(totals.nth(2)) == "2"
    assert totals.nth(2).locator(".total-note").inner_text() == f"{round(100 * 2 / 7)}% of requests"
    cacheable = answered["cache_hits"] + answered["cache_misses"]
    assert cacheable > 0  # the repeated eth_chainId went through the cache
    assert figure_of(totals.nth(5)) == f"{round(100 * answered['cache_hits'] / cacheable)}%"
    assert totals.nth(5).locator(".total-note").inner_text() == f"{answered['cache_hits']} of {cacheable} cacheable"
    boxes = [assert_in_first_screen(page, total, f"the total {name}") for total, name in zip(totals.all(), names)]
    assert len({round(box["y"]) for box in boxes}) == 1  # one row
    chart = assert_in_first_screen(page, network, "the requests over time")
    assert chart["width"] > 0.9 * page.locator("main .analytics").bounding_box()["width"]
    assert_in_first_screen(page, page.get_by_label("Time range"), "the time range")
    grid = main.locator(".charts > figure")
    first, second = grid.nth(0).bounding_box(), grid.nth(1).bounding_box()
    assert first["y"] == second["y"]  # side by side
    assert second["x"] > first["x"] + first["width"]
    at_the_top(page)
    screenshots(page, "analytics", full_page=False)

    # A method of the top methods narrows the page to it; its chip removes the filter.
    methods.get_by_role("button", name="Show eth_chainId only").click()
    chip = main.locator(".chip").filter(has_text="JSON-RPC method: eth_chainId")
    chip.wait_for()
    narrowed = service.v4("GET", f"/zones/{{zone}}/analytics/requests?{last_hour()}&method=eth_chainId")["totals"]
    assert narrowed["requests"] == 3  # two answered, one blocked (its method read from the body)
    main.locator(".totals .total").first.locator("dd").filter(has_text="3").wait_for()
    assert "eth_chainId 3 requests" in (
        main.get_by_role("figure", name="Requests by JSON-RPC method").get_by_role("img").get_attribute("aria-label")
        or ""
    )
    assert "mainnet 3 requests" in (network.get_by_role("img").get_attribute("aria-label") or "")
    removal = chip.get_by_role("button", name="Remove the filter JSON-RPC method: eth_chainId")
    assert removal.evaluate("button => button === document.activeElement")  # the focus on what now applies
    main.get_by_role("status").filter(has_text="Showing the requests of eth_chainId only").wait_for()
    assert_in_first_screen(page, chip, "the method's chip")
    at_the_top(page)
    screenshots(page, "analytics-method", phone=False, full_page=False)
    removal.click()
    main.locator(".totals .total").first.locator("dd").filter(has_text="7").wait_for()
    assert main.locator(".chip").count() == 0

    # Another range: the page asks again, and still shows the requests.
    page.get_by_label("Time range").select_option(label="Last 30 minutes")
    main.get_by_text("in buckets of 30 s").wait_for()
    assert "mainnet" in (network.get_by_role("img").get_attribute("aria-label") or "")

    # Every chart's numbers as a table, behind its toggle.
    methods.get_by_role("button", name="Show table").click()
    assert methods.get_by_role("button", name="Hide table").get_attribute("aria-expanded") == "true"
    table = methods.get_by_role("table")
    assert table.get_by_role("row", name="eth_chainId").is_visible()
    screenshots(page, "analytics-all")
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    assert_in_first_screen(page, main.locator(".totals"), "the totals at phone width")


def add_filter(filters: Any, field: str, value: str) -> None:
    filters.get_by_label("Filter", exact=True).select_option(label=field)
    filters.get_by_label("Value", exact=True).fill(value)
    filters.get_by_role("button", name="Add filter").click()
    filters.locator(".chip").filter(has_text=f"{field}: {value}").wait_for()


def remove_filter(filters: Any, field: str, value: str) -> None:
    filters.get_by_role("button", name=f"Remove the filter {field}: {value}").click()


def test_the_blocked_request_appears_in_security_events(
    page: Any, service: EdgeplaneProcess, traffic: dict[str, Any], screenshots: Screenshots
) -> None:
    rule = traffic["rule"]
    sign_in_with_password(page, service)
    open_page(page, "Events", "Security events")
    main = page.locator("main")
    events = main.get_by_role("table", name="Security events of localhost, newest first")
    row = events.locator("tr.event-row").filter(has_text=rule["id"])
    row.wait_for()
    assert "block" in row.inner_text()
    chart = main.get_by_role("figure", name="Events over time")
    assert "block 1 events, log 1 events" in (chart.get_by_role("img").get_attribute("aria-label") or "")

    # As the page opens: the range, the filter bar, the chart and the first events in the first screen, and at phone
    # width the log as cards, the chart and the first card still first, nothing off the width.
    newest = events.locator("tr.event-row").first
    assert_in_first_screen(page, page.get_by_label("Time range"), "the time range")
    assert_in_first_screen(page, main.get_by_role("group", name="Filters"), "the filter bar")
    assert_in_first_screen(page, chart, "the events over time")
    assert_in_first_screen(page, newest, "the newest event")
    assert_in_first_screen(page, events.locator("tr.event-row").nth(1), "the next event")
    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    assert events.locator("thead").is_hidden()
    assert newest.evaluate("row => getComputedStyle(row).display") == "block"  # a card
    assert_in_first_screen(page, page.get_by_label("Time range"), "the time range at phone width")
    assert_in_first_screen(page, chart, "the events over time at phone width")
    assert_starts_in_first_screen(page, newest, "the newest event at phone width")
    page.set_viewport_size(DESKTOP)

    # The filters are added one by one, each a chip; one that matches nothing says so.
    filters = main.get_by_role("group", name="Filters")
    assert filters.get_by_label("Value", exact=True).get_attribute("aria-describedby") == "filter-value-hint"
    add_filter(filters, "Action", "block")
    add_filter(filters, "Rule ID", rule["id"])
    add_filter(filters, "Ruleset ID", traffic["ruleset_id"])
    add_filter(filters, "Client IP", "127.0.0.1")
    add_filter(filters, "Path", "/v1/mainnet")
    main.get_by_role("status").filter(has_text="1 event").wait_for()
    row.wait_for()
    assert events.get_by_role("row").count() == 2  # the head and the blocked event

    # With five filters applied, the first screen still holds the range, the filters, the chart and the event.
    at_the_top(page)
    screenshots(page, "security-events", full_page=False)
    assert_in_first_screen(page, page.get_by_label("Time range"), "the time range")
    assert_in_first_screen(page, filters, "the filter bar")
    assert lines_of(filters) <= 2
    assert_in_first_screen(page, chart, "the events over time")
    assert_in_first_screen(page, row, "the first event")

    # The JSON-RPC method is the event's request's: the blocked one asked eth_chainId, the logged one eth_blockNumber.
    add_filter(filters, "JSON-RPC method", "eth_blockNumber")
    main.get_by_text("No events match in this range.").wait_for()
    remove_filter(filters, "Action", "block")
    # The focus stays in the bar: on the chip that took the removed one's place.
    assert filters.get_by_role("button", name=f"Remove the filter Rule ID: {rule['id']}").evaluate(
        "button => button === document.activeElement"
    )
    remove_filter(filters, "Rule ID", rule["id"])
    events.get_by_role("row").filter(has_text=traffic["log_rule"]["id"]).wait_for()
    assert events.get_by_role("row").count() == 2  # the head and the logged event
    remove_filter(filters, "JSON-RPC method", "eth_blockNumber")
    add_filter(filters, "Action", "block")
    row.wait_for()
    main.get_by_role("status").filter(has_text="1 event").wait_for()

    # The detail opens under its row: the matched rule, its ruleset, the action.
    details = row.get_by_role("button", name="Details")
    details.click()
    detail = main.locator("#event-detail")
    detail.get_by_role("heading", name=f"Event {traffic['ray']}").wait_for()
    assert details.get_attribute("aria-expanded") == "true"
    text = detail.inner_text()
    assert rule["id"] in text
    assert traffic["ruleset_id"] in text
    assert "no test bots" in text
    assert "WAF attack score" in text
    assert detail.evaluate("element => element === document.activeElement")
    assert row.evaluate("row => row.nextElementSibling.contains(document.getElementById('event-detail'))")
    screenshots(page, "security-events-detail", phone=False)

    page.set_viewport_size(PHONE)
    assert_nothing_runs_off_the_width(page)
    details.click()  # folded again
    assert details.get_attribute("aria-expanded") == "false"
    assert main.locator("#event-detail").count() == 0


def test_a_caller_without_analytics_read_sees_the_refusal(page: Any, service: EdgeplaneProcess) -> None:
    zone = service.credentials["zone_id"]
    made = service.v4(
        "POST",
        "/user/tokens",
        json={
            "name": "logs only",
            "policies": [
                {
                    "effect": "allow",
                    "resources": {f"com.cloudflare.api.account.zone.{zone}": "*"},
                    "permission_groups": [{"name": "Logs Read"}],
                }
            ],
        },
    )
    page.get_by_label("API token", exact=True).fill(made["value"])
    page.get_by_role("button", name="Sign in with token").click()
    page.get_by_role("heading", level=1).first.wait_for()
    for link, heading in (("Analytics", "Analytics"), ("Events", "Security events")):
        open_page(page, link, heading)
        page.locator("main").get_by_role("alert").filter(has_text="code 10000").wait_for()
