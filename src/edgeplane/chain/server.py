"""The development chain's JSON-RPC server: one or more named chains over HTTP, as a node serves them.

``POST /`` reaches the default chain; ``POST /<name>`` a named one (``edgeplane serve`` runs one chain per network
that has no upstream, created when first used). Transactions are mined as they arrive (automine: transactions that
arrive together share a block) or every ``block_time`` seconds.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable, MutableMapping
from dataclasses import dataclass
from typing import Any

import orjson
import structlog

from edgeplane.chain.dev_chain import ChainConfig, DevChain
from edgeplane.chain.errors import ChainError, InvalidParams, MethodNotFound
from edgeplane.chain.json_shapes import hex_bytes
from edgeplane.chain.rpc_methods import ChainRpc
from edgeplane.jsonrpc.errors import RpcError
from edgeplane.jsonrpc.quantities import parse_quantity

log = structlog.get_logger(__name__)

Scope = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[MutableMapping[str, Any]]]
Send = Callable[[MutableMapping[str, Any]], Awaitable[None]]

DEFAULT_CHAIN = "default"
_SENDING_METHODS = frozenset({"eth_sendRawTransaction", "eth_sendTransaction"})


@dataclass(frozen=True, slots=True)
class MiningConfig:
    """When blocks are mined: on every transaction (None) or every ``block_time`` seconds."""

    block_time: float | None = None


class ChainNode:
    """One chain with its RPC methods and its miner."""

    def __init__(self, name: str, chain: DevChain, mining: MiningConfig) -> None:
        self.name = name
        self.chain = chain
        self.rpc = ChainRpc(chain)
        self.mining = mining
        self._waiters: dict[bytes, asyncio.Future[None]] = {}
        self._mining_scheduled = False
        self._interval_task: asyncio.Task[None] | None = None

    def start(self) -> None:
        """Starts interval mining, when configured."""
        if self.mining.block_time is not None and self._interval_task is None:
            self._interval_task = asyncio.create_task(self._mine_every(self.mining.block_time))

    async def stop(self) -> None:
        """Stops mining and closes the chain's database."""
        if self._interval_task is not None:
            self._interval_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._interval_task
        self.chain.close()

    async def _mine_every(self, seconds: float) -> None:
        while True:
            await asyncio.sleep(seconds)
            self._mine_pending()

    def _schedule_mining(self) -> None:
        if not self._mining_scheduled:
            self._mining_scheduled = True
            asyncio.get_running_loop().call_soon(self._mine_pending)

    def _mine_pending(self) -> None:
        self._mining_scheduled = False
        try:
            mined = self.chain.mine()
        except Exception:
            log.exception("mining failed", chain=self.name)
            for waiter in self._waiters.values():
                if not waiter.done():
                    waiter.set_exception(ChainError("the transaction could not be mined"))
            self._waiters.clear()
            return
        for transaction_hash in mined.transaction_hashes:
            pending_waiter = self._waiters.pop(transaction_hash, None)
            if pending_waiter is not None and not pending_waiter.done():
                pending_waiter.set_result(None)
        if self.mining.block_time is None and self.chain.pending_count:
            self._schedule_mining()  # more than one block's worth was queued

    async def send(self, raw: bytes) -> str:
        """Queues a raw transaction; with automining, returns once it is in a block."""
        transaction = self.chain.submit(raw)
        if self.mining.block_time is None:
            waiter = asyncio.get_running_loop().create_future()
            self._waiters[transaction.hash] = waiter
            self._schedule_mining()
            await waiter
        return hex_bytes(transaction.hash)

    def mine_blocks(self, params: list[Any]) -> str:
        """``evm_mine``: mines one block, or as many as the first parameter says (at most 10,000)."""
        count = parse_quantity(params[0], name="count", allow_decimal_string=True) if params else 1
        if count > 10_000:
            raise InvalidParams("evm_mine mines at most 10000 blocks a call")
        for _ in range(count):
            self._mine_pending()
        return "0x0"

    async def call(self, method: str, params: list[Any]) -> Any:
        """Runs one method. Raises ``RpcError`` (a ``ChainError``, or a parameter error) for errors."""
        if method == "eth_sendRawTransaction":
            return await self.send(self.rpc.decode_raw(params))
        if method == "eth_sendTransaction":
            return await self.send(self.rpc.sign_for_dev_account(params))
        if method == "evm_mine":
            return self.mine_blocks(params)
        handler = self.rpc.handlers.get(method)
        if handler is None:
            raise MethodNotFound(f"the method {method} does not exist/is not available")
        return handler(params)


ChainFactory = Callable[[str], ChainNode]


class ChainServerApp:
    """The ASGI application serving the chains."""

    def __init__(self, factory: ChainFactory, *, names: frozenset[str] | None = None) -> None:
        self._factory = factory
        self._names = names
        self.nodes: dict[str, ChainNode] = {}

    def node(self, name: str) -> ChainNode | None:
        """The chain called ``name``, created on first use; None when the name is not served."""
        node = self.nodes.get(name)
        if node is None:
            if self._names is not None and name not in self._names:
                return None
            node = self._factory(name)
            node.start()
            self.nodes[name] = node
        return node

    async def close(self) -> None:
        """Stops every chain."""
        for node in self.nodes.values():
            await node.stop()

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            return
        path: str = scope["path"].strip("/")
        if path == "healthz":
            await _respond(send, 200, b'{"status":"ok"}')
            return
        node = self.node(path or DEFAULT_CHAIN)
        if node is None:
            await _respond(send, 404, _error(None, -32600, f"no chain named {path!r}"))
            return
        if scope["method"] != "POST":
            await _respond(send, 405, _error(None, -32600, "use POST"))
            return
        body = await _read_body(receive)
        await _respond(send, 200, await self.answer(node, body))

    async def answer(self, node: ChainNode, body: bytes) -> bytes:
        """The JSON-RPC answer to a request body (single or batch)."""
        try:
            document = orjson.loads(body)
        except orjson.JSONDecodeError:
            return _error(None, -32700, "parse error")
        if isinstance(document, list):
            if not document:
                return _error(None, -32600, "empty batch")
            answers = [await self._one(node, item) for item in document]
            return orjson.dumps(answers)
        return orjson.dumps(await self._one(node, document))

    async def _one(self, node: ChainNode, item: Any) -> dict[str, Any]:
        if not isinstance(item, dict) or not isinstance(item.get("method"), str):
            return {"jsonrpc": "2.0", "id": None, "error": {"code": -32600, "message": "invalid request"}}
        request_id = item.get("id")
        params = item.get("params", [])
        if not isinstance(params, list):
            return _error_object(request_id, -32602, "params must be an array")
        try:
            result = await node.call(item["method"], params)
        except RpcError as error:
            return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}
        except Exception:
            log.exception("chain method failed", method=item["method"])
            return _error_object(request_id, -32603, "internal error")
        return {"jsonrpc": "2.0", "id": request_id, "result": result}


def _error_object(request_id: Any, code: int, message: str) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": request_id, "error": {"code": code, "message": message}}


def _error(request_id: Any, code: int, message: str) -> bytes:
    return orjson.dumps(_error_object(request_id, code, message))


async def _read_body(receive: Receive) -> bytes:
    chunks: list[bytes] = []
    while True:
        message = await receive()
        chunks.append(message.get("body", b""))
        if not message.get("more_body", False):
            return b"".join(chunks)


async def _respond(send: Send, status: int, body: bytes) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
        }
    )
    await send({"type": "http.response.body", "body": body})


def chain_factory(*, chain_id: int, data_dir: Any | None, mining: MiningConfig, accounts: int = 10) -> ChainFactory:
    """Builds named chains: persisted in ``data_dir/<name>.sqlite`` when a directory is given."""
    from pathlib import Path

    def build(name: str) -> ChainNode:
        database = Path(data_dir) / f"{name}.sqlite" if data_dir is not None else None
        config = ChainConfig(chain_id=chain_id, accounts=accounts, database=database)
        return ChainNode(name, DevChain(config), mining)

    return build
