"""The pool's retry rules, against real HTTP servers that fail on purpose."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Callable

import aiohttp
import orjson
import pytest
from aiohttp import web

from edgeplane.config import GatewaySettings, UpstreamSettings
from edgeplane.gateway.errors import UpstreamRejected, UpstreamUnavailable
from edgeplane.gateway.upstream import UpstreamNode
from edgeplane.gateway.upstream_pool import UpstreamPool
from edgeplane.jsonrpc.envelope import RpcRequest


class FakeNode:
    """A real HTTP server on loopback that answers with a fixed status and counts the requests it gets."""

    def __init__(self, status: int, answer: dict[str, object] | None = None) -> None:
        self.status = status
        self.answer = answer or {"jsonrpc": "2.0", "id": 1, "result": "0x1"}
        self.hits = 0
        self.answered = asyncio.Event()  # set once it has answered a request
        self.held: asyncio.Event | None = None  # when set: answers wait until the event is set
        self.runner: web.AppRunner | None = None
        self.url = ""

    async def handle(self, request: web.Request) -> web.Response:
        self.hits += 1
        if self.held is not None:
            await self.held.wait()
        self.answered.set()
        return web.Response(status=self.status, body=orjson.dumps(self.answer), content_type="application/json")

    async def start(self) -> None:
        app = web.Application()
        app.router.add_post("/", self.handle)
        self.runner = web.AppRunner(app)
        await self.runner.setup()
        site = web.TCPSite(self.runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/"

    async def stop(self) -> None:
        if self.runner is not None:
            await self.runner.cleanup()


@pytest.fixture
async def make_pool() -> AsyncIterator[Callable[..., object]]:
    servers: list[FakeNode] = []
    session = aiohttp.ClientSession()

    async def factory(*statuses: int, answer: dict[str, object] | None = None) -> tuple[UpstreamPool, list[FakeNode]]:
        nodes = []
        for status in statuses:
            server = FakeNode(status, answer)
            await server.start()
            servers.append(server)
            nodes.append(server)
        upstreams = [UpstreamNode(UpstreamSettings(url=node.url), timeout_seconds=5) for node in nodes]
        return UpstreamPool("testnet", upstreams, GatewaySettings(max_attempts=3)), nodes

    yield factory
    await session.close()
    for server in servers:
        await server.stop()


REQUEST = RpcRequest(1, "eth_chainId", [])


async def test_reads_fail_over_to_a_working_node(make_pool: Callable[..., object]) -> None:
    pool, (bad, good) = await make_pool(503, 200)  # type: ignore[misc]
    for _ in range(4):
        answer, upstream = await pool.forward(REQUEST, idempotent=True)
        assert orjson.loads(answer)["result"] == "0x1"
        assert upstream == pool.nodes[1].label  # the working node's
    assert good.hits == 4
    assert bad.hits == 1  # marked failing after the first error; tried again only as a last resort


async def test_reads_are_retried_a_bounded_number_of_times(make_pool: Callable[..., object]) -> None:
    pool, (only,) = await make_pool(502)  # type: ignore[misc]
    with pytest.raises(UpstreamUnavailable, match="3 attempts"):
        await pool.forward(REQUEST, idempotent=True)
    assert only.hits == 3


async def test_raw_transactions_never_go_twice_to_the_same_node(make_pool: Callable[..., object]) -> None:
    pool, nodes = await make_pool(503, 500)  # type: ignore[misc]
    with pytest.raises(UpstreamUnavailable):
        await pool.forward(REQUEST, idempotent=False)
    assert [node.hits for node in nodes] == [1, 1]

    single_pool, (single,) = await make_pool(503)  # type: ignore[misc]
    with pytest.raises(UpstreamUnavailable, match="1 attempt\\)"):
        await single_pool.forward(REQUEST, idempotent=False)
    assert single.hits == 1


async def test_a_node_error_is_an_answer_not_a_failure(make_pool: Callable[..., object]) -> None:
    error = {"jsonrpc": "2.0", "id": 1, "error": {"code": 3, "message": "execution reverted", "data": "0x08c379a0"}}
    pool, (node, other) = await make_pool(200, 200, answer=error)  # type: ignore[misc]
    with pytest.raises(UpstreamRejected) as caught:
        await pool.execute(lambda upstream: upstream.call("eth_call", []))
    assert caught.value.to_error_object() == error["error"]
    assert node.hits + other.hits == 1


async def test_non_json_answers_fail_over(make_pool: Callable[..., object]) -> None:
    pool, (node,) = await make_pool(200, answer=None)  # type: ignore[misc]
    node.answer = "<html>"  # type: ignore[assignment]
    with pytest.raises(UpstreamUnavailable):
        await pool.forward(REQUEST, idempotent=True)
    assert node.hits == 3


async def test_no_upstream_is_unavailable() -> None:
    pool = UpstreamPool("empty", [], GatewaySettings())
    with pytest.raises(UpstreamUnavailable, match="no upstream node is configured for network 'empty'"):
        await pool.forward(REQUEST, idempotent=True)


async def test_ask_each_does_not_wait_long_for_a_slow_node(make_pool: Callable[..., object]) -> None:
    pool, (fast, slow) = await make_pool(200, 200)  # type: ignore[misc]
    slow.held = asyncio.Event()
    # Returns while the slow node holds its answer (waiting for it would never end: the bound only ends a hang).
    asking = pool.ask_each(lambda node: node.call("eth_chainId", []), grace_seconds=0.05)
    answers = await asyncio.wait_for(asking, timeout=30)
    assert [(node.url, answer) for node, answer in answers] == [(fast.url, "0x1")]
    assert not slow.answered.is_set()
    slow.held.set()  # the slow node's call finishes in the background, on its kept connection
    await asyncio.wait_for(slow.answered.wait(), timeout=30)
    assert slow.hits == 1
    assert all(node.health.healthy for node in pool.nodes)
    await pool.stop()
