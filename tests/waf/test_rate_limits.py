"""Rate limiting rules in the firewall: the phase's place between the custom and the managed rules, the keys each
characteristic gives, throttle and mitigation timeout, counting after the answer, and the gateway's compute units,
over a real counter table (``edgeplane.rate_counters``) with the time given explicitly."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.rate_counters import RateCounters
from edgeplane.rate_table import RateTable
from edgeplane.rules import RequestFields
from edgeplane.waf import firewall as firewall_module
from edgeplane.waf import rate_limits
from edgeplane.waf.events import firewall_event_records
from edgeplane.waf.firewall import Entrypoint, Firewall, Verdict, compile_firewall
from edgeplane.waf.rate_limit_spec import parse_rate_limit
from edgeplane.waf.rate_limits import PendingCount, compile_rate_limit

CUSTOM = "http_request_firewall_custom"
RATELIMIT = "http_ratelimit"
MANAGED = "http_request_firewall_managed"
CHAIN_ID: dict[str, Any] = {"jsonrpc": "2.0", "id": 1, "method": "eth_chainId", "params": []}


@pytest.fixture
def table() -> Iterator[RateTable]:
    counters = RateCounters.create(4096)
    yield counters.table
    counters.close()


class Clock:
    """The counters' time, set by the test (``rate_limits.now_ms`` is what the firewall reads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.ms = 1_000_000_000  # far from zero, at a window's start for every period
        monkeypatch.setattr(firewall_module, "now_ms", lambda: self.ms)


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    return Clock(monkeypatch)


def request(
    body: Any = CHAIN_ID, *, ip: str = "192.0.2.1", headers: tuple[tuple[bytes, bytes], ...] = ()
) -> RequestFields:
    return RequestFields.from_http(
        method="POST",
        scheme="http",
        host="rpc.example.com",
        raw_path="/v1/mainnet",
        query="",
        headers=[(b"content-type", b"application/json"), (b"user-agent", b"web3.py/7"), *headers],
        body=orjson.dumps(body),
        client_ip=ip,
    )


def limit_rule(
    characteristics: list[str] | None = None, *, action: str = "block", rule_id: str = "r1", **ratelimit: Any
) -> dict[str, Any]:
    ratelimit.setdefault("period", 10)
    ratelimit.setdefault("mitigation_timeout", 0)
    if "score_per_period" not in ratelimit:
        ratelimit.setdefault("requests_per_period", 3)
    return {
        "id": rule_id,
        "action": action,
        "expression": ratelimit.pop("expression", "true"),
        "ratelimit": {"characteristics": ["cf.colo.id", *(characteristics or ["ip.src"])], **ratelimit},
    }


def firewall(*rules: dict[str, Any], custom: list[dict[str, Any]] | None = None) -> Firewall:
    phases: dict[str, list[Entrypoint]] = {RATELIMIT: [Entrypoint(list(rules), "rs-limits")]}
    if custom:
        phases[CUSTOM] = [Entrypoint(custom, "rs-custom")]
    compiled = compile_firewall(phases)
    assert not compiled.problems, compiled.problems
    return compiled


def decisions(compiled: Firewall, table: RateTable, count: int, make: Any = request) -> list[bool]:
    """Whether each of ``count`` requests was refused."""
    return [compiled.evaluate(make(), counters=table).blocked for _ in range(count)]


def test_exactly_the_rate_is_let_through_then_429(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=3))
    verdicts = [compiled.evaluate(request(), counters=table) for _ in range(5)]
    assert [verdict.blocked for verdict in verdicts] == [False, False, False, True, True]
    refused = verdicts[-1]
    assert refused.rate_limited
    assert refused.status == 429
    assert refused.terminal is not None
    assert refused.terminal.source == "ratelimit"
    assert refused.terminal.phase == RATELIMIT
    assert 0 < refused.retry_after_ms <= 20_000  # the sliding estimate: up to two periods


def test_without_counters_the_rules_do_not_run(clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=1))
    assert not any(compiled.evaluate(request()).blocked for _ in range(5))


def test_each_address_has_its_own_counter_and_an_ipv6_client_its_64(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=2))
    assert decisions(compiled, table, 3, lambda: request(ip="192.0.2.1")) == [False, False, True]
    assert decisions(compiled, table, 3, lambda: request(ip="192.0.2.2")) == [False, False, True]
    assert decisions(compiled, table, 1, lambda: request(ip="2001:db8::1")) == [False]
    assert decisions(compiled, table, 2, lambda: request(ip="2001:db8::ffff:2")) == [False, True]  # the same /64
    assert decisions(compiled, table, 1, lambda: request(ip="2001:db8:0:1::1")) == [False]


def test_a_header_value_key(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(['http.request.headers["x-api-key"]'], requests_per_period=1))
    alpha = lambda: request(headers=((b"x-api-key", b"alpha"),))  # noqa: E731
    beta = lambda: request(headers=((b"x-api-key", b"beta"),))  # noqa: E731
    assert decisions(compiled, table, 2, alpha) == [False, True]
    assert decisions(compiled, table, 2, beta) == [False, True]


def test_methods_fan_out_per_call_of_a_batch(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(["edgeplane.jsonrpc.methods"], requests_per_period=3))
    batch = [dict(CHAIN_ID, id=index) for index in range(3)]
    assert not compiled.evaluate(request(batch), counters=table).blocked
    assert compiled.evaluate(request(), counters=table).blocked
    number = dict(CHAIN_ID, method="eth_blockNumber")
    assert decisions(compiled, table, 4, lambda: request(number)) == [False, False, False, True]
    mixed = [number, CHAIN_ID]  # one method over its rate refuses the batch
    assert compiled.evaluate(request(mixed), counters=table).blocked


def test_lookup_json_string_of_the_method(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(['lookup_json_string(http.request.body.raw, "method")'], requests_per_period=1))
    assert decisions(compiled, table, 2) == [False, True]
    other = dict(CHAIN_ID, method="net_version")
    assert decisions(compiled, table, 2, lambda: request(other)) == [False, True]
    assert decisions(compiled, table, 1, lambda: request([CHAIN_ID])) == [False]  # a batch has no top member: ""


def test_the_sliding_window_lets_the_rate_through_again(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=4))
    assert decisions(compiled, table, 5) == [False] * 4 + [True]
    clock.ms += 10_000  # the next window: the previous one weighs fully at its start
    assert decisions(compiled, table, 1) == [True]
    clock.ms += 5_000  # half way: the previous window weighs 2
    assert decisions(compiled, table, 3) == [False, False, True]
    clock.ms += 20_000  # two windows later: forgotten
    assert decisions(compiled, table, 4) == [False] * 4


def test_a_mitigation_timeout_blocks_for_its_length(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=2, mitigation_timeout=60))
    assert decisions(compiled, table, 3) == [False, False, True]
    refused = compiled.evaluate(request(), counters=table)
    assert 50_000 < refused.retry_after_ms <= 60_000
    clock.ms += 30_000  # the rate alone would let it through by now
    assert decisions(compiled, table, 1) == [True]
    clock.ms += 31_000
    assert decisions(compiled, table, 1) == [False]


def test_a_log_rule_records_and_lets_through(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=1, action="log"))
    verdicts = [compiled.evaluate(request(), counters=table) for _ in range(3)]
    assert not any(verdict.blocked for verdict in verdicts)
    assert [len(verdict.matches) for verdict in verdicts] == [0, 1, 1]
    assert verdicts[1].matches[0].source == "ratelimit"


def test_the_phase_runs_after_custom_rules_and_a_skip_can_pass_it(table: RateTable, clock: Clock) -> None:
    skip = {
        "id": "s",
        "action": "skip",
        "expression": "ip.src eq 192.0.2.9",
        "action_parameters": {"phases": [RATELIMIT]},
    }
    block = {"id": "b", "action": "block", "expression": "ip.src eq 192.0.2.8"}
    compiled = firewall(limit_rule(requests_per_period=1), custom=[skip, block])
    assert decisions(compiled, table, 3, lambda: request(ip="192.0.2.9")) == [False] * 3
    custom = compiled.evaluate(request(ip="192.0.2.8"), counters=table)
    assert custom.blocked
    assert custom.terminal is not None
    assert custom.terminal.source == "firewallCustom"
    assert custom.status == 403
    assert decisions(compiled, table, 1, lambda: request(ip="192.0.2.8")) == [True]
    assert decisions(compiled, table, 2, lambda: request(ip="192.0.2.7")) == [False, True]


def test_a_custom_response(table: RateTable, clock: Clock) -> None:
    document = limit_rule(requests_per_period=1)
    document["action_parameters"] = {
        "response": {"status_code": 418, "content": "teapot", "content_type": "text/plain"}
    }
    compiled = firewall(document)
    compiled.evaluate(request(), counters=table)
    refused = compiled.evaluate(request(), counters=table)
    assert refused.status == 418
    assert refused.response is not None
    assert refused.response.content == b"teapot"


def settle(verdict: Verdict, table: RateTable, status: int, now: int) -> None:
    """What the edge does once the answer is known."""
    for pending in verdict.pending:
        pending.request.set_response(status, ())
        pending.limit.count(table, pending, 0, now)


def test_a_counting_expression_counts_by_the_answer(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=2, counting_expression="http.response.code eq 403"))
    for status in (200, 200, 200, 403, 403):
        verdict = compiled.evaluate(request(), counters=table)
        assert not verdict.blocked
        assert len(verdict.pending) == 1
        assert isinstance(verdict.pending[0], PendingCount)
        settle(verdict, table, status, clock.ms)
    refused = compiled.evaluate(request(), counters=table)
    assert refused.blocked
    assert not refused.pending


def test_the_gateway_cost_is_a_compute_unit_budget(table: RateTable, clock: Clock) -> None:
    compiled = firewall(
        limit_rule(score_per_period=100, score_response_header_name="edgeplane-rpc-cost", requests_per_period=None)
    )
    costly = request()
    costly.jsonrpc_reader = lambda fields: _facts(cost=30)
    assert not compiled.evaluate(costly, counters=table).blocked
    spent = [compiled.evaluate(_costing(30), counters=table).blocked for _ in range(3)]
    assert spent == [False, False, True]  # 30 + 30 + 30 = 90; a fourth 30 would be 120 > 100
    assert not compiled.evaluate(_costing(10), counters=table).blocked  # exactly the budget


def _facts(cost: int) -> Any:
    from edgeplane.rules.jsonrpc_facts import JsonRpcFacts

    return JsonRpcFacts(methods=("eth_call",), batch=False, batch_size=1, network="mainnet", addresses=(), cost=cost)


def _costing(cost: int) -> RequestFields:
    fields = request()
    fields.jsonrpc_reader = lambda _fields: _facts(cost)
    return fields


def test_a_stored_rule_that_is_not_valid_is_left_out() -> None:
    bad = limit_rule(period=7)
    compiled = compile_firewall({RATELIMIT: [Entrypoint([bad], "rs")]})
    assert compiled.problems
    assert "period" in compiled.problems[0]
    assert compiled.empty


def test_the_counter_of_a_rule_is_stable_and_its_own() -> None:
    spec = parse_rate_limit(
        {"characteristics": ["cf.colo.id", "ip.src"], "period": 60, "requests_per_period": 5, "mitigation_timeout": 0},
        "block",
    )
    first = compile_rate_limit(spec, ruleset_id="rs", rule_id="a")
    assert compile_rate_limit(spec, ruleset_id="rs", rule_id="a").counter == first.counter
    assert compile_rate_limit(spec, ruleset_id="rs", rule_id="b").counter != first.counter


def test_a_rate_limited_request_is_a_firewall_event(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(requests_per_period=1))
    compiled.evaluate(request(), counters=table)
    refused = compiled.evaluate(request(), counters=table)
    (event,) = firewall_event_records(refused, {"RayID": "ab"}, datetime_ns=1, edge_status=429)
    assert event["Source"] == "ratelimit"
    assert event["Action"] == "block"
    assert event["RuleID"] == "r1"


@settings(max_examples=60, deadline=None)
@given(st.lists(st.sampled_from(["192.0.2.1", "192.0.2.2", "2001:db8::1"]), min_size=1, max_size=40))
def test_no_key_gets_more_than_its_rate_in_a_window(addresses: list[str]) -> None:
    counters = RateCounters.create(4096)
    try:
        spec = parse_rate_limit(
            {
                "characteristics": ["cf.colo.id", "ip.src"],
                "period": 10,
                "requests_per_period": 3,
                "mitigation_timeout": 0,
            },
            "block",
        )
        limit = compile_rate_limit(spec, ruleset_id="rs", rule_id="p")
        allowed: dict[str, int] = {}
        for address in addresses:
            wait = limit.decide(counters.table, request(ip=address), 1_000_000_000, [])
            if not wait:
                allowed[address] = allowed.get(address, 0) + 1
        for address in set(addresses):
            assert allowed.get(address, 0) == min(3, addresses.count(address))
    finally:
        counters.close()


@pytest.mark.parametrize(
    ("value", "score"),
    [(b"7", 7), (b" 12 ", 12), (b"1000000", 1_000_000), (b"0", 0), (b"1000001", 0), (b"-3", 0), (b"x", 0)],
)
def test_an_origin_score_header_is_read_in_its_bounds(value: bytes, score: int) -> None:
    spec = parse_rate_limit(
        {
            "characteristics": ["cf.colo.id", "ip.src"],
            "period": 60,
            "score_per_period": 100,
            "score_response_header_name": "X-Score",
            "mitigation_timeout": 0,
        },
        "block",
    )
    limit = compile_rate_limit(spec, ruleset_id="rs", rule_id="s")
    assert limit.counts_after_answer
    assert limit.at_once is None
    assert rate_limits.origin_score(limit, [(b"content-type", b"text/plain"), (b"x-score", value)]) == score
    assert rate_limits.origin_score(limit, []) == 0


def test_an_origin_score_is_counted_after_the_answer(table: RateTable, clock: Clock) -> None:
    compiled = firewall(limit_rule(score_per_period=10, score_response_header_name="x-score", requests_per_period=None))
    for _ in range(2):
        verdict = compiled.evaluate(request(), counters=table)
        assert not verdict.blocked
        (pending,) = verdict.pending
        pending.request.set_response(200, [(b"x-score", b"5")])
        pending.limit.count(table, pending, 5, clock.ms)
    assert compiled.evaluate(request(), counters=table).blocked  # 10 of 10 spent


def test_a_custom_response_without_a_status_is_429(table: RateTable, clock: Clock) -> None:
    document = limit_rule(requests_per_period=1)
    document["action_parameters"] = {"response": {"content": "slow", "content_type": "text/plain"}}
    compiled = firewall(document)
    compiled.evaluate(request(), counters=table)
    assert compiled.evaluate(request(), counters=table).status == 429


def test_an_account_entrypoint_executes_a_rate_limiting_ruleset(table: RateTable, clock: Clock) -> None:
    execute = {"id": "x", "action": "execute", "expression": "true", "action_parameters": {"id": "rs-account"}}
    account = [limit_rule(requests_per_period=2, rule_id="in-ruleset")]
    compiled = compile_firewall({RATELIMIT: [Entrypoint([execute], "rs-root")]}, rulesets={"rs-account": account})
    assert not compiled.problems, compiled.problems
    verdicts = [compiled.evaluate(request(), counters=table) for _ in range(3)]
    assert [verdict.blocked for verdict in verdicts] == [False, False, True]
    terminal = verdicts[-1].terminal
    assert terminal is not None
    assert (terminal.rule_id, terminal.ruleset_id, terminal.source) == ("in-ruleset", "rs-account", "ratelimit")
