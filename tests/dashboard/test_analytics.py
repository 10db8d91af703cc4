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
from tests.support.anvil import AnvilNode, AnvilNotInstalled
from tests.support.browser import PHONE, Screenshots
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
    label = methods.get_by_role("img").get_attribute("aria-label") or ""
    assert "eth_chainId" in label
    assert "eth_blockNumber 2 requests" in label
    errors = main.get_by_role("figure", name="Errors by code")
    # The blocked request's answer is the firewall's JSON-RPC error, and its record says so.
    assert "JSON-RPC -32003" in (errors.get_by_role("img").get_attribute("aria-label") or "")
    assert main.get_by_role("figure", name="Upstream time").get_by_role("img").is_visible()
    assert main.locator(".totals .total").filter(has_text="Requests").locator("dd").inner_text() == "7"

    # Another range: the page asks again, and still shows the requests.
    page.get_by_label("Time range").select_option(label="Last 30 minutes")
    main.get_by_text("in buckets of 30 s").wait_for()
    assert "mainnet" in (network.get_by_role("img").get_attribute("aria-label") or "")

    # Every chart's numbers as a table, behind its toggle.
    methods.get_by_role("button", name="Show table").click()
    assert methods.get_by_role("button", name="Hide table").get_attribute("aria-expanded") == "true"
    table = methods.get_by_role("table")
    assert table.get_by_role("row", name="eth_chainId").is_visible()
    screenshots(page, "analytics")


def test_the_blocked_request_appears_in_security_events(
    page: Any, service: EdgeplaneProcess, traffic: dict[str, Any], screenshots: Screenshots
) -> None:
    rule = traffic["rule"]
    sign_in_with_password(page, service)
    open_page(page, "Events", "Security events")
    main = page.locator("main")
    events = main.get_by_role("table", name="Security events of localhost, newest first")
    row = events.get_by_role("row").filter(has_text=rule["id"])
    row.wait_for()
    assert "block" in row.inner_text()
    chart = main.get_by_role("figure", name="Events over time")
    assert "block 1 events, log 1 events" in (chart.get_by_role("img").get_attribute("aria-label") or "")

    # The filters narrow the log; one that matches nothing says so.
    filters = main.get_by_role("group", name="Filters")
    filters.get_by_label("Action", exact=True).fill("block")
    filters.get_by_label("Rule ID", exact=True).fill(rule["id"])
    filters.get_by_label("Ruleset ID", exact=True).fill(traffic["ruleset_id"])
    filters.get_by_label("Client IP", exact=True).fill("127.0.0.1")
    filters.get_by_label("Path", exact=True).fill("/v1/mainnet")
    filters.get_by_role("button", name="Apply filters").click()
    main.get_by_role("status").filter(has_text="1 event").wait_for()
    row.wait_for()
    # The JSON-RPC method is the event's request's: the blocked one asked eth_chainId, the logged one eth_blockNumber.
    filters.get_by_label("JSON-RPC method", exact=True).fill("eth_blockNumber")
    filters.get_by_role("button", name="Apply filters").click()
    main.get_by_text("No events match in this range.").wait_for()
    for name in ("Action", "Rule ID"):
        filters.get_by_label(name, exact=True).fill("")
    filters.get_by_role("button", name="Apply filters").click()
    events.get_by_role("row").filter(has_text=traffic["log_rule"]["id"]).wait_for()
    assert events.get_by_role("row").count() == 2  # the head and the logged event
    filters.get_by_label("JSON-RPC method", exact=True).fill("")
    filters.get_by_label("Action", exact=True).fill("block")
    filters.get_by_role("button", name="Apply filters").click()
    row.wait_for()

    # The detail: the matched rule, its ruleset, the action.
    row.get_by_role("button", name="Details").click()
    detail = main.locator("#event-detail")
    detail.get_by_role("heading", name=f"Event {traffic['ray']}").wait_for()
    text = detail.inner_text()
    assert rule["id"] in text
    assert traffic["ruleset_id"] in text
    assert "no test bots" in text
    assert "WAF attack score" in text
    assert detail.evaluate("element => element === document.activeElement")
    screenshots(page, "security-events")
    page.set_viewport_size(PHONE)
    assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")  # nothing runs off the width


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
