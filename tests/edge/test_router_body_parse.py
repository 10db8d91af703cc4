"""A request's body is parsed once through the edge, whoever reads it as JSON: the firewall's attack scores, the id of
the firewall's refusal and the gateway's envelope check read the one parse the router makes of it
(``edgeplane.body_document``); a request none of them reads as JSON is not parsed at all.

The count is of orjson's parses of the body's bytes, anywhere in the process; the gateway's second reading of an
ambiguous body (``edgeplane.jsonrpc.envelope._recheck``, by another parser) is deliberate and not counted.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from unittest import mock

import orjson
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from edgeplane.config import GatewaySettings, UpstreamSettings
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder
from edgeplane.edge.http_server import EdgeRequest
from edgeplane.edge.router import EdgeRouter
from edgeplane.gateway.policy import load_method_policy
from edgeplane.gateway.service import Gateway
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.waf.firewall import Firewall, compile_firewall, deploy_managed_rulesets
from tests.edge.test_router_firewall import ATTACK, HOST, PROBE_RULE, ZONE, any_request, edge_request
from tests.support.go_style_node import GoStyleNode
from tests.support.routing import answer_request

LOADS = orjson.loads  # the parser itself, not counted

# A custom rule that reads the attack scores, so that they are computed (from the body's strings, for a JSON body).
SCORE_BLOCK = {"action": "block", "expression": "cf.waf.score lt 20", "id": "s" * 32}

FIREWALLS: dict[str, dict[str, list[dict[str, Any]]] | None] = {
    "no firewall": None,
    "a rule reads the scores": {"http_request_firewall_custom": [SCORE_BLOCK]},
    "the scores and the managed rulesets": {
        "http_request_firewall_custom": [SCORE_BLOCK],
        "http_request_firewall_managed": deploy_managed_rulesets(),
    },
    "no rule reads the body": {"http_request_firewall_custom": [PROBE_RULE]},
}


@contextmanager
def parses() -> Iterator[list[bytes]]:
    """The bytes of each orjson parse made in the block, in order."""
    given_bytes: list[bytes] = []

    def counted(data: bytes) -> Any:
        given_bytes.append(data)
        return LOADS(data)

    with mock.patch.object(orjson, "loads", counted):
        yield given_bytes


@pytest.fixture(scope="module")
def runner() -> Iterator[asyncio.Runner]:
    with asyncio.Runner() as loop_runner:
        yield loop_runner


@pytest.fixture(scope="module")
def gateway(runner: asyncio.Runner) -> Iterator[Gateway]:
    """A gateway in front of the Go-style stand-in node, closed before ``runner``'s loop."""
    with GoStyleNode() as node:
        settings = GatewaySettings()
        upstream = UpstreamNode(UpstreamSettings(url=node.url), timeout_seconds=10)
        yield Gateway(load_method_policy(), {"mainnet": UpstreamPool("mainnet", [upstream], settings)}, settings)
        upstream.close()


@pytest.fixture(scope="module")
def firewalls() -> dict[str, Firewall | None]:
    return {name: None if phases is None else compile_firewall(phases) for name, phases in FIREWALLS.items()}


def edge(gateway: Gateway, firewall: Firewall | None) -> EdgeRouter:
    snapshot = EdgeSnapshot(
        web3_hostnames={HOST: ZONE}, firewalls={ZONE.zone_id: firewall} if firewall is not None else {}
    )
    return EdgeRouter(gateway, SnapshotHolder(snapshot))


def envelope(request_id: Any, method: str, params: list[Any]) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**63)
    | st.text(max_size=12)
    | st.sampled_from(["0xd8da6bf26964af9d7eed9e03e53415d37aa96045", "latest", "1' UNION SELECT 1--", "<script>"]),
    lambda children: st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=6), children, max_size=3),
    max_leaves=8,
)
_requests = st.builds(
    envelope,
    st.integers(0, 2**40) | st.text(max_size=6),
    st.sampled_from(["eth_chainId", "eth_blockNumber", "eth_getBalance", "admin_peers", "eth_call"]),
    st.lists(_values, max_size=3),
)
bodies = st.one_of(
    _requests.map(orjson.dumps),
    st.lists(_requests, min_size=1, max_size=3).map(orjson.dumps),
    _values.map(orjson.dumps),
    st.binary(max_size=48),
    _requests.map(orjson.dumps).map(lambda body: body[: len(body) // 2]),
)


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies, firewall=st.sampled_from(sorted(FIREWALLS)))
def test_a_body_sent_to_the_gateway_is_parsed_once(
    gateway: Gateway, firewalls: dict[str, Firewall | None], runner: asyncio.Runner, body: bytes, firewall: str
) -> None:
    router = edge(gateway, firewalls[firewall])
    with parses() as parsed:
        runner.run(answer_request(router, edge_request(body)))
    assert parsed.count(body) == 1


def test_a_blocked_request_echoes_its_id_from_the_parse_the_scores_made(
    gateway: Gateway, firewalls: dict[str, Firewall | None], runner: asyncio.Runner
) -> None:
    router = edge(gateway, firewalls["a rule reads the scores"])
    with parses() as parsed:
        response = runner.run(answer_request(router, edge_request(ATTACK)))
    assert response.status == 403
    assert LOADS(response.body)["id"] == "q-9"
    assert parsed.count(ATTACK) == 1


@pytest.mark.parametrize(("firewall", "expected"), [("no rule reads the body", 0), ("a rule reads the scores", 1)])
def test_a_request_for_another_path_is_parsed_only_when_the_firewall_reads_its_json(
    gateway: Gateway, firewalls: dict[str, Firewall | None], runner: asyncio.Runner, firewall: str, expected: int
) -> None:
    router = edge(gateway, firewalls[firewall])
    body = b'{"jsonrpc":"2.0","id":7,"method":"eth_chainId","params":[]}'
    request: EdgeRequest = any_request("POST", "/wp-login.php", body=body)
    with parses() as parsed:
        response = runner.run(answer_request(router, request))
    assert response.status == 404
    assert parsed.count(body) == expected
