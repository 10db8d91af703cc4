"""What the gateway tells the request log of each answer (``GatewayResponse.method``, ``requests`` and
``error_code``), against a real anvil node: the JSON-RPC method (a batch's first), how many requests the body held,
and the first error code of the answer, whoever gave it (the node, the method policy, the envelope checks)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator

import orjson
import pytest

from edgeplane.gateway.errors import METHOD_NOT_ALLOWED
from edgeplane.gateway.service import Gateway
from edgeplane.jsonrpc.errors import INVALID_REQUEST, PARSE_ERROR
from tests.gateway.test_response_cache import close, make_gateway
from tests.support.anvil import AnvilNode


@pytest.fixture(scope="module")
def node() -> Iterator[AnvilNode]:
    with AnvilNode() as anvil:
        yield anvil


@pytest.fixture
async def gateway(node: AnvilNode) -> AsyncIterator[Gateway]:
    gateway = make_gateway(node.url)
    yield gateway
    close(gateway)


def call(method: str, params: list[object], request_id: int = 1) -> dict[str, object]:
    return {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}


async def test_a_single_request_names_its_method_and_no_error(gateway: Gateway) -> None:
    answer = await gateway.handle("mainnet", orjson.dumps(call("eth_chainId", [])))
    assert (answer.method, answer.requests, answer.error_code) == ("eth_chainId", 1, None)
    assert answer.upstream == gateway.pools["mainnet"].nodes[0].label
    hit = await gateway.handle("mainnet", orjson.dumps(call("eth_getBlockByNumber", ["0x0", False])))
    hit = await gateway.handle("mainnet", orjson.dumps(call("eth_getBlockByNumber", ["0x0", False])))
    assert (hit.cache_status, hit.method, hit.requests, hit.error_code) == ("hit", "eth_getBlockByNumber", 1, None)
    assert hit.upstream == ""  # the cache answered


async def test_the_nodes_error_code_is_the_answers(gateway: Gateway) -> None:
    answer = await gateway.handle("mainnet", orjson.dumps(call("eth_getBalance", ["not an address", "latest"])))
    code = orjson.loads(answer.body)["error"]["code"]
    assert (answer.method, answer.requests, answer.error_code) == ("eth_getBalance", 1, code)


async def test_a_refused_method_carries_the_refusals_code(gateway: Gateway) -> None:
    answer = await gateway.handle("mainnet", orjson.dumps(call("admin_peers", [])))
    assert answer.status == 403
    assert (answer.method, answer.requests, answer.error_code) == ("admin_peers", 1, METHOD_NOT_ALLOWED)
    assert answer.upstream == ""  # no node was asked


async def test_a_batch_names_its_first_method_its_size_and_its_first_error(gateway: Gateway) -> None:
    batch = [call("eth_chainId", [], 1), {"jsonrpc": "2.0", "id": 2}, call("admin_peers", [], 3)]
    answer = await gateway.handle("mainnet", orjson.dumps(batch))
    assert (answer.method, answer.requests, answer.error_code) == ("eth_chainId", 3, INVALID_REQUEST)
    clean = await gateway.handle("mainnet", orjson.dumps([call("eth_chainId", [], 1), call("net_version", [], 2)]))
    assert (clean.method, clean.requests, clean.error_code) == ("eth_chainId", 2, None)
    assert clean.upstream == gateway.pools["mainnet"].nodes[0].label


async def test_a_body_that_is_no_json_rpc_reads_as_no_request(gateway: Gateway) -> None:
    answer = await gateway.handle("mainnet", b"{not json")
    assert (answer.method, answer.requests, answer.error_code) == ("", 0, PARSE_ERROR)
    unknown = gateway.unknown_network("ropsten")
    assert (unknown.method, unknown.requests) == ("", 0)
