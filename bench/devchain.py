"""The embedded development chain under load, through the gateway, against anvil measured in the same run.

Starts ``edgeplane serve`` without an upstream (so ``mainnet`` is answered by the embedded py-evm development chain,
chain id 1337), anvil with ``--chain-id 1337`` and a second ``edgeplane serve --upstream mainnet=<anvil>``, all on
free loopback ports. Both chains prefund the same development accounts ("test test ... junk"), so a transaction
signed once is valid on both. Workloads, each at the given concurrencies:

- value transfers: ``eth_sendRawTransaction`` of transactions signed in advance (signing is not measured), every
  client sending for its own accounts so that nonces never race;
- contract deployments: the same, creating a small test contract (``Helper`` from ``tests/contracts``);
- contract calls: ``eth_call`` of ``total(uint256,uint256)`` on a deployed ``TraceTarget``;
- ``trace_filter`` over 800 blocks of traffic (a transfer in every block, a ``run`` call every 100 blocks), with and
  without an address filter, one call at a time.

Targets: ``devchain`` (the development chain through the gateway: what a user of ``edgeplane serve`` gets),
``devchain-direct`` (the chain process's own port, to tell the gateway's share from the chain's), ``anvil``
(directly) and ``anvil-gw`` (anvil through the second gateway). Ratios are devchain / anvil. anvil's own
``trace_filter`` takes at most 300 blocks, so over 800 blocks anvil is measured through the gateway (which splits
the range) and, for reference, directly over 300 blocks.

The load generator is the one of ``bench/gateway.py`` (its own process, minimal keep-alive HTTP/1.1 client,
pre-built requests), here with an ordered stream of requests per client. It also reports the CPU each process used
while measuring (percent of one core, from /proc).

Usage: ``.venv/bin/python bench/devchain.py [--seconds 3] [--count 20000] [--concurrency 1 ...] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import dataclasses
import json
import math
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
import urllib.request
from collections.abc import Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

if __package__:  # python -m bench.devchain
    from bench.gateway import (
        REPO_ROOT,
        ROUND_GRACE_SECONDS,
        _CpuSnapshot,
        _percentile,
        _pid,
        _RawConnection,
        _terminate_as_interrupt,
        loadgen_child,
    )
else:  # python bench/devchain.py: this file's directory is on sys.path
    from gateway import (
        REPO_ROOT,
        ROUND_GRACE_SECONDS,
        _CpuSnapshot,
        _percentile,
        _pid,
        _RawConnection,
        _terminate_as_interrupt,
        loadgen_child,
    )

# Target from the issue: value transfers through the gateway, as raw transactions.
TARGET_TRANSFERS_PER_SECOND = 250.0

CHAIN_ID = 1337
NETWORK = "mainnet"
CONCURRENCIES = (1, 8, 16)
TARGETS = ("devchain", "devchain-direct", "anvil", "anvil-gw")
DEV_FUNDED_ACCOUNTS = 10  # prefunded on both chains; more senders are funded by the benchmark
MAX_SENDERS = 64
EXTRA_SENDER_FUNDS_WEI = 100 * 10**18

TRANSFER_TO = bytes.fromhex("000000000000000000000000000000000000bEEF".lower())
TRANSFER_GAS = 21_000
MAX_FEE_PER_GAS = 50 * 10**9  # far above both chains' base fee (1 gwei at genesis, falling while blocks are light)
MAX_PRIORITY_FEE_PER_GAS = 10**9
RUN_VALUE_WEI = 10  # run() passes 2 wei on
DEPLOY_CONTRACT = "Helper"  # the smallest test contract with a constructor without arguments

TRACE_BLOCKS = 800  # the gateway's trace_filter block range limit
ANVIL_TRACE_BLOCKS = 300  # anvil's own trace_filter limit
RUN_EVERY_BLOCKS = 100
TRACE_COUNT = 200  # the gateway's limit (and its default); sent to every target, so all answer the same traces
TRAFFIC_SECONDS_LIMIT = 180.0  # producing the 800 blocks of traffic; the rest is filled with empty blocks
TRACE_CALLS_LIMIT = 20_000

SETUP_TIMEOUT_SECONDS = 30.0
MAX_RECEIPT_POLLS = 10_000
RECEIPT_POLL_PAUSE_SECONDS = 0.0005  # doubling up to the maximum
MAX_RECEIPT_POLL_PAUSE_SECONDS = 0.004
SETTLE_TIMEOUT_SECONDS = 300.0  # anvil mining the transactions it accepted faster than it mines them


# -- signing (before measuring) --------------------------------------------------------------------------------------


class Signer:
    """Signs EIP-1559 transactions for the development accounts; the same (account, nonce, what) gives the same bytes.

    RLP and secp256k1 (coincurve) directly, about ten times faster than ``eth_account`` per transaction, so large
    rounds can be signed in advance; ``check`` compares one transaction with ``eth_account``'s signing.
    """

    def __init__(self, private_keys: Sequence[str]) -> None:
        import coincurve

        self._keys = [coincurve.PrivateKey(bytes.fromhex(key.removeprefix("0x"))) for key in private_keys]
        self._cache: dict[tuple[int, int, bytes, int, int, bytes], bytes] = {}

    def sign(self, sender: int, nonce: int, *, to: bytes, value: int, gas: int, data: bytes) -> bytes:
        key = (sender, nonce, to, value, gas, data)
        cached = self._cache.get(key)
        if cached is not None:
            return cached
        import rlp
        from eth_utils.crypto import keccak

        fields: list[Any] = [CHAIN_ID, nonce, MAX_PRIORITY_FEE_PER_GAS, MAX_FEE_PER_GAS, gas, to, value, data, []]
        signature = self._keys[sender].sign_recoverable(keccak(b"\x02" + rlp.encode(fields)), hasher=None)
        r, s, y_parity = int.from_bytes(signature[:32], "big"), int.from_bytes(signature[32:64], "big"), signature[64]
        raw = b"\x02" + rlp.encode([*fields, y_parity, r, s])
        self._cache[key] = raw
        return raw

    def check(self, private_key: str) -> None:
        """Raises if this signer and eth_account disagree on a transfer."""
        from eth_account import Account
        from eth_utils.address import to_checksum_address

        ours = self.sign(0, 0, to=TRANSFER_TO, value=1, gas=TRANSFER_GAS, data=b"")
        theirs = Account.sign_transaction(
            {
                "type": 2,
                "chainId": CHAIN_ID,
                "nonce": 0,
                "to": to_checksum_address(TRANSFER_TO),
                "value": 1,
                "gas": TRANSFER_GAS,
                "maxFeePerGas": MAX_FEE_PER_GAS,
                "maxPriorityFeePerGas": MAX_PRIORITY_FEE_PER_GAS,
                "data": b"",
            },
            private_key,
        ).raw_transaction
        if bytes(theirs) != ours:
            raise RuntimeError("the benchmark's signer disagrees with eth_account")

    def forget(self) -> None:
        self._cache.clear()


def rpc_body(method: str, params: list[Any], request_id: int = 1) -> bytes:
    return json.dumps(
        {"jsonrpc": "2.0", "id": request_id, "method": method, "params": params}, separators=(",", ":")
    ).encode()


def send_raw_body(raw: bytes) -> bytes:
    return rpc_body("eth_sendRawTransaction", ["0x" + raw.hex()])


def rpc(url: str, method: str, params: list[Any]) -> Any:
    """One JSON-RPC call (setup and checks only); raises RuntimeError with the node's error."""
    request = urllib.request.Request(url, data=rpc_body(method, params), headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=SETUP_TIMEOUT_SECONDS) as response:
        answer = json.loads(response.read())
    if answer.get("error") is not None or "result" not in answer:
        raise RuntimeError(f"{url}: {method}: {answer.get('error', answer)}")
    return answer["result"]


# -- the load generator (a child process) -------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class LoadSpec:
    """One round: each client sends its own stream of request bodies, in order, one at a time."""

    url: str
    streams: tuple[tuple[bytes, ...], ...]
    warmup_seconds: float
    seconds: float
    watched_pids: dict[str, int]
    stop_on_error: bool = True  # a failed transaction leaves a nonce gap: the rest of that stream would fail too
    # Transaction workloads: a batch of eth_getTransactionCount("latest") for every sender, sent to probe_url at
    # both ends of the measured window; the difference is the number of transactions mined in the window.
    probe_url: str | None = None
    probe: bytes | None = None
    # anvil: per stream, an eth_getTransactionReceipt body for each transaction, asked (again and again, bounded)
    # after the transaction was accepted until it has a receipt; so an operation is a mined transaction, as on the
    # development chain, which answers only then.
    receipts: tuple[tuple[bytes, ...], ...] | None = None


@dataclass(frozen=True, slots=True)
class LoadResult:
    """What one round measured: answers inside the measured window (latencies in ms, CPU in percent of one core)."""

    operations: int
    errors: int
    sent: int
    window_seconds: float
    operations_per_second: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    cpu_percent: dict[str, float]
    exhausted: bool  # every stream ran out before the time was up (the round was bound by --count)
    first_error: str | None = None
    mined_per_second: float | None = None  # transactions mined per second in the measured window (probe)
    pending_at_end: int = 0  # anvil: accepted transactions not yet mined when the round ended
    settle_seconds: float = 0.0  # and how long it took to mine them after the load generator had stopped


def _answered_ok(status: int, payload: bytes) -> bool:
    # Both servers put "result" (or "error") right after jsonrpc and id; trace records may hold an "error" member.
    return status == 200 and b'"result"' in payload[:96]


async def _drive(spec: LoadSpec) -> LoadResult:
    url = urlsplit(spec.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    head = f"POST {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
    built: dict[int, bytes] = {}  # by id(): a stream repeating one body builds its request once

    def request(body: bytes) -> bytes:
        data = built.get(id(body))
        if data is None:
            data = built[id(body)] = f"{head}Content-Length: {len(body)}\r\n\r\n".encode() + body
        return data

    streams = [[request(body) for body in stream] for stream in spec.streams]
    receipts = [[request(body) for body in stream] for stream in spec.receipts] if spec.receipts else None
    connections = [await _RawConnection.open(host, port) for _ in streams]
    prober: _RawConnection | None = None
    probe_request = b""
    if spec.probe_url is not None and spec.probe is not None:
        probe_at = urlsplit(spec.probe_url)
        prober = await _RawConnection.open(probe_at.hostname or "127.0.0.1", probe_at.port or 80)
        probe_request = (
            f"POST {probe_at.path or '/'} HTTP/1.1\r\nHost: {probe_at.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(spec.probe)}\r\n\r\n"
        ).encode() + spec.probe

    async def mined() -> tuple[float, int] | None:
        """(when, transactions mined so far by the senders), the time taken halfway through the probe."""
        if prober is None:
            return None
        begin = time.perf_counter()
        status, payload = await prober.request(probe_request)
        answers = json.loads(payload)
        if status != 200 or not isinstance(answers, list):
            raise RuntimeError(f"the mined-transactions probe failed: {payload[:200]!r}")
        return (begin + time.perf_counter()) / 2, sum(int(answer["result"], 16) for answer in answers)

    latencies: list[float] = []
    errors = 0
    sent = 0
    last_end = 0.0
    first_error: str | None = None
    started = time.perf_counter()
    measure_from = started + spec.warmup_seconds
    measure_until = measure_from + spec.seconds

    async def client(stream: list[bytes], connection: _RawConnection, receipt_requests: list[bytes] | None) -> None:
        nonlocal errors, sent, last_end, first_error
        for index, data in enumerate(stream):
            begin = time.perf_counter()
            if begin >= measure_until:
                return
            sent += 1
            try:
                status, payload = await connection.request(data)
                ok = _answered_ok(status, payload)
                if ok and receipt_requests is not None:
                    pause = RECEIPT_POLL_PAUSE_SECONDS
                    for _ in range(MAX_RECEIPT_POLLS):
                        status, payload = await connection.request(receipt_requests[index])
                        if b'"result":null' not in payload[:96]:
                            break
                        await asyncio.sleep(pause)  # polling flat out slows anvil's miner
                        pause = min(2 * pause, MAX_RECEIPT_POLL_PAUSE_SECONDS)
                    else:
                        payload = b"no receipt after %d polls" % MAX_RECEIPT_POLLS
                    ok = _answered_ok(status, payload)
            except (OSError, TimeoutError) as error:
                errors += 1
                first_error = first_error or f"{type(error).__name__}: {error}"
                return
            end = time.perf_counter()
            if begin >= measure_from and end <= measure_until:
                if ok:
                    latencies.append(end - begin)
                    last_end = max(last_end, end)
                else:
                    errors += 1
            if not ok:
                first_error = first_error or f"HTTP {status}: {payload[:300].decode(errors='replace')}"
                if spec.stop_on_error:
                    return

    tasks = [
        asyncio.create_task(client(stream, connection, receipts[index] if receipts else None))
        for index, (stream, connection) in enumerate(zip(streams, connections, strict=True))
    ]
    try:
        await asyncio.wait(tasks, timeout=max(0.0, measure_from - time.perf_counter()))
        before = _CpuSnapshot.take(spec.watched_pids)
        mined_before = await mined()
        await asyncio.wait(tasks, timeout=max(0.0, measure_until - time.perf_counter()))
        after = _CpuSnapshot.take(spec.watched_pids)
        mined_after = await mined()
        exhausted = all(task.done() for task in tasks) and time.perf_counter() < measure_until
        await asyncio.gather(*tasks)
    finally:
        for task in tasks:
            task.cancel()
        for connection in connections:
            connection.close()
        if prober is not None:
            prober.close()
    mined_per_second = None
    if mined_before is not None and mined_after is not None:
        mined_per_second = (mined_after[1] - mined_before[1]) / max(mined_after[0] - mined_before[0], 1e-9)
    window = (last_end - measure_from) if exhausted else spec.seconds
    window = max(window, 1e-9)
    latencies.sort()
    return LoadResult(
        operations=len(latencies),
        errors=errors,
        sent=sent,
        window_seconds=window,
        operations_per_second=len(latencies) / window if latencies else 0.0,
        p50_ms=1000 * _percentile(latencies, 0.50),
        p99_ms=1000 * _percentile(latencies, 0.99),
        mean_ms=1000 * statistics.fmean(latencies) if latencies else float("nan"),
        cpu_percent=after.percent_since(before),
        exhausted=exhausted,
        first_error=first_error,
        mined_per_second=mined_per_second,
    )


def run_load(spec: LoadSpec) -> LoadResult:
    """Runs one round in a fresh load generator process and waits for it (bounded)."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=loadgen_child, args=(_drive, spec, sender), name="edgeplane-bench-loadgen", daemon=True
    )
    process.start()
    sender.close()
    try:
        deadline = spec.warmup_seconds + spec.seconds + ROUND_GRACE_SECONDS
        if not receiver.poll(deadline):
            raise RuntimeError(f"the load generator did not finish within {deadline:.0f}s")
        try:
            answer = receiver.recv()
        except EOFError:
            raise RuntimeError(f"the load generator died (exit code {process.exitcode})") from None
        if isinstance(answer, str):
            raise RuntimeError(f"the load generator failed: {answer}")
        return LoadResult(**answer)
    finally:
        receiver.close()
        process.join(timeout=5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


# -- the setup ------------------------------------------------------------------------------------------------------


@dataclass(slots=True)
class Bench:
    """What the workloads need: URLs per target, the chain each one reaches, the signer and the accounts."""

    urls: dict[str, str]
    chain_of: dict[str, str]  # target -> "devchain" or "anvil"
    control_url: dict[str, str]  # chain -> a URL that takes evm_mine / anvil_mine
    pids: dict[str, int]
    signer: Signer
    addresses: list[str]
    trace_target: dict[str, str] = field(default_factory=dict)  # chain -> TraceTarget address
    deploy_gas: int = 0
    run_gas: int = 0

    def nonces(self, target: str) -> list[int]:
        url = self.urls[target]
        return [int(rpc(url, "eth_getTransactionCount", [address, "latest"]), 16) for address in self.addresses]

    def head(self, target: str) -> int:
        return int(rpc(self.urls[target], "eth_blockNumber", []), 16)

    def probe(self) -> bytes:
        """A batch request for every sender's count of mined transactions."""
        return json.dumps(
            [
                {"jsonrpc": "2.0", "id": index, "method": "eth_getTransactionCount", "params": [address, "latest"]}
                for index, address in enumerate(self.addresses)
            ],
            separators=(",", ":"),
        ).encode()

    def settle(self, target: str) -> tuple[int, float]:
        """Mines what anvil accepted but has not mined yet; returns (pending at the start, seconds it took).

        anvil answers ``eth_sendRawTransaction`` once a transaction is in its pool and mines it after. Under
        concurrent load its automine falls behind (one transaction per block here), and what is left in the pool
        when the senders stop stays there until something else triggers a block: ``evm_mine`` does (a block takes
        every pending transaction, up to the gas limit). The development chain answers once a transaction is in a
        block, so it never has any left.
        """
        if self.chain_of[target] != "anvil":
            return 0, 0.0
        url = self.control_url["anvil"]
        started = time.perf_counter()
        pending_at_start: int | None = None
        while time.perf_counter() - started < SETTLE_TIMEOUT_SECONDS:
            status = rpc(url, "txpool_status", [])
            pending = int(str(status.get("pending", "0x0")), 16) + int(str(status.get("queued", "0x0")), 16)
            if pending_at_start is None:
                pending_at_start = pending
            if pending == 0:
                return pending_at_start, time.perf_counter() - started
            rpc(url, "evm_mine", [])
        raise RuntimeError(f"anvil still has {pending_at_start} transactions pending")


def _chain_url_from_log(log_text: str) -> tuple[str, dict[str, int]]:
    """The development chain's own URL (for ``network``) and the pids of ``edgeplane serve``'s children.

    From the JSON log: "started the development chain" (its ``url``, and its ``pid`` in older versions) and
    "started a child process" (``child`` ``devchain`` and the edge workers ``edge-worker-N``).
    """
    url: str | None = None
    pids: dict[str, int] = {}
    for line in log_text.splitlines():
        with contextlib.suppress(ValueError):
            entry = json.loads(line)
            if not isinstance(entry, dict):
                continue
            pid = entry.get("pid")
            if entry.get("event") == "started the development chain":
                url = str(entry["url"]).replace("<network>", NETWORK)
                if isinstance(pid, int):
                    pids["chain"] = pid
            elif entry.get("event") == "started a child process" and isinstance(pid, int):
                child = str(entry.get("child"))
                pids["chain" if child == "devchain" else child] = pid
    if url is None:
        raise RuntimeError("edgeplane's log does not say where the development chain listens")
    return url, pids


def send_all(bench: Bench, chain_targets: Sequence[str], raws: Sequence[bytes]) -> list[dict[str, Any]]:
    """Sends transactions one by one to each target and returns the last target's receipts (all must succeed)."""
    receipts: list[dict[str, Any]] = []
    for target in chain_targets:
        receipts = []
        for raw in raws:
            tx_hash = rpc(bench.urls[target], "eth_sendRawTransaction", ["0x" + raw.hex()])
            receipt = None
            for _ in range(200):  # anvil may answer before its block is stored; bounded
                receipt = rpc(bench.urls[target], "eth_getTransactionReceipt", [tx_hash])
                if receipt is not None:
                    break
                time.sleep(0.01)
            if not isinstance(receipt, dict) or receipt.get("status") != "0x1":
                raise RuntimeError(f"{target}: transaction {tx_hash} failed: {receipt}")
            receipts.append(receipt)
    return receipts


def prepare(bench: Bench, senders: int) -> None:
    """Funds the extra senders and deploys TraceTarget, with the same signed transactions on both chains."""
    from tests.contracts import load_contract

    if bench.nonces("devchain") != bench.nonces("anvil"):
        raise RuntimeError("the two chains do not start from the same nonces")
    nonces = bench.nonces("devchain")
    raws = []
    for index in range(DEV_FUNDED_ACCOUNTS, senders):
        funder = index % DEV_FUNDED_ACCOUNTS
        to = bytes.fromhex(bench.addresses[index].removeprefix("0x"))
        raws.append(
            bench.signer.sign(funder, nonces[funder], to=to, value=EXTRA_SENDER_FUNDS_WEI, gas=TRANSFER_GAS, data=b"")
        )
        nonces[funder] += 1
    _, bytecode = load_contract("TraceTarget")
    raws.append(bench.signer.sign(0, nonces[0], to=b"", value=0, gas=8_000_000, data=bytes.fromhex(bytecode[2:])))
    for chain in ("devchain", "anvil"):
        receipts = send_all(bench, [chain], raws)
        bench.trace_target[chain] = str(receipts[-1]["contractAddress"])
    _, helper = load_contract(DEPLOY_CONTRACT)
    estimate = int(rpc(bench.urls["anvil"], "eth_estimateGas", [{"from": bench.addresses[0], "data": helper}]), 16)
    bench.deploy_gas = estimate * 5 // 4
    run = {"from": bench.addresses[0], "to": bench.trace_target["anvil"], "value": hex(RUN_VALUE_WEI)}
    run["data"] = "0x" + (_run_selector() + (1).to_bytes(32, "big")).hex()
    bench.run_gas = int(rpc(bench.urls["anvil"], "eth_estimateGas", [run]), 16) * 3 // 2


def _run_selector() -> bytes:
    from eth_utils.crypto import keccak

    return keccak(b"run(uint256)")[:4]


def gas_limits(bench: Bench) -> dict[str, int]:
    """The gas limit of each chain's latest block."""
    return {
        chain: int(rpc(bench.urls[chain], "eth_getBlockByNumber", ["latest", False])["gasLimit"], 16)
        for chain in ("devchain", "anvil")
    }


# -- the workloads --------------------------------------------------------------------------------------------------


def transaction_streams(
    bench: Bench, target: str, *, concurrency: int, count: int, senders: int, what: str
) -> tuple[tuple[tuple[bytes, ...], ...], tuple[tuple[bytes, ...], ...]]:
    """``count`` signed transactions split over ``concurrency`` streams; sender ``j`` belongs to stream ``j % c``.

    Returns the eth_sendRawTransaction bodies and the matching eth_getTransactionReceipt bodies.
    """
    from eth_utils.crypto import keccak

    from tests.contracts import load_contract

    nonces = bench.nonces(target)
    per_sender = math.ceil(count / senders)
    if what == "transfer":
        tx: dict[str, Any] = {"to": TRANSFER_TO, "value": 1, "gas": TRANSFER_GAS, "data": b""}
    else:
        _, bytecode = load_contract(DEPLOY_CONTRACT)
        tx = {"to": b"", "value": 0, "gas": bench.deploy_gas, "data": bytes.fromhex(bytecode[2:])}
    streams: list[list[bytes]] = [[] for _ in range(concurrency)]
    receipts: list[list[bytes]] = [[] for _ in range(concurrency)]
    owned = [[j for j in range(senders) if j % concurrency == stream] for stream in range(concurrency)]
    for stream, accounts in enumerate(owned):
        for step in range(per_sender):
            for account in accounts:
                raw = bench.signer.sign(account, nonces[account] + step, **tx)
                streams[stream].append(send_raw_body(raw))
                receipts[stream].append(rpc_body("eth_getTransactionReceipt", ["0x" + keccak(raw).hex()]))
    return tuple(tuple(stream) for stream in streams), tuple(tuple(stream) for stream in receipts)


def call_streams(bench: Bench, target: str, *, concurrency: int, count: int) -> tuple[tuple[bytes, ...], ...]:
    from eth_utils.crypto import keccak

    data = "0x" + keccak(b"total(uint256,uint256)")[:4].hex() + f"{3:064x}{4:064x}"
    body = rpc_body("eth_call", [{"to": bench.trace_target[bench.chain_of[target]], "data": data}, "latest"])
    per_client = math.ceil(count / concurrency)
    return tuple((body,) * per_client for _ in range(concurrency))


@dataclass(frozen=True, slots=True)
class Measured:
    """The median over the rounds of one target at one concurrency of one workload."""

    operations_per_second: float  # answered requests per second
    mined_per_second: float | None  # transaction workloads: transactions mined per second
    p50_ms: float
    p99_ms: float
    mean_ms: float
    operations: int
    errors: int
    exhausted: bool
    cpu_percent: dict[str, float]
    first_error: str | None
    pending_at_end: int
    settle_seconds: float

    @property
    def rate(self) -> float:
        """The figure compared: transactions mined per second, or requests answered per second for calls."""
        return self.mined_per_second if self.mined_per_second is not None else self.operations_per_second


def summarise(results: list[LoadResult]) -> Measured:
    names = sorted({name for result in results for name in result.cpu_percent})
    return Measured(
        operations_per_second=statistics.median(result.operations_per_second for result in results),
        mined_per_second=statistics.median(mined)
        if (mined := [result.mined_per_second for result in results if result.mined_per_second is not None])
        else None,
        p50_ms=statistics.median(result.p50_ms for result in results),
        p99_ms=statistics.median(result.p99_ms for result in results),
        mean_ms=statistics.median(result.mean_ms for result in results),
        operations=sum(result.operations for result in results),
        errors=sum(result.errors for result in results),
        exhausted=any(result.exhausted for result in results),
        cpu_percent={
            name: statistics.median(result.cpu_percent[name] for result in results if name in result.cpu_percent)
            for name in names
        },
        first_error=next((result.first_error for result in results if result.first_error), None),
        pending_at_end=max(result.pending_at_end for result in results),
        settle_seconds=max(result.settle_seconds for result in results),
    )


def _progress(args: argparse.Namespace, text: str) -> None:
    if not args.quiet:
        print(text, file=sys.stderr, flush=True)


def measure_workload(
    bench: Bench, args: argparse.Namespace, workload: str, targets: Sequence[str], senders: int
) -> dict[int, dict[str, Measured]]:
    """Rounds of one workload at each concurrency, the targets alternating in order from one round to the next."""
    by_concurrency: dict[int, dict[str, Measured]] = {}
    for concurrency in args.concurrency:
        results: dict[str, list[LoadResult]] = {target: [] for target in targets}
        for index in range(args.rounds):
            for target in targets if index % 2 == 0 else reversed(targets):
                receipts = None
                if workload == "calls":
                    streams = call_streams(bench, target, concurrency=concurrency, count=args.count)
                else:
                    what = "transfer" if workload == "transfers" else "deploy"
                    streams, receipts = transaction_streams(
                        bench, target, concurrency=concurrency, count=args.count, senders=senders, what=what
                    )
                    if bench.chain_of[target] != "anvil":
                        receipts = None  # the development chain answers once the transaction is mined
                probe = None if workload == "calls" else bench.probe()
                spec = LoadSpec(
                    bench.urls[target],
                    streams,
                    args.warmup,
                    args.seconds,
                    bench.pids,
                    probe_url=bench.control_url[bench.chain_of[target]] if probe else None,
                    probe=probe,
                    receipts=receipts,
                )
                result = run_load(spec)
                if workload != "calls":
                    pending, waited = bench.settle(target)
                    result = dataclasses.replace(result, pending_at_end=pending, settle_seconds=waited)
                results[target].append(result)
                _progress(
                    args,
                    f"  {workload:<11} c={concurrency:<3} {target:<15} {result.operations_per_second:9.1f} answered/s"
                    + (f" {result.mined_per_second:9.1f} mined/s" if result.mined_per_second is not None else "")
                    + f"  p50 {result.p50_ms:8.2f} ms  errors {result.errors}"
                    + (f"  {result.pending_at_end} pending at the end" if result.pending_at_end else "")
                    + ("  (ran out of requests: raise --count)" if result.exhausted else "")
                    + (f"  first error: {result.first_error}" if result.first_error else ""),
                )
        bench.signer.forget()  # nonces have moved on; the transactions signed for this concurrency are spent
        by_concurrency[concurrency] = {target: summarise(rounds) for target, rounds in results.items()}
    return by_concurrency


def produce_traffic(bench: Bench, args: argparse.Namespace, target: str) -> tuple[int, int]:
    """800 blocks on the chain behind ``target``: a transaction per block (a transfer, every 100th a ``run``).

    Sent one at a time through ``target``, each waiting for its receipt, so each is a block of its own; if that
    takes longer than the time limit, the rest of the range is filled with empty blocks. Returns the first and the
    last block of the range.
    """
    chain = bench.chain_of[target]
    nonces = bench.nonces(target)
    first = bench.head(target) + 1
    contract = bytes.fromhex(bench.trace_target[chain].removeprefix("0x"))
    run_selector = _run_selector()
    started = time.perf_counter()
    sent = 0
    for block in range(TRACE_BLOCKS):
        if time.perf_counter() - started > TRAFFIC_SECONDS_LIMIT:
            break
        sender = block % len(bench.addresses)
        if block % RUN_EVERY_BLOCKS == RUN_EVERY_BLOCKS // 2:
            data = run_selector + (block + 1).to_bytes(32, "big")
            raw = bench.signer.sign(
                sender, nonces[sender], to=contract, value=RUN_VALUE_WEI, gas=bench.run_gas, data=data
            )
        else:
            raw = bench.signer.sign(sender, nonces[sender], to=TRANSFER_TO, value=1, gas=TRANSFER_GAS, data=b"")
        nonces[sender] += 1
        send_all(bench, [target], [raw])  # waits for the receipt, so every transaction gets a block of its own
        sent += 1
    elapsed = time.perf_counter() - started
    last = first + TRACE_BLOCKS - 1
    missing = last - bench.head(target)
    if missing > 0:
        method = "evm_mine" if chain == "devchain" else "anvil_mine"
        rpc(bench.control_url[chain], method, [hex(missing)])
    _progress(
        args,
        f"  traffic on {chain}: {sent} transactions in {elapsed:.1f} s (one block each, receipts read),"
        f" blocks {first}..{last}" + (f", {missing} empty blocks mined to fill the range" if missing > 0 else ""),
    )
    return first, last


@dataclass(frozen=True, slots=True)
class TraceCase:
    label: str
    target: str
    blocks: int
    address_filter: bool


TRACE_CASES = (
    TraceCase("devchain 800", "devchain", TRACE_BLOCKS, False),
    TraceCase("devchain-direct 800", "devchain-direct", TRACE_BLOCKS, False),
    TraceCase("anvil-gw 800", "anvil-gw", TRACE_BLOCKS, False),
    TraceCase("devchain 300", "devchain", ANVIL_TRACE_BLOCKS, False),
    TraceCase("anvil 300", "anvil", ANVIL_TRACE_BLOCKS, False),
)


def trace_body(first: int, blocks: int, address: str | None) -> bytes:
    query: dict[str, Any] = {"fromBlock": hex(first), "toBlock": hex(first + blocks - 1), "count": TRACE_COUNT}
    if address is not None:
        query["toAddress"] = [address]
    return rpc_body("trace_filter", [query])


def measure_trace_filter(bench: Bench, args: argparse.Namespace, targets: Sequence[str]) -> dict[str, Any]:
    ranges: dict[str, tuple[int, int]] = {}
    for target in ("devchain", "anvil"):
        ranges[target] = produce_traffic(bench, args, target)
    results: dict[str, Any] = {}
    calls = min(args.count, TRACE_CALLS_LIMIT)
    for address_filter in (False, True):
        for case in TRACE_CASES:
            if case.target not in targets:
                continue
            chain = bench.chain_of[case.target]
            first, _ = ranges[chain]
            address = bench.trace_target[chain] if address_filter else None
            body = trace_body(first, case.blocks, address)
            traces = len(rpc(bench.urls[case.target], "trace_filter", json.loads(body)["params"]))
            spec = LoadSpec(bench.urls[case.target], ((body,) * calls,), args.warmup, args.seconds, bench.pids, False)
            measured = summarise([run_load(spec)])
            label = f"{case.label} {'toAddress' if address_filter else 'all'}"
            _progress(
                args,
                f"  trace_filter {label:<28} p50 {measured.p50_ms:8.2f} ms  mean {measured.mean_ms:8.2f} ms"
                f"  {traces} traces  errors {measured.errors}",
            )
            results[label] = {"case": asdict(case), "traces": traces, "first_block": first, **asdict(measured)}
    return results


# -- reporting ------------------------------------------------------------------------------------------------------


def _ratio(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 and not math.isnan(denominator) else None


def _format_ratio(value: float | None) -> str:
    return f"{value:.2f}" if value is not None else "-"


def report(args: argparse.Namespace, measured: dict[str, Any], targets: Sequence[str]) -> dict[str, Any]:
    document: dict[str, Any] = {
        "date": time.strftime("%Y-%m-%d"),
        "cpu_count": os.cpu_count(),
        "seconds_per_round": args.seconds,
        "warmup_seconds": args.warmup,
        "count_per_round": args.count,
        "rounds": args.rounds,
        "concurrency": list(args.concurrency),
        "targets": list(targets),
        "workloads": {},
    }
    titles = {
        "transfers": "value transfers (eth_sendRawTransaction, signed in advance), per second",
        "deployments": f"contract deployments ({DEPLOY_CONTRACT}, raw transactions), per second",
        "calls": "contract calls (eth_call total(3,4) on TraceTarget), per second",
    }
    for workload, by_concurrency in measured.items():
        if workload == "trace_filter":
            continue
        print(f"\n{titles[workload]}")
        print(
            f"  {'c':>3} "
            + " ".join(f"{target:>15}" for target in targets)
            + f" {'dev/anvil':>10} {'dev/anvil-gw':>12}   cpu % while measuring devchain"
        )
        rows: dict[str, Any] = {}
        for concurrency, by_target in by_concurrency.items():
            dev = by_target.get("devchain")
            anvil = by_target.get("anvil")
            anvil_gw = by_target.get("anvil-gw")
            ratio = _ratio(dev.rate, anvil.rate) if dev and anvil else None
            ratio_gw = _ratio(dev.rate, anvil_gw.rate) if dev and anvil_gw else None
            cpu = "  ".join(f"{name} {value:.0f}" for name, value in (dev.cpu_percent if dev else {}).items())
            print(
                f"  {concurrency:>3} "
                + " ".join(f"{by_target[target].rate:15.1f}" for target in targets)
                + f" {_format_ratio(ratio):>10} {_format_ratio(ratio_gw):>12}   {cpu}"
            )
            errors = {target: result.first_error for target, result in by_target.items() if result.errors}
            if errors:
                print(f"      errors: {errors}")
            rows[str(concurrency)] = {
                "targets": {target: {**asdict(result), "rate": result.rate} for target, result in by_target.items()},
                "ratio_devchain_anvil": ratio,
                "ratio_devchain_anvil_gw": ratio_gw,
            }
        document["workloads"][workload] = rows
    traces = measured.get("trace_filter")
    if traces:
        print(f"\ntrace_filter, one call at a time, count {TRACE_COUNT}: milliseconds per call (p50, mean)")
        for label, result in traces.items():
            print(f"  {label:<32} {result['p50_ms']:9.2f} {result['mean_ms']:9.2f}   {result['traces']} traces")
        for kind in ("all", "toAddress"):
            pairs = (("devchain 800", "anvil-gw 800"), ("devchain 300", "anvil 300"))
            for dev_label, anvil_label in pairs:
                dev_result, anvil_result = traces.get(f"{dev_label} {kind}"), traces.get(f"{anvil_label} {kind}")
                if dev_result and anvil_result:
                    ratio = _ratio(dev_result["p50_ms"], anvil_result["p50_ms"])
                    print(f"  ratio {dev_label} / {anvil_label} ({kind}), time per call: {_format_ratio(ratio)}")
                    traces[f"{dev_label} {kind}"].setdefault("ratio_to", {})[anvil_label] = ratio
        document["workloads"]["trace_filter"] = traces
    transfers = measured.get("transfers", {})
    rates = {c: by_target["devchain"].rate for c, by_target in transfers.items() if "devchain" in by_target}
    met_at = [c for c, rate in rates.items() if rate >= TARGET_TRANSFERS_PER_SECOND]
    if rates:
        best = max(rates, key=lambda c: rates[c])
        verdict = "MET at concurrency " + ", ".join(map(str, met_at)) if met_at else "NOT MET at any concurrency"
        print(
            f"\ntarget: >= {TARGET_TRANSFERS_PER_SECOND:.0f} value transfers/s through the gateway: best"
            f" {rates[best]:.0f}/s at concurrency {best} -> {verdict}"
        )
        document["target"] = {
            "transfers_per_second": TARGET_TRANSFERS_PER_SECOND,
            "by_concurrency": {str(c): rate for c, rate in rates.items()},
            "met_at_concurrency": met_at,
            "met": bool(met_at),
        }
    return document


# -- main -----------------------------------------------------------------------------------------------------------


# trace_filter first: the development chain's block gas limit shrinks with every block that is less than half
# full (by 1/1024 a block, py-evm's rule), and its 800 blocks of traffic need room for the `run` transactions.
WORKLOADS = ("trace_filter", "transfers", "deployments", "calls")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per round (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each round (default 0.5)")
    parser.add_argument(
        "--count",
        type=int,
        default=30_000,
        help="requests per round at most, warm-up included (default 30000)",
    )
    parser.add_argument("--rounds", type=int, default=1, help="rounds per target and concurrency (default 1)")
    parser.add_argument(
        "--concurrency",
        type=int,
        action="append",
        help=f"a concurrency to measure; repeatable (default {', '.join(map(str, CONCURRENCIES))})",
    )
    parser.add_argument(
        "--workload", choices=WORKLOADS, action="append", help="a workload to run; repeatable (default: all)"
    )
    parser.add_argument(
        "--target", choices=TARGETS, action="append", help="a target to measure; repeatable (default: all)"
    )
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON document at the end")
    parser.add_argument("--quiet", action="store_true", help="no per-round progress on stderr")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 600:
        parser.error("--seconds must be in (0, 600]")
    if not 0 <= args.warmup <= 60:
        parser.error("--warmup must be in [0, 60]")
    if not 1 <= args.count <= 1_000_000:
        parser.error("--count must be in [1, 1000000]")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be in [1, 20]")
    args.concurrency = tuple(args.concurrency or CONCURRENCIES)
    if not all(1 <= concurrency <= MAX_SENDERS for concurrency in args.concurrency):
        parser.error(f"--concurrency must be in [1, {MAX_SENDERS}]")
    args.workload = tuple(args.workload or WORKLOADS)
    args.target = tuple(target for target in TARGETS if target in (args.target or TARGETS))
    if "devchain" not in args.target or "anvil" not in args.target:
        parser.error("--target: devchain and anvil are always measured (they are the two sides of every ratio)")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from edgeplane.chain.dev_accounts import dev_accounts
    from tests.support.anvil import AnvilNode
    from tests.support.edgeplane import EdgeplaneProcess

    senders = max(DEV_FUNDED_ACCOUNTS, *args.concurrency)
    accounts = dev_accounts(senders)
    with _terminate_as_interrupt(), contextlib.ExitStack() as stack:
        _progress(args, "starting anvil and two edgeplane processes ...")
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="edgeplane-bench-devchain-")))
        node = stack.enter_context(AnvilNode(chain_id=CHAIN_ID))
        dev_edge = stack.enter_context(EdgeplaneProcess(scratch / "dev"))
        anvil_edge = stack.enter_context(
            EdgeplaneProcess(
                scratch / "anvil", upstreams=(f"{NETWORK}={node.url}",), extra_args=("--log-level", "warning")
            )
        )
        chain_url, child_pids = _chain_url_from_log(dev_edge.log_path.read_text(errors="replace"))
        urls = {
            "devchain": dev_edge.rpc_url(NETWORK),
            "devchain-direct": chain_url,
            "anvil": node.url,
            "anvil-gw": anvil_edge.rpc_url(NETWORK),
        }
        pids = {"edge": _pid(dev_edge), "anvil": _pid(node), "edge-anvil": _pid(anvil_edge), **child_pids}
        signer = Signer([account.private_key for account in accounts])
        signer.check(accounts[0].private_key)
        signer.forget()
        bench = Bench(
            urls=urls,
            chain_of={"devchain": "devchain", "devchain-direct": "devchain", "anvil": "anvil", "anvil-gw": "anvil"},
            control_url={"devchain": chain_url, "anvil": node.url},
            pids={name: pid for name, pid in pids.items() if pid is not None},
            signer=signer,
            addresses=[account.address for account in accounts],
        )
        for target in args.target:
            if int(rpc(urls[target], "eth_chainId", []), 16) != CHAIN_ID:
                raise RuntimeError(f"{target} is not chain {CHAIN_ID}")
        measured: dict[str, Any] = {}
        try:
            prepare(bench, senders)
            for workload in args.workload:
                _progress(args, f"{workload} ... (block gas limits: {gas_limits(bench)})")
                if workload == "trace_filter":
                    measured[workload] = measure_trace_filter(bench, args, args.target)
                else:
                    measured[workload] = measure_workload(bench, args, workload, args.target, senders)
        except RuntimeError:
            print(f"the end of edgeplane's log (development chain):\n{dev_edge.log()}", file=sys.stderr)
            raise
        _progress(args, f"block gas limits at the end: {gas_limits(bench)}")
        document = report(args, measured, args.target)
        document["gas_limit_at_end"] = gas_limits(bench)
        if args.json:
            print(json.dumps(document, indent=None, sort_keys=True))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; stopped anvil and edgeplane", file=sys.stderr)
        sys.exit(130)
