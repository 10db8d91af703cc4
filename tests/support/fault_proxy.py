"""A faulty JSON-RPC node for tests: a real HTTP server on loopback, in the test's event loop, that passes requests to
a real node (anvil) and misbehaves as told: slow (``delay_seconds``), dead (closes every connection without an
answer), throttled (HTTP 429), failing some methods (``failing_methods``: HTTP 503), lagging (``lag_blocks``: it
claims a head that many blocks below the node's, answers ``latest``, ``safe`` and ``finalized`` with blocks that many
below, and ``null`` or ``[]`` for blocks above its head, as a node that has not seen them yet), flapping (dead and
alive in turn, ``flap_seconds`` each), or range-limited (``eth_getLogs`` over more than ``max_logs_blocks`` blocks, or
answered with more than ``max_logs_results`` logs, is refused with the coded error ``logs_refusal`` that real nodes
give).

It counts what it was asked (``exchanges``: HTTP requests that reached it; ``methods``: each JSON-RPC method, batch
items one each; ``most_in_flight``: the most exchanges at once), so a test can show how many exchanges a behaviour
cost. Faults can be changed while it runs.
"""

from __future__ import annotations

import asyncio
import collections
import time
from typing import Any

import aiohttp
import orjson
from aiohttp import web

# The position of the block parameter of the methods a lagging node answers by number.
_BLOCK_FAMILY = {
    "eth_getBlockByNumber": 0,
    "eth_getBlockTransactionCountByNumber": 0,
    "eth_getUncleCountByBlockNumber": 0,
    "eth_getTransactionByBlockNumberAndIndex": 0,
    "eth_getUncleByBlockNumberAndIndex": 0,
}
_STATE_AT = {
    "eth_getBalance": 1,
    "eth_getCode": 1,
    "eth_getTransactionCount": 1,
    "eth_call": 1,
    "eth_getStorageAt": 2,
    "eth_getProof": 2,
}


_JSON = {"Content-Type": "application/json"}


class FaultProxy:
    """Serves ``url``: ``node_url``'s JSON-RPC, with the faults set on it (none at first)."""

    def __init__(self, node_url: str) -> None:
        self.node_url = node_url
        self.delay_seconds = 0.0
        self.dead = False
        self.throttled = False
        self.lag_blocks = 0
        self.flap_seconds: float | None = None
        self.max_logs_blocks: int | None = None
        self.failing_methods: set[str] = set()  # an exchange holding one of these gets HTTP 503
        self.max_logs_results: int | None = None
        # The error of a refused eth_getLogs ({limit} is replaced by the limit): geth-style by default.
        self.logs_refusal: tuple[int, str] = (-32000, "exceed maximum block range: {limit}")
        self.exchanges = 0
        self.refused_logs = 0
        self.in_flight = 0
        self.most_in_flight = 0  # the most exchanges it was answering at once
        self.methods: collections.Counter[str] = collections.Counter()
        self.asked: list[tuple[str, Any]] = []
        self.url = ""
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self._flap_started = time.monotonic()

    async def start(self) -> FaultProxy:
        self._session = aiohttp.ClientSession()
        app = web.Application()
        app.router.add_post("/", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", 0)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self.url = f"http://127.0.0.1:{port}/"
        return self

    async def close(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
        if self._session is not None:
            await self._session.close()

    async def __aenter__(self) -> FaultProxy:
        return await self.start()

    async def __aexit__(self, *exc: object) -> None:
        await self.close()

    def flap(self, seconds: float) -> None:
        """Dead for ``seconds``, then alive for as long, and so on, from now."""
        self.flap_seconds = seconds
        self._flap_started = time.monotonic()

    def count(self, method: str, params: list[Any] | None = None) -> int:
        """How many times ``method`` was asked (with ``params``, when given)."""
        if params is None:
            return self.methods[method]
        return sum(1 for asked in self.asked if asked == (method, params))

    def reset_counts(self) -> None:
        self.exchanges = 0
        self.refused_logs = 0
        self.most_in_flight = 0
        self.methods.clear()
        self.asked.clear()

    # -- serving -----------------------------------------------------------------------------------------------

    def _is_dead(self) -> bool:
        if self.dead:
            return True
        if self.flap_seconds is None:
            return False
        return int((time.monotonic() - self._flap_started) / self.flap_seconds) % 2 == 0

    async def _handle(self, request: web.Request) -> web.StreamResponse:
        self.in_flight += 1
        self.most_in_flight = max(self.most_in_flight, self.in_flight)
        try:
            return await self._serve(request)
        finally:
            self.in_flight -= 1

    async def _serve(self, request: web.Request) -> web.StreamResponse:
        body = orjson.loads(await request.read())
        items = body if isinstance(body, list) else [body]
        self.exchanges += 1
        self.methods.update(str(item.get("method")) for item in items if isinstance(item, dict))
        self.asked.extend((str(item.get("method")), item.get("params")) for item in items if isinstance(item, dict))
        if self._is_dead():
            assert request.transport is not None
            request.transport.close()
            return web.Response(status=503)
        if self.failing_methods.intersection(str(item.get("method")) for item in items if isinstance(item, dict)):
            return web.Response(status=503)
        if self.throttled:
            return web.json_response({"jsonrpc": "2.0", "id": None, "error": {"code": -32005}}, status=429)
        if self.delay_seconds:
            await asyncio.sleep(self.delay_seconds)
        claimed = None
        if self.lag_blocks:
            claimed = max(0, int(await self._node("eth_blockNumber", []), 16) - self.lag_blocks)
        answers = [await self._limited(item, claimed) for item in items]
        return web.Response(
            body=orjson.dumps(answers if isinstance(body, list) else answers[0]), content_type="application/json"
        )

    async def _node(self, method: str, params: list[Any]) -> Any:
        answer = await self._post({"jsonrpc": "2.0", "id": 0, "method": method, "params": params})
        return answer.get("result")

    async def _post(self, item: dict[str, Any]) -> dict[str, Any]:
        assert self._session is not None
        async with self._session.post(self.node_url, data=orjson.dumps(item), headers=_JSON) as response:
            answer: dict[str, Any] = orjson.loads(await response.read())
            return answer

    async def _limited(self, item: dict[str, Any], claimed: int | None) -> dict[str, Any]:
        """``_answer``, or the refusal of an ``eth_getLogs`` over the proxy's limits."""
        query = (item.get("params") or [None])[0]
        if item.get("method") != "eth_getLogs" or not isinstance(query, dict) or "blockHash" in query:
            return await self._answer(item, claimed)
        if self.max_logs_blocks is not None:
            head = claimed if claimed is not None else int(await self._node("eth_blockNumber", []), 16)
            first, last = (_number(query.get(bound, "latest"), head) for bound in ("fromBlock", "toBlock"))
            if last - first + 1 > self.max_logs_blocks:
                return self._refusal(item, self.max_logs_blocks)
        answer = await self._answer(item, claimed)
        found = answer.get("result")
        if self.max_logs_results is not None and isinstance(found, list) and len(found) > self.max_logs_results:
            return self._refusal(item, self.max_logs_results)
        return answer

    def _refusal(self, item: dict[str, Any], limit: int) -> dict[str, Any]:
        self.refused_logs += 1
        code, message = self.logs_refusal
        return {"jsonrpc": "2.0", "id": item.get("id"), "error": {"code": code, "message": message.format(limit=limit)}}

    async def _answer(self, item: dict[str, Any], claimed: int | None) -> dict[str, Any]:
        if claimed is None:
            return await self._post(item)
        method, params, request_id = item.get("method"), list(item.get("params") or []), item.get("id")

        def result(value: Any) -> dict[str, Any]:
            return {"jsonrpc": "2.0", "id": request_id, "result": value}

        if method == "eth_blockNumber":
            return result(hex(claimed))
        position = _BLOCK_FAMILY.get(str(method), _STATE_AT.get(str(method)))
        if position is not None:
            while len(params) <= position:
                params.append("latest")
            ref = params[position]
            if ref in ("latest", "pending"):
                params[position] = hex(claimed)
            elif ref in ("safe", "finalized"):  # behind by as many blocks as its head
                block = await self._node("eth_getBlockByNumber", [ref, False])
                params[position] = hex(max(0, int(block["number"], 16) - self.lag_blocks))
            elif isinstance(ref, str) and ref.startswith("0x") and int(ref, 16) > claimed:
                if method in _BLOCK_FAMILY:
                    return result(None)
                return {"jsonrpc": "2.0", "id": request_id, "error": {"code": -32000, "message": "header not found"}}
        if method == "eth_getLogs" and params and isinstance(params[0], dict):
            query = dict(params[0])
            if "blockHash" not in query:
                last = query.get("toBlock", "latest")
                last_number = claimed if last in ("latest", "pending") else int(str(last), 16)
                first = query.get("fromBlock", "latest")
                first_number = claimed if first in ("latest", "pending") else int(str(first), 16)
                if first_number > claimed:
                    return result([])
                query["fromBlock"], query["toBlock"] = hex(first_number), hex(min(last_number, claimed))
                params[0] = query
        answer = await self._post({**item, "params": params})
        return _hide_above(answer, claimed)


def _number(ref: Any, head: int) -> int:
    """A block parameter of a filter as a number, tags at ``head``."""
    if ref in ("latest", "pending", "safe", "finalized"):
        return head
    if ref == "earliest":
        return 0
    return int(str(ref), 16)


def _hide_above(answer: dict[str, Any], claimed: int) -> dict[str, Any]:
    """The answer as a node at ``claimed`` would give it: a block, transaction or receipt above it is null, logs above
    it are left out."""
    value = answer.get("result")

    def above(entry: Any) -> bool:
        number = entry.get("blockNumber", entry.get("number")) if isinstance(entry, dict) else None
        return isinstance(number, str) and int(number, 16) > claimed

    if isinstance(value, dict) and above(value):
        return {**answer, "result": None}
    if isinstance(value, list) and any(above(entry) for entry in value):
        return {**answer, "result": [entry for entry in value if not above(entry)]}
    return answer
