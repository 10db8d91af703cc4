"""Fuzzing the JSON-RPC envelope: whatever body a client sends, what reaches the node reads, by Python's rules and
by Go's, as the request the gateway's policy allowed; or the client got the gateway's error and nothing was sent.

Bodies are written as text, so that they can hold what a Python dict cannot: a member given twice, in other cases
(``METHOD``, ``params`` with a long s), with escapes (``\\u006dethod``), in objects at any depth, in batches. The
node is the Go-style stand-in (``tests/support/go_style_node.py``), behind a gateway with its response cache on,
shared by every example: an answer smuggled into the cache by one example would be caught by a later one, because
every answer is also checked against the request the gateway read.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.config import GatewaySettings, ResponseCacheSettings, UpstreamSettings
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from tests.support.go_style_node import (
    HEAD,
    GoStyleNode,
    balance_of,
    decode_requests,
    go_loads,
    go_view,
    python_view,
)

POLICY = load_method_policy()
ADDRESSES = ["0x" + digit * 40 for digit in "abc"]
# Errors the gateway gives itself (the stand-in answers with its own codes only for what the gateway let through).
GATEWAY_CODES = {-32700, -32600, -32001, -32602}


@dataclass(frozen=True)
class Members:
    """A JSON object as text: its members in order, names as written (escapes and all)."""

    members: tuple[tuple[str, Any], ...]


def write(value: Any) -> str:
    """``value`` as JSON text; ``Members`` as written, repeats included."""
    if isinstance(value, Members):
        return "{" + ",".join(f'"{name}":{write(member)}' for name, member in value.members) + "}"
    if isinstance(value, list):
        return "[" + ",".join(write(item) for item in value) + "]"
    return json.dumps(value)


# -- names --------------------------------------------------------------------------------------------------------

_OTHER_CASES = {"s": "sS\u017f", "k": "kK\u212a", "i": "iI\u0131\u0130"}


def spelling(name: str) -> st.SearchStrategy[str]:
    """``name`` as written: mostly as is, or in other cases (Go folds the long s and the Kelvin sign too), with
    characters escaped at random."""
    characters = [st.sampled_from(_OTHER_CASES.get(c.lower(), c.lower() + c.upper())) for c in name]
    other_case = st.tuples(*characters).map("".join)
    written = st.one_of(st.just(name), st.just(name), other_case)
    return st.tuples(written, st.lists(st.booleans(), min_size=len(name), max_size=len(name))).map(_escape)


def _escape(spelt: tuple[str, list[bool]]) -> str:
    text, escapes = spelt
    return "".join(f"\\u{ord(c):04x}" if escape else c for c, escape in zip(text, escapes, strict=True))


def members(required: dict[str, st.SearchStrategy[Any]], known: tuple[str, ...]) -> st.SearchStrategy[Members]:
    """An object with ``required``'s members (mostly), and more: known names spelt other ways, or again, with values
    of the same kinds, and names of nothing."""
    every = {**required}
    base = st.fixed_dictionaries({}, optional=required).map(lambda found: [(name, found[name]) for name in found])
    extra_name = st.sampled_from(known).flatmap(spelling) | st.sampled_from(["foo", "error", "result", "a:b"])
    extra_value = st.sampled_from(list(every.values())).flatmap(lambda strategy: strategy) if every else st.none()
    extra = st.lists(st.tuples(extra_name, extra_value), max_size=2)
    return (
        st.tuples(base, extra)
        .flatmap(lambda parts: st.permutations(parts[0] + parts[1]))
        .map(lambda ordered: Members(tuple(ordered)))
    )


# -- requests -----------------------------------------------------------------------------------------------------

addresses = st.sampled_from(ADDRESSES)
block_numbers = st.integers(0, 2000).map(hex)
FILTER_NAMES = ("fromBlock", "toBlock", "address", "topics", "blockHash")
CALL_NAMES = ("to", "from", "data")
filters = st.one_of(
    members({"fromBlock": block_numbers, "toBlock": block_numbers, "address": addresses}, FILTER_NAMES),
    members({"address": addresses}, FILTER_NAMES),
)
calls = members({"to": addresses, "data": st.just("0x")}, CALL_NAMES)
PARAMS: dict[str, st.SearchStrategy[Any]] = {
    "eth_chainId": st.just([]),
    "eth_blockNumber": st.just([]),
    "eth_getBalance": st.tuples(addresses, st.just("latest")).map(list),
    "eth_getLogs": st.tuples(filters).map(list),
    "eth_call": st.tuples(calls, st.just("latest")).map(list),
    "admin_addPeer": st.just(["enode://x@127.0.0.1:30303"]),
    "eth_accounts": st.just([]),
}
methods = st.sampled_from(sorted(PARAMS))
client_ids = st.integers(0, 10**6).map(lambda number: f"client-{number}")
ENVELOPE_NAMES = ("jsonrpc", "id", "method", "params")


def request_for(method: str) -> st.SearchStrategy[Members]:
    return members(
        {
            "jsonrpc": st.sampled_from(["2.0", "2.0", "2.0", "1.0"]),
            "id": client_ids,
            "method": st.one_of(st.just(method), st.just(method), methods),
            "params": st.one_of(PARAMS[method], PARAMS[method], methods.flatmap(lambda other: PARAMS[other])),
        },
        ENVELOPE_NAMES,
    )


requests = methods.flatmap(request_for)
bodies = st.one_of(
    requests.map(write),
    st.lists(requests, min_size=1, max_size=3).map(write),
)


# -- the property -------------------------------------------------------------------------------------------------


def expected_result(method: str, params: list[Any]) -> Any:
    """What the stand-in answers to the request as Python reads it, or None for its errors. The objects the gateway
    does not read (a call) are read as a Go struct reads them (``python_view``)."""
    if method == "eth_getBalance":
        return balance_of(params[0]) if params and isinstance(params[0], str) else None
    if method == "eth_call":
        call = python_view(params[0]) if params else None
        if not isinstance(call, dict):
            return None
        to = call.get("TO")
        return "0x" + (to[2:].lower().rjust(64, "0") if isinstance(to, str) else "0" * 64)
    if method == "eth_getLogs":
        query = params[0]
        ends = {int(query.get("fromBlock", hex(HEAD)), 16), int(query.get("toBlock", hex(HEAD)), 16)}
        return [{"blockNumber": hex(number), "logIndex": "0x0", "data": "0x"} for number in sorted(ends)]
    if method == "eth_blockNumber":
        return hex(HEAD)
    return "0x1"


def check(body: bytes, status: int, answer_body: bytes, node: GoStyleNode) -> None:
    """The property, for one body: see the module docstring."""
    received = node.taken()
    try:
        read = orjson.loads(body)
    except orjson.JSONDecodeError:
        assert status == 400
        assert received == []
        return
    items = read if isinstance(read, list) else [read]
    answers = orjson.loads(answer_body)
    answers = answers if isinstance(answers, list) else [answers]
    assert len(answers) == len(items)
    let_through = []
    for item, go_item, answer in zip(items, decode_requests(body), answers, strict=True):
        if "error" in answer and answer["error"]["code"] in GATEWAY_CODES:
            continue
        # Let through: the policy allowed it, and the client's own body reads the same to Go as to Python.
        # Omitted params read as [] (JSON-RPC 2.0), as a Go node reads a missing member: no arguments.
        method, params = item["method"], item.get("params", [])
        assert method in POLICY.supported
        go_params = [] if go_item.params is None else go_item.params
        assert (go_item.method, go_view(go_params), go_item.id) == (method, python_view(params), item["id"])
        assert answer["id"] == item["id"]
        expected = expected_result(method, params)
        assert answer.get("result") == expected, (answer, item)
        let_through.append((method, params))
    # What the node decoded: requests let through (some answered from the cache never reach it), each written again
    # with the four envelope members only, reading the same to Python and to Go.
    # The gateway's own reads (of the head, by the cache and the limits) carry ids of their own.
    sent = {
        request.body: None
        for request in received
        if (request.request.batch and not _own_head_read(request.body)) or _client_id(request.request.id)
    }
    decoded = []
    for node_body in sent:
        as_python = json.loads(node_body)
        as_python = as_python if isinstance(as_python, list) else [as_python]
        assert all(list(entry) == ["jsonrpc", "id", "method", "params"] for entry in as_python)
        assert go_view(go_loads(node_body)) == python_view(json.loads(node_body))
        as_go = decode_requests(node_body)
        assert [(entry.method, go_view(entry.params)) for entry in as_go] == [
            (entry["method"], python_view(entry["params"])) for entry in as_python
        ]
        decoded.extend((entry["method"], entry["params"]) for entry in as_python)
    for method, params in decoded:
        assert (method, params) in let_through, (method, params, let_through)
        let_through.remove((method, params))


def _own_head_read(body: bytes) -> bool:
    """Whether a batch is the response cache's own read of the head and the finalized block."""
    entries = json.loads(body)
    return [(entry["method"], entry["params"]) for entry in entries] == [
        ("eth_getBlockByNumber", ["latest", False]),
        ("eth_getBlockByNumber", ["finalized", False]),
    ]


def _client_id(request_id: Any) -> bool:
    return isinstance(request_id, str) and request_id.startswith("client-")


@pytest.fixture(scope="module")
def node() -> Iterator[GoStyleNode]:
    with GoStyleNode() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture(scope="module")
def gateway(node: GoStyleNode, runner: asyncio.Runner) -> Iterator[Gateway]:
    """The gateway, closed before ``runner``'s loop."""
    settings = GatewaySettings(cache=ResponseCacheSettings(max_head_age_seconds=60.0))
    upstream = UpstreamNode(UpstreamSettings(url=node.url), timeout_seconds=10)
    gateway = Gateway(POLICY, {"mainnet": UpstreamPool("mainnet", [upstream], settings)}, settings)
    yield gateway
    upstream.close()


@settings(
    max_examples=300, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies)
def test_what_reaches_the_node_is_what_the_policy_allowed(
    node: GoStyleNode, gateway: Gateway, runner: asyncio.Runner, body: str
) -> None:
    node.taken()
    raw = body.encode()
    answer = runner.run(gateway.handle("mainnet", raw))
    check(raw, answer.status, answer.body, node)
