"""``edgeplane serve`` in front of a node that decodes JSON as Go nodes do (geth, erigon: keys matched ignoring case,
the last match winning): a request that reads one way to the gateway and another way to the node is refused, and
the node runs only what the gateway checked. anvil refuses such bodies itself, so only this stand-in shows it."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest
from hypothesis import HealthCheck, given, settings

from tests.gateway.test_envelope_fuzz import bodies, check
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.go_style_node import GoStyleNode, balance_of

pytestmark = pytest.mark.e2e

A = "0x" + "aa" * 20
B = "0x" + "bb" * 20
# The issue's three bodies.
METHOD_SMUGGLE = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","METHOD":"admin_addPeer","params":["enode://x"]}'
RANGE_SMUGGLE = (
    b'{"jsonrpc":"2.0","id":2,"method":"eth_getLogs",'
    b'"params":[{"fromBlock":"0x100000","toBlock":"0x100000","FromBlock":"0x0"}]}'
)
PARAMS_SMUGGLE = (
    f'{{"jsonrpc":"2.0","id":3,"method":"eth_getBalance","params":["{A}","latest"],"PARAMS":["{B}","latest"]}}'
).encode()


@pytest.fixture(scope="module")
def node() -> Iterator[GoStyleNode]:
    with GoStyleNode() as stand_in:
        yield stand_in


@pytest.fixture(scope="module")
def edge(node: GoStyleNode, tmp_path_factory: pytest.TempPathFactory) -> Iterator[EdgeplaneProcess]:
    data_dir = tmp_path_factory.mktemp("smuggling") / "data"
    # One edge worker, so that every request meets the same response cache.
    with EdgeplaneProcess(data_dir, upstreams=(f"mainnet={node.url}",), extra_args=("--edge-workers", "1")) as edge:
        yield edge


@pytest.fixture(scope="module")
def client(edge: EdgeplaneProcess) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=edge.edge_url, headers={"Content-Type": "application/json"}, timeout=30) as client:
        yield client


def post(client: httpx.Client, body: bytes) -> httpx.Response:
    return client.post("/v1/mainnet", content=body)


def decoded_by_the_node(node: GoStyleNode) -> list[tuple[object, object]]:
    """What the stand-in decoded since the last call, the gateway's own reads (health, head) left out."""
    own = {"web3_clientVersion", "eth_blockNumber", "eth_getBlockByNumber"}
    return [
        (received.request.method, received.read or received.request.params)
        for received in node.taken()
        if received.request.method not in own
    ]


@pytest.mark.parametrize("body", [METHOD_SMUGGLE, RANGE_SMUGGLE, PARAMS_SMUGGLE], ids=["method", "range", "params"])
def test_the_issues_bodies_are_refused_and_reach_no_node(client: httpx.Client, node: GoStyleNode, body: bytes) -> None:
    node.taken()
    response = post(client, body)
    assert response.status_code == 400
    answer = response.json()
    assert answer["error"]["code"] == -32600
    assert "equal ignoring case" in answer["error"]["message"]
    assert answer["id"] == json.loads(body)["id"]
    assert decoded_by_the_node(node) == []


def test_the_node_runs_what_the_gateway_checked(client: httpx.Client, node: GoStyleNode) -> None:
    node.taken()
    logs = b'{"jsonrpc":"2.0","id":4,"method":"eth_getLogs","params":[{"fromBlock":"0x100000","toBlock":"0x100000"}]}'
    assert post(client, logs).json()["result"] == [{"blockNumber": "0x100000", "logIndex": "0x0", "data": "0x"}]
    only_variant = b'{"jsonrpc":"2.0","id":5,"method":"eth_getLogs","params":[{"FromBlock":"0x0","toBlock":"0x1"}]}'
    refused = post(client, only_variant).json()
    assert refused["error"] == {"code": -32602, "message": "invalid eth_getLogs params: unknown member 'FromBlock'"}
    extra = f'{{"jsonrpc":"2.0","id":6,"method":"eth_getBalance","params":["{B}","latest"],"foo":{{"a":1}}}}'
    assert post(client, extra.encode()).json() == {"jsonrpc": "2.0", "id": 6, "result": balance_of(B)}
    decoded = decoded_by_the_node(node)
    assert [method for method, _ in decoded] == ["eth_getLogs", "eth_getBalance"]
    assert decoded[0][1]["range"] == (0x100000, 0x100000)
    assert decoded[1][1] == {"address": B}


def test_a_refused_smuggle_does_not_poison_the_cache(client: httpx.Client, node: GoStyleNode) -> None:
    for _ in range(3):
        post(client, PARAMS_SMUGGLE)  # refused (above); were it let through, it would be tried here
    ask_a = f'{{"jsonrpc":"2.0","id":"a","method":"eth_getBalance","params":["{A}","latest"]}}'.encode()
    for _ in range(3):
        assert post(client, ask_a).json() == {"jsonrpc": "2.0", "id": "a", "result": balance_of(A)}
    node.taken()
    assert post(client, ask_a).json()["result"] == balance_of(A)
    assert decoded_by_the_node(node) == []  # answered from the cache: A's answer is what it holds for A


def test_a_batch_answers_its_plain_items_and_refuses_the_smuggling_ones(
    client: httpx.Client, node: GoStyleNode
) -> None:
    node.taken()
    batch = b"[" + METHOD_SMUGGLE + b"," + b'{"jsonrpc":"2.0","id":9,"method":"eth_chainId","params":[]}' + b"]"
    answers = post(client, batch).json()
    assert answers == [
        {
            "jsonrpc": "2.0",
            "id": 1,
            "error": {
                "code": -32600,
                "message": 'invalid request: the member names "method" and "METHOD" of one object are equal '
                "ignoring case",
            },
        },
        {"jsonrpc": "2.0", "id": 9, "result": "0x1"},
    ]
    assert decoded_by_the_node(node) == [("eth_chainId", [])]


@settings(
    max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow]
)
@given(body=bodies)
def test_whatever_a_client_sends_the_node_runs_only_what_the_policy_allowed(
    client: httpx.Client, node: GoStyleNode, body: str
) -> None:
    node.taken()
    raw = body.encode()
    response = post(client, raw)
    check(raw, response.status_code, response.content, node)


def test_the_node_never_decoded_a_request_the_policy_refuses(node: GoStyleNode) -> None:
    """Last in this module: everything the stand-in decoded while the module ran."""
    methods = node.methods()
    assert "eth_getBalance" in methods
    assert "admin_addPeer" not in methods
