"""Rate limiting rules through ``edgeplane serve`` with two edge workers in front of anvil: what each rule lets
through, counted once for the node whatever worker a connection reaches; the 429 answer and a custom one; throttle
and mitigation timeout; a counting expression over the answer; a compute-unit budget from the gateway's cost table;
the records and metrics of what the rules did; and a flood of distinct keys in a small counter table.

Each request is a new connection, so the kernel spreads them over both workers' sockets; a rule counts only the
requests carrying its own ``x-test`` header value, so the tests of the module never share a counter. The counters'
windows are aligned to the machine's monotonic clock, which this process shares with the service, so a test that
expects an exact count starts far from a window's end (``fresh_window``)."""

from __future__ import annotations

import re
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from tests.support.anvil import AnvilNode
from tests.support.edgeplane import EdgeplaneProcess

pytestmark = pytest.mark.e2e

PHASE = "http_ratelimit"
PERIOD = 10
CHAIN_ID = {"jsonrpc": "2.0", "id": 7, "method": "eth_chainId", "params": []}
BLOCK_NUMBER = {"jsonrpc": "2.0", "id": 8, "method": "eth_blockNumber", "params": []}
FORBIDDEN = {"jsonrpc": "2.0", "id": 9, "method": "admin_peers", "params": []}


@pytest.fixture(scope="module")
def service(anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("ratelimit") / "data"
    data_dir.mkdir(parents=True)
    (data_dir / "edgeplane.toml").write_text("[gateway.costs.methods]\neth_blockNumber = { base = 7 }\n")
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}",), extra_args=("--edge-workers", "2")) as process:
        yield process


def rule(marker: str, characteristics: list[str], **ratelimit: Any) -> dict[str, Any]:
    """A rate limiting rule for the requests carrying ``x-test: <marker>``."""
    return {
        "ref": marker,
        "description": f"limit {marker}",
        "expression": f'any(http.request.headers["x-test"][*] == "{marker}")',
        "action": ratelimit.pop("action", "block"),
        **({"action_parameters": ratelimit.pop("action_parameters")} if "action_parameters" in ratelimit else {}),
        "ratelimit": {"characteristics": ["cf.colo.id", *characteristics], "period": PERIOD, **ratelimit},
    }


@pytest.fixture(scope="module")
def deployed(service: EdgeplaneProcess) -> dict[str, str]:
    """Every rule of the module in the zone's entrypoint, deployed once: the rule ids by marker."""
    rules = [
        rule("per-ip", ["ip.src"], requests_per_period=5, mitigation_timeout=0),
        rule("per-key", ['http.request.headers["x-api-key"]'], requests_per_period=4, mitigation_timeout=0),
        rule(
            "per-method-lookup",
            ['lookup_json_string(http.request.body.raw, "method")'],
            requests_per_period=3,
            mitigation_timeout=0,
        ),
        rule("per-method-field", ["edgeplane.jsonrpc.methods"], requests_per_period=3, mitigation_timeout=0),
        rule(
            "budget",
            ["ip.src"],
            score_per_period=30,
            score_response_header_name="edgeplane-rpc-cost",
            mitigation_timeout=0,
        ),
        rule(
            "custom",
            ["ip.src"],
            requests_per_period=2,
            mitigation_timeout=0,
            action_parameters={
                "response": {"status_code": 418, "content_type": "text/plain", "content": "slow down, teapot"}
            },
        ),
        rule("throttle", ["ip.src"], requests_per_period=2, mitigation_timeout=0),
        rule("timeout", ["ip.src"], requests_per_period=2, mitigation_timeout=60),
        rule(
            "forbidden-answers",
            ["ip.src"],
            requests_per_period=3,
            mitigation_timeout=0,
            counting_expression="http.response.code eq 403",
        ),
        rule("logged", ["ip.src"], requests_per_period=1, mitigation_timeout=0, action="log"),
        rule("to-origin", ["ip.src"], requests_per_period=2, mitigation_timeout=0, requests_to_origin=True),
    ]
    result = service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{PHASE}/entrypoint", json={"rules": rules})
    return {item["ref"]: item["id"] for item in result["rules"]}


def send(service: EdgeplaneProcess, marker: str, body: Any = CHAIN_ID, **headers: str) -> httpx.Response:
    return httpx.post(service.rpc_url(), json=body, headers={"x-test": marker, **headers}, timeout=30)


def fresh_window(seconds_needed: float = 4.0) -> None:
    """Waits until the current counting window has ``seconds_needed`` left (windows are aligned to the machine's
    monotonic clock, which the service reads too)."""
    period_ms = PERIOD * 1000
    left_ms = period_ms - (time.monotonic_ns() // 1_000_000) % period_ms
    if left_ms < seconds_needed * 1000:
        time.sleep(left_ms / 1000 + 0.05)


def limited(response: httpx.Response) -> bool:
    return response.status_code == 429


def let_through(service: EdgeplaneProcess, marker: str, count: int, body: Any = CHAIN_ID, **headers: str) -> int:
    return sum(not limited(send(service, marker, body, **headers)) for _ in range(count))


def test_one_address_gets_exactly_the_rate_across_two_workers(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    answers = [send(service, "per-ip") for _ in range(12)]
    assert [limited(answer) for answer in answers] == [False] * 5 + [True] * 7
    refused = answers[-1]
    body = refused.json()
    assert body["id"] == CHAIN_ID["id"]
    assert body["error"]["code"] == -32005
    assert body["error"]["data"]["ray_id"] == refused.headers["cf-ray"].split("-")[0]
    assert 1 <= int(refused.headers["retry-after"]) <= 2 * PERIOD
    assert body["error"]["data"]["retry_after_seconds"] == int(refused.headers["retry-after"])


def test_each_header_value_has_its_own_counter(service: EdgeplaneProcess, deployed: dict[str, str]) -> None:
    fresh_window()
    assert let_through(service, "per-key", 8, **{"x-api-key": "alpha"}) == 4
    assert let_through(service, "per-key", 8, **{"x-api-key": "beta"}) == 4
    assert let_through(service, "per-key", 2, **{"x-api-key": "alpha"}) == 0


def test_a_method_read_from_the_body_has_its_own_counter(service: EdgeplaneProcess, deployed: dict[str, str]) -> None:
    fresh_window()
    assert let_through(service, "per-method-lookup", 6, CHAIN_ID) == 3
    assert let_through(service, "per-method-lookup", 6, BLOCK_NUMBER) == 3


def test_the_jsonrpc_methods_field_counts_each_call_of_a_batch(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    batch = [dict(CHAIN_ID, id=index) for index in range(3)]
    assert not limited(send(service, "per-method-field", batch))  # three eth_chainId: the whole budget
    assert limited(send(service, "per-method-field", CHAIN_ID))
    assert let_through(service, "per-method-field", 5, BLOCK_NUMBER) == 3  # another method, its own counter


def test_a_compute_unit_budget_from_the_gateway_cost_table(service: EdgeplaneProcess, deployed: dict[str, str]) -> None:
    fresh_window()
    # eth_blockNumber costs 7 units in this service's table: a budget of 30 lets four through.
    assert let_through(service, "budget", 8, BLOCK_NUMBER) == 4


def test_a_custom_response(service: EdgeplaneProcess, deployed: dict[str, str]) -> None:
    fresh_window()
    answers = [send(service, "custom") for _ in range(3)]
    assert [answer.status_code for answer in answers[:2]] == [200, 200]
    assert answers[2].status_code == 418
    assert answers[2].text == "slow down, teapot"
    assert answers[2].headers["content-type"].startswith("text/plain")
    assert "retry-after" in answers[2].headers


def test_throttle_recovers_with_the_rate_and_a_mitigation_timeout_does_not(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    assert let_through(service, "throttle", 4) == 2
    assert let_through(service, "timeout", 4) == 2
    blocked = send(service, "timeout")
    assert limited(blocked)
    assert int(blocked.headers["retry-after"]) > PERIOD  # the block's time left, not the window's
    # The throttled key is let through again once the sliding estimate falls under the rate: within two periods.
    deadline = time.monotonic() + 2.5 * PERIOD
    while limited(send(service, "throttle")):
        assert time.monotonic() < deadline, "the throttled key was never let through again"
        time.sleep(0.5)
    assert limited(send(service, "timeout"))  # still within its 60 s


def test_a_counting_expression_counts_only_the_answers_it_names(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    assert let_through(service, "forbidden-answers", 5, CHAIN_ID) == 5  # answered 200: not counted
    forbidden = [send(service, "forbidden-answers", FORBIDDEN) for _ in range(3)]
    assert [answer.status_code for answer in forbidden] == [403, 403, 403]  # the allowlist's; each one counted
    assert limited(send(service, "forbidden-answers", CHAIN_ID))


def test_a_log_rule_lets_everything_through_and_records_it(service: EdgeplaneProcess, deployed: dict[str, str]) -> None:
    fresh_window()
    assert let_through(service, "logged", 3) == 3
    metrics = httpx.get(f"{service.api_url}/metrics", timeout=30).text
    rule_id = deployed["logged"]
    assert re.search(rf'edgeplane_ratelimit_actions_total\{{action="log",rule="{rule_id}"\}} [1-9]', metrics), metrics


def test_rate_limited_requests_are_security_events_and_metrics(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    answers = [send(service, "per-ip") for _ in range(8)]
    ray_ids = {answer.headers["cf-ray"].split("-")[0] for answer in answers if limited(answer)}
    assert ray_ids
    rule_id = deployed["per-ip"]
    deadline = time.monotonic() + 60
    while True:
        events = service.v4("GET", f"/zones/{{zone}}/security/events?rule_id={rule_id}&per_page=100")
        found = {event["RayID"]: event for event in events if event["RayID"] in ray_ids}
        if len(found) == len(ray_ids):
            break
        assert time.monotonic() < deadline, f"events not recorded: {events}"
        time.sleep(1)
    assert {event["Source"] for event in found.values()} == {"ratelimit"}
    assert {event["Action"] for event in found.values()} == {"block"}
    assert {event["JSONRPCMethod"] for event in found.values()} == {"eth_chainId"}  # from their http_requests
    analytics = service.v4("GET", "/zones/{zone}/analytics/requests")
    statuses = {series["key"]: series["total"] for series in analytics["series"]["status"]}
    assert statuses.get("429", 0) >= len(ray_ids), statuses
    metrics = httpx.get(f"{service.api_url}/metrics", timeout=30).text
    assert re.search(rf'edgeplane_ratelimit_actions_total\{{action="block",rule="{rule_id}"\}} [1-9]', metrics)
    assert re.search(r'edgeplane_ratelimit_counters\{kind="slots"\} 262144', metrics)


def test_a_flood_of_distinct_keys_neither_grows_memory_nor_lets_a_heavy_key_through(
    anvil: AnvilNode, tmp_path_factory: pytest.TempPathFactory
) -> None:
    """A node with a small counter table (1,024 counters) meets 3,000 one-off API keys, with a heavy key among them
    sending ten times its rate: the heavy key is still refused past its rate, the table evicts (and counts it), and
    the workers' memory does not grow with the keys."""
    data_dir = tmp_path_factory.mktemp("flood") / "data"
    data_dir.mkdir(parents=True)
    (data_dir / "edgeplane.toml").write_text("[ratelimit]\ncounter_slots = 1024\n")
    extra = ("--edge-workers", "2")
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={anvil.url}",), extra_args=extra) as service:
        flood_rule = rule("flood", ['http.request.headers["x-api-key"]'], requests_per_period=20, mitigation_timeout=0)
        flood_rule["ratelimit"]["period"] = 60
        service.v4("PUT", f"/zones/{{zone}}/rulesets/phases/{PHASE}/entrypoint", json={"rules": [flood_rule]})
        workers = service.child_pids("edge-worker")
        before = sum(_rss_kib(pid) for pid in workers)
        heavy_through = 0
        with httpx.Client(timeout=30) as client:
            for index in range(3000):
                client.post(service.rpc_url(), json=CHAIN_ID, headers={"x-test": "flood", "x-api-key": f"k{index}"})
                if index % 10 == 0:
                    answer = client.post(
                        service.rpc_url(), json=CHAIN_ID, headers={"x-test": "flood", "x-api-key": "heavy"}
                    )
                    heavy_through += answer.status_code == 200
        # 300 requests of the heavy key in well under two periods: at most twice its rate gets through.
        assert heavy_through <= 40, heavy_through
        after = sum(_rss_kib(pid) for pid in workers)
        assert after - before < 32 * 1024, (before, after)  # the table is fixed: 64 KiB here
        deadline = time.monotonic() + 30  # the workers publish the table's figures every 10 s
        while True:
            metrics = httpx.get(f"{service.api_url}/metrics", timeout=30).text
            evictions = re.search(r"^edgeplane_ratelimit_counter_evictions_total (\S+)$", metrics, re.M)
            live = re.search(r'^edgeplane_ratelimit_counters\{kind="live"\} (\S+)$', metrics, re.M)
            if evictions and live and float(evictions.group(1)) > 0:
                break
            assert time.monotonic() < deadline, metrics[-2000:]
            time.sleep(1)
        assert float(live.group(1)) <= 1024
        assert re.search(r'edgeplane_ratelimit_counters\{kind="slots"\} 1024', metrics)


def _rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    return 0


def test_requests_to_origin_counts_only_what_reached_a_node(
    service: EdgeplaneProcess, deployed: dict[str, str]
) -> None:
    fresh_window()
    refused = [send(service, "to-origin", FORBIDDEN) for _ in range(4)]  # the allowlist answers: no node asked
    assert [answer.status_code for answer in refused] == [403] * 4
    distinct = [
        {"jsonrpc": "2.0", "id": number, "method": "eth_getBalance", "params": [f"0x{number:040x}", "latest"]}
        for number in range(1, 4)
    ]
    answers = [send(service, "to-origin", body) for body in distinct]  # each a read no cache holds yet
    assert [answer.status_code for answer in answers[:2]] == [200, 200]
    assert limited(answers[2])
