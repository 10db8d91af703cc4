"""The cost table: edgeplane's defaults, the operator's overrides, and the methods priced by their blocks, for
parameters of every shape (hex and decimal numbers, tags with and without a known head, hostile values)."""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from pydantic import ValidationError

from edgeplane.config import MethodCostSettings, Settings
from edgeplane.gateway.method_costs import MethodCost, MethodCosts

DEFAULTS = MethodCosts.from_settings()
HEAD = 1_000_000


def get_logs(**query: Any) -> list[Any]:
    return [query]


@pytest.mark.parametrize(
    ("method", "cost"),
    [
        ("eth_blockNumber", 1),
        ("eth_chainId", 1),
        ("eth_getBalance", 5),
        ("eth_call", 20),
        ("eth_estimateGas", 40),
        ("eth_sendRawTransaction", 50),
        ("trace_block", 300),  # "trace_*"
        ("trace_replayTransaction", 300),
        ("debug_traceTransaction", 1000),  # "debug_*"
        ("debug_", 1000),
        ("eth_somethingNew", 10),  # the default
        ("", 10),
        ("debug", 10),  # not the prefix "debug_"
    ],
)
def test_default_costs(method: str, cost: int) -> None:
    assert DEFAULTS.cost(method, [], HEAD) == cost


def test_cheap_reads_cost_less_than_calls_less_than_traces_less_than_debug() -> None:
    cheap = max(DEFAULTS.cost(method, [], HEAD) for method in ("eth_blockNumber", "eth_chainId", "eth_gasPrice"))
    assert cheap <= 5 < DEFAULTS.cost("eth_call", [], HEAD) < DEFAULTS.cost("eth_estimateGas", [], HEAD)
    assert DEFAULTS.cost("eth_estimateGas", [], HEAD) < DEFAULTS.cost("trace_block", [], HEAD)
    assert DEFAULTS.cost("trace_block", [], HEAD) < DEFAULTS.cost("debug_traceCall", [], HEAD)


@pytest.mark.parametrize(
    ("params", "head", "cost"),
    [
        (get_logs(fromBlock="0x10", toBlock="0x19"), None, 20 + 10),  # both ends counted
        (get_logs(fromBlock="0x10", toBlock="0x10"), None, 21),
        (get_logs(fromBlock=16, toBlock=25), None, 30),  # JSON numbers
        (get_logs(fromBlock="16", toBlock="25"), None, 30),  # decimal strings
        (get_logs(fromBlock="0xA", toBlock="0xa"), None, 21),
        (get_logs(fromBlock="latest", toBlock="latest"), None, 21),  # no concrete numbers: one block
        (get_logs(), None, 21),  # both bounds default to latest
        (get_logs(fromBlock="pending", toBlock="pending"), None, 21),
        (get_logs(blockHash="0x" + "ab" * 32), None, 21),
        (get_logs(fromBlock=hex(HEAD - 99)), HEAD, 120),  # to the head: 100 blocks
        (get_logs(fromBlock=hex(HEAD - 99), toBlock="latest"), HEAD, 120),
        (get_logs(fromBlock="finalized", toBlock="latest"), HEAD, 21),
        (get_logs(fromBlock=hex(HEAD - 99)), None, 2000),  # the head unknown: not measurable, the cap
        (get_logs(fromBlock="earliest"), None, 2000),
        (get_logs(fromBlock="earliest"), HEAD, 2000),  # measured, over the cap
        (get_logs(fromBlock="0x0", toBlock=hex(10**12)), None, 2000),
        (get_logs(fromBlock="0x19", toBlock="0x10"), None, 21),  # reversed: refused by the gateway, one block asked
        (get_logs(fromBlock="yesterday"), HEAD, 2000),  # no block number or tag
        (get_logs(fromBlock=-5, toBlock=3), HEAD, 2000),
        (get_logs(fromBlock=True, toBlock=3), HEAD, 2000),
        (get_logs(fromBlock=[1], toBlock={"a": 1}), HEAD, 2000),
        (get_logs(fromBlock="0x" + "f" * 65), HEAD, 2000),
        ([], HEAD, 2000),
        (["latest"], HEAD, 2000),
        ({"fromBlock": "0x1"}, HEAD, 2000),  # params not an array
        (None, HEAD, 2000),
    ],
)
def test_get_logs_by_its_range(params: Any, head: int | None, cost: int) -> None:
    assert DEFAULTS.cost("eth_getLogs", params, head) == cost


@pytest.mark.parametrize(
    ("params", "cost"),
    [
        (["0x4", "latest", []], 9),
        ([4, "latest"], 9),
        (["4", "latest"], 9),
        (["0x400", "latest"], 1029),
        (["0xffffffff", "latest"], 1029),  # the cap
        (["four"], 1029),
        ([], 1029),
    ],
)
def test_fee_history_by_its_block_count(params: Any, cost: int) -> None:
    assert DEFAULTS.cost("eth_feeHistory", params, HEAD) == cost


def test_trace_filter_by_its_range() -> None:
    assert DEFAULTS.cost("trace_filter", [{"fromBlock": "0x1", "toBlock": "0xa"}], HEAD) == 200 + 5 * 10
    assert DEFAULTS.cost("trace_filter", [{"fromBlock": "earliest"}], HEAD) == 5000


def test_operator_overrides_merge_key_by_key() -> None:
    costs = MethodCosts.from_settings(
        MethodCostSettings.model_validate(
            {
                "default": 7,
                "cap": 900,
                "methods": {
                    "eth_getLogs": {"per_block": 3},  # base and cap stay edgeplane's
                    "eth_call": 99,
                    "trace_filter": {"base": 100},
                    "debug_trace*": 5,  # a longer prefix than "debug_*"
                    "eth_feeHistory": 2,  # a bare number is a flat cost
                    "custom_scan": {"per_block": 4},  # base: the default; no block measure known
                },
            }
        )
    )
    assert costs.cost("unknown_method", [], HEAD) == 7
    assert costs.cost("eth_getLogs", get_logs(fromBlock="0x10", toBlock="0x19"), HEAD) == 20 + 3 * 10
    assert costs.cost("eth_getLogs", get_logs(fromBlock="earliest"), None) == 2000
    assert costs.cost("eth_call", [], HEAD) == 99
    assert costs.cost("eth_blockNumber", [], HEAD) == 1  # untouched defaults stay
    assert costs.cost("trace_filter", [{"fromBlock": "0x1", "toBlock": "0x2"}], None) == 110
    assert costs.cost("trace_filter", [{"fromBlock": "earliest"}], None) == 5000  # its own cap stays
    assert costs.cost("debug_traceCall", [], HEAD) == 5
    assert costs.cost("debug_getRawBlock", [], HEAD) == 1000
    assert costs.cost("eth_feeHistory", ["0x400"], HEAD) == 2
    assert costs.entry("custom_scan") == MethodCost(base=7, per_block=4)
    assert costs.cost("custom_scan", [{"fromBlock": "earliest"}], HEAD) == 7


def test_the_table_cap_bounds_a_method_without_its_own() -> None:
    costs = MethodCosts({"eth_getLogs": MethodCost(base=20, per_block=1)}, default=1, cap=900)
    assert costs.cost("eth_getLogs", get_logs(fromBlock="0x1", toBlock="0x64"), None) == 120
    assert costs.cost("eth_getLogs", get_logs(fromBlock="0x1", toBlock="0xfffff"), None) == 900
    assert costs.cost("eth_getLogs", get_logs(fromBlock="earliest"), None) == 900


def test_costs_are_read_from_the_settings_file_table(tmp_path: Any) -> None:
    from edgeplane.config import load_settings

    config = tmp_path / "edgeplane.toml"
    config.write_text(
        '[gateway.costs]\ndefault = 3\n[gateway.costs.methods]\neth_call = 25\n"debug_*" = { base = 5000 }\n'
        "eth_getLogs = { base = 10, per_block = 2, cap = 500 }\n"
    )
    settings = load_settings(config_file=config)
    costs = MethodCosts.from_settings(settings.gateway.costs)
    assert costs.cost("eth_call", [], HEAD) == 25
    assert costs.cost("debug_traceTransaction", [], HEAD) == 5000
    assert costs.cost("eth_getLogs", get_logs(fromBlock="0x1", toBlock="0x64"), HEAD) == 210
    assert costs.cost("eth_getLogs", get_logs(fromBlock="earliest"), None) == 500
    assert costs.cost("net_version", [], HEAD) == 1
    assert costs.cost("something_else", [], HEAD) == 3
    assert MethodCosts.from_settings(Settings().gateway.costs).cost("eth_call", [], HEAD) == 20


@pytest.mark.parametrize(
    "table",
    [
        {"methods": {"*": 1}},
        {"methods": {"": 1}},
        {"methods": {"de*bug": 1}},
        {"methods": {"eth_call": -1}},
        {"methods": {"eth_call": {"base": -1}}},
        {"methods": {"eth_call": {"price": 1}}},
        {"default": -1},
        {"cap": -1},
        {"costs": 1},
    ],
)
def test_invalid_tables_are_refused(table: dict[str, Any]) -> None:
    with pytest.raises(ValidationError):
        MethodCostSettings.model_validate(table)


JSON = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=10), inner, max_size=4),
    max_leaves=20,
)
BOUNDS = st.sampled_from(["latest", "earliest", "pending", "safe", "finalized", "0x0", "0x1", "0xffff"]) | JSON
FILTERS = st.fixed_dictionaries({}, optional={"fromBlock": BOUNDS, "toBlock": BOUNDS, "blockHash": JSON})


@settings(max_examples=300, deadline=None)
@given(
    st.sampled_from(["eth_getLogs", "trace_filter", "eth_feeHistory", "eth_call", "debug_x", "x"]),
    st.lists(FILTERS | JSON, max_size=3) | JSON,
    st.none() | st.integers(min_value=0, max_value=2**64),
)
def test_hostile_params_give_a_bounded_cost(method: str, params: Any, head: int | None) -> None:
    cost = DEFAULTS.cost(method, params, head)
    entry = DEFAULTS.entry(method)
    assert isinstance(cost, int)
    assert entry.base <= cost <= max(entry.base, entry.cap if entry.cap is not None else DEFAULTS.cap)
