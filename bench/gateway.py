"""What the Ethereum gateway adds on top of a real node: latency and throughput, direct and through ``edgeplane serve``.

Starts anvil and ``edgeplane serve --upstream mainnet=<anvil>`` on free loopback ports, deploys the ``TraceTarget``
test contract and sends a few ``run`` transactions so that ``eth_call`` and ``eth_getLogs`` do real work. Then the
same request mix (``eth_blockNumber``, ``eth_getBlockByNumber``, ``eth_call``, ``eth_getLogs`` over a few blocks, in
equal parts, each a single JSON-RPC request) goes to anvil directly and through the gateway, at concurrency 1 and 32,
in alternating rounds; each figure is the median over the rounds. The gateway runs as configured by default, with
its response cache: the mix repeats the same requests and the head does not move while measuring, so nearly every
request through the gateway is answered from the cache (the head is read again every 50 ms). ``--no-cache`` turns
the cache off, which measures the proxy path: every request goes on to anvil. The machine these figures come from is
small and shared, so what matters are the ratios between direct and gateway measured in the same run, not the absolute
numbers.

The load generator runs in its own process, so it shares no interpreter lock with this one: uvloop and, by default,
a minimal keep-alive HTTP/1.1 client with every request pre-built (about six times cheaper per request than aiohttp,
which ``--client aiohttp`` selects; with aiohttp, the load generator itself limits the direct figures here). It also
reports how much CPU it, the gateway and anvil used while measuring (percent of one core, from /proc), which shows
what limited a figure; "machine" is the whole machine, including whatever else runs on it, and "stolen" the CPU time
the host of a virtual machine gave to other guests while the benchmark wanted it (a round with much of it measured a
machine that was not all there: compare such rounds with care).

Usage: ``.venv/bin/python bench/gateway.py [--seconds 5] [--rounds 3] [--json]``
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import contextlib
import json
import multiprocessing
import os
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator
from dataclasses import asdict, dataclass
from multiprocessing.connection import Connection
from pathlib import Path
from typing import Any, cast
from urllib.parse import urlsplit

REPO_ROOT = Path(__file__).resolve().parents[1]

# Targets from the issue.
TARGET_ADDED_P50_MS = 0.3  # at concurrency 1
TARGET_THROUGHPUT_RATIO = 0.6  # gateway / direct, at concurrency 32
LATENCY_CONCURRENCY = 1
THROUGHPUT_CONCURRENCY = 32
CONCURRENCIES = (LATENCY_CONCURRENCY, THROUGHPUT_CONCURRENCY)

RUN_TRANSACTIONS = 5  # `run` calls sent to anvil, one block and one log each
MAX_REQUESTS_PER_ROUND = 5_000_000  # a bound on top of the time bound
REQUEST_TIMEOUT_SECONDS = 10.0
ROUND_GRACE_SECONDS = 60.0  # how long past its planned end a load round may take before it is abandoned

Target = str  # "direct" or "gateway"
Pids = int | tuple[int, ...]  # a process, or several whose CPU is added up


@dataclass(frozen=True, slots=True)
class RoundSpec:
    """One load round, as handed to the load generator process."""

    url: str
    bodies: tuple[bytes, ...]
    concurrency: int
    warmup_seconds: float
    seconds: float
    watched_pids: dict[str, Pids]
    client: str = "raw"


@dataclass(frozen=True, slots=True)
class RoundResult:
    """What one load round measured (latencies in milliseconds, CPU in percent of one core)."""

    requests: int
    errors: int
    seconds: float
    requests_per_second: float
    p50_ms: float
    p99_ms: float
    mean_ms: float
    cpu_percent: dict[str, float]


# -- the load generator (runs in a child process) ------------------------------------------------------------------


def _cpu_seconds(pids: Pids) -> float | None:
    """The CPU time of a process, or of several added up (an edgeplane's edge workers); None when none is known."""
    each = [_process_cpu_seconds(pid) for pid in ((pids,) if isinstance(pids, int) else pids)]
    known = [seconds for seconds in each if seconds is not None]
    return sum(known) if known else None


def _process_cpu_seconds(pid: int) -> float | None:
    """User plus system CPU time of a process (all its threads), from /proc; None where there is no /proc."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = stat[stat.rindex(")") + 2 :].split()
    # Fields 14 and 15 of proc(5) (utime, stime) are items 11 and 12 after the command name.
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def _machine_ticks() -> tuple[int, int, int] | None:
    """(busy, stolen, total) CPU ticks of the whole machine, summed over cores. Stolen ticks (a virtual machine's
    CPU given to another guest by the host) count as busy: the benchmark did not have them."""
    try:
        first = Path("/proc/stat").read_text().split("\n", 1)[0].split()
    except OSError:
        return None
    ticks = [int(value) for value in first[1:]]
    idle = ticks[3] + (ticks[4] if len(ticks) > 4 else 0)  # idle + iowait
    stolen = ticks[7] if len(ticks) > 7 else 0
    return sum(ticks) - idle, stolen, sum(ticks)


@dataclass(frozen=True, slots=True)
class _CpuSnapshot:
    at: float
    own: float
    processes: dict[str, float | None]
    machine: tuple[int, int, int] | None

    @classmethod
    def take(cls, pids: dict[str, Pids]) -> _CpuSnapshot:
        return cls(
            at=time.perf_counter(),
            own=time.process_time(),
            processes={name: _cpu_seconds(watched) for name, watched in pids.items()},
            machine=_machine_ticks(),
        )

    def percent_since(self, earlier: _CpuSnapshot) -> dict[str, float]:
        wall = max(self.at - earlier.at, 1e-9)
        usage = {"loadgen": 100.0 * (self.own - earlier.own) / wall}
        for name, now in self.processes.items():
            before = earlier.processes.get(name)
            if now is not None and before is not None:
                usage[name] = 100.0 * (now - before) / wall
        if self.machine is not None and earlier.machine is not None:
            busy, stolen, total = (now - before for now, before in zip(self.machine, earlier.machine, strict=True))
            cores = os.cpu_count() or 1
            usage["machine"] = 100.0 * cores * busy / max(total, 1)  # percent of one core, like the rest
            usage["stolen"] = 100.0 * cores * stolen / max(total, 1)
        return usage


def _percentile(ordered: list[float], fraction: float) -> float:
    if not ordered:
        return float("nan")
    index = min(len(ordered) - 1, max(0, round(fraction * (len(ordered) - 1))))
    return ordered[index]


class _RawConnection(asyncio.Protocol):
    """A minimal HTTP/1.1 keep-alive client connection: one request in flight, answers framed by Content-Length.

    Enough for the two servers measured here (both always send Content-Length) and several times cheaper per
    request than a general client, so the load generator takes less of the CPU the measured servers need.
    """

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._waiter: asyncio.Future[tuple[int, bytes]] | None = None
        self._transport: asyncio.Transport | None = None
        self._lost: Exception | None = None

    @classmethod
    async def open(cls, host: str, port: int) -> _RawConnection:
        loop = asyncio.get_running_loop()
        _, protocol = await loop.create_connection(cls, host, port)
        return protocol

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        self._transport = cast(asyncio.Transport, transport)  # uvloop's transports do not subclass asyncio's

    def connection_lost(self, exc: Exception | None) -> None:
        self._lost = exc or ConnectionError("the server closed the connection")
        if self._waiter is not None and not self._waiter.done():
            self._waiter.set_exception(self._lost)

    def data_received(self, data: bytes) -> None:
        self._buffer += data
        waiter = self._waiter
        if waiter is None or waiter.done():
            return
        head_end = self._buffer.find(b"\r\n\r\n")
        if head_end < 0:
            return
        head = bytes(self._buffer[:head_end]).lower()
        at = head.find(b"\r\ncontent-length:")
        if at < 0:
            waiter.set_exception(RuntimeError("an answer without Content-Length"))
            return
        line_end = head.find(b"\r\n", at + 2)
        length = int(head[at + 17 : line_end if line_end >= 0 else len(head)])
        total = head_end + 4 + length
        if len(self._buffer) < total:
            return
        status = int(head[9:12])
        body = bytes(self._buffer[head_end + 4 : total])
        del self._buffer[:total]
        waiter.set_result((status, body))

    async def request(self, data: bytes) -> tuple[int, bytes]:
        if self._lost is not None or self._transport is None:
            raise ConnectionError("the connection is closed")
        self._waiter = asyncio.get_running_loop().create_future()
        self._transport.write(data)
        async with asyncio.timeout(REQUEST_TIMEOUT_SECONDS):
            return await self._waiter

    def close(self) -> None:
        if self._transport is not None:
            self._transport.close()


Send = Callable[[int], Awaitable[tuple[int, bytes]]]


@contextlib.asynccontextmanager
async def _raw_senders(spec: RoundSpec) -> AsyncIterator[list[Send]]:
    """One keep-alive connection per concurrent client; each sends the i-th request of the mix, pre-built."""
    url = urlsplit(spec.url)
    host, port = url.hostname or "127.0.0.1", url.port or 80
    requests = [
        (
            f"POST {url.path or '/'} HTTP/1.1\r\nHost: {url.netloc}\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\n\r\n"
        ).encode()
        + body
        for body in spec.bodies
    ]
    connections = [await _RawConnection.open(host, port) for _ in range(spec.concurrency)]

    def sender(connection: _RawConnection) -> Send:
        def send(index: int) -> Awaitable[tuple[int, bytes]]:
            return connection.request(requests[index])

        return send

    try:
        yield [sender(connection) for connection in connections]
    finally:
        for connection in connections:
            connection.close()


@contextlib.asynccontextmanager
async def _aiohttp_senders(spec: RoundSpec) -> AsyncIterator[list[Send]]:
    """aiohttp with a keep-alive connection pool as large as the concurrency."""
    import aiohttp

    headers = {"Content-Type": "application/json"}
    connector = aiohttp.TCPConnector(limit=spec.concurrency, limit_per_host=spec.concurrency)
    timeout = aiohttp.ClientTimeout(total=REQUEST_TIMEOUT_SECONDS)
    async with aiohttp.ClientSession(
        connector=connector, timeout=timeout, auto_decompress=False, skip_auto_headers=("User-Agent",)
    ) as session:

        async def send(index: int) -> tuple[int, bytes]:
            async with session.post(spec.url, data=spec.bodies[index], headers=headers) as response:
                return response.status, await response.read()

        yield [send] * spec.concurrency


async def _drive(spec: RoundSpec) -> RoundResult:
    latencies: list[float] = []
    errors = 0
    kinds = len(spec.bodies)
    sent = 0
    senders = _raw_senders(spec) if spec.client == "raw" else _aiohttp_senders(spec)
    async with senders as sends:
        started = time.perf_counter()
        measure_from = started + spec.warmup_seconds
        measure_until = measure_from + spec.seconds

        async def client(offset: int, send: Send) -> None:
            nonlocal errors, sent
            index = offset
            while sent < MAX_REQUESTS_PER_ROUND:
                begin = time.perf_counter()
                if begin >= measure_until:
                    return
                sent += 1
                status, payload = await send(index % kinds)
                index += 1
                end = time.perf_counter()
                if begin >= measure_from and end <= measure_until:
                    latencies.append(end - begin)
                    if status != 200 or b'"error"' in payload:
                        errors += 1

        clients = [asyncio.create_task(client(offset, send)) for offset, send in enumerate(sends)]
        try:
            await asyncio.sleep(max(0.0, measure_from - time.perf_counter()))
            before = _CpuSnapshot.take(spec.watched_pids)
            await asyncio.sleep(max(0.0, measure_until - time.perf_counter()))
            after = _CpuSnapshot.take(spec.watched_pids)
            await asyncio.gather(*clients)
        finally:
            for task in clients:
                task.cancel()

    latencies.sort()
    count = len(latencies)
    return RoundResult(
        requests=count,
        errors=errors,
        seconds=spec.seconds,
        requests_per_second=count / spec.seconds,
        p50_ms=1000 * _percentile(latencies, 0.50),
        p99_ms=1000 * _percentile(latencies, 0.99),
        mean_ms=1000 * statistics.fmean(latencies) if latencies else float("nan"),
        cpu_percent=after.percent_since(before),
    )


def loadgen_child(drive: Callable[[Any], Awaitable[Any]], spec: Any, connection: Connection) -> None:
    """A load generator process: runs ``drive(spec)`` once on its own loop and sends back the result as a dict (or
    an error string). Shared by the benchmarks that measure from a separate process."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent handles Ctrl-C and terminates this process
    try:
        try:
            import uvloop
        except ImportError:
            result = asyncio.run(drive(spec))
        else:
            result = uvloop.run(drive(spec))
        answer: dict[str, Any] | str = asdict(result)
    except Exception as error:
        answer = f"{type(error).__name__}: {error}"
    with contextlib.suppress(OSError):  # the parent gone (interrupted) is not worth a traceback
        connection.send(answer)
    connection.close()


def run_round(spec: RoundSpec) -> RoundResult:
    """Runs one round in a fresh load generator process and waits for it (bounded)."""
    context = multiprocessing.get_context("spawn")
    receiver, sender = context.Pipe(duplex=False)
    process = context.Process(
        target=loadgen_child, args=(_drive, spec, sender), name="edgeplane-bench-loadgen", daemon=True
    )
    process.start()
    sender.close()
    finished = False
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
        finished = True
        return RoundResult(**answer)
    finally:
        receiver.close()
        if finished:
            process.join(timeout=5)
        if process.is_alive():
            process.terminate()
            process.join(timeout=5)
        if process.is_alive():
            process.kill()
            process.join(timeout=5)


# -- setup ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Chain:
    contract: str
    first_block: int
    last_block: int


def _rpc(node: Any, method: str, params: list[object]) -> Any:
    return node.rpc(method, params)


def _selector(node: Any, signature: str) -> str:
    digest = str(_rpc(node, "web3_sha3", ["0x" + signature.encode().hex()]))
    return digest[:10]


def _receipt(node: Any, tx_hash: str) -> dict[str, Any]:
    for _ in range(100):  # anvil mines each transaction at once; this only covers a slow machine
        receipt = _rpc(node, "eth_getTransactionReceipt", [tx_hash])
        if isinstance(receipt, dict):
            if receipt.get("status") != "0x1":
                raise RuntimeError(f"transaction {tx_hash} failed: {receipt}")
            return receipt
        time.sleep(0.05)
    raise RuntimeError(f"no receipt for {tx_hash}")


def prepare_chain(node: Any) -> Chain:
    """Deploys TraceTarget and sends ``RUN_TRANSACTIONS`` ``run`` calls, one block (and one event) each."""
    from tests.contracts import load_contract

    _, bytecode = load_contract("TraceTarget")
    sender = node.addresses[0]
    deploy = _rpc(node, "eth_sendTransaction", [{"from": sender, "data": bytecode, "gas": hex(8_000_000)}])
    contract = str(_receipt(node, str(deploy))["contractAddress"])
    run = _selector(node, "run(uint256)")
    blocks = []
    for tag in range(1, RUN_TRANSACTIONS + 1):
        data = run + f"{tag:064x}"
        # run() passes 2 wei on (to the helper and to a child contract), so it is sent some value.
        tx = {"from": sender, "to": contract, "data": data, "value": hex(10), "gas": hex(8_000_000)}
        receipt = _receipt(node, str(_rpc(node, "eth_sendTransaction", [tx])))
        if not receipt.get("logs"):
            raise RuntimeError(f"run({tag}) emitted no event: {receipt}")
        blocks.append(int(str(receipt["blockNumber"]), 16))
    return Chain(contract=contract, first_block=min(blocks), last_block=max(blocks))


def request_mix(node: Any, chain: Chain) -> tuple[bytes, ...]:
    """The four request bodies, serialised once."""
    total = _selector(node, "total(uint256,uint256)") + f"{3:064x}{4:064x}"
    calls: list[tuple[str, list[object]]] = [
        ("eth_blockNumber", []),
        ("eth_getBlockByNumber", ["latest", False]),
        ("eth_call", [{"to": chain.contract, "data": total}, "latest"]),
        (
            "eth_getLogs",
            [{"address": chain.contract, "fromBlock": hex(chain.first_block), "toBlock": hex(chain.last_block)}],
        ),
    ]
    return tuple(
        json.dumps(
            {"jsonrpc": "2.0", "id": index + 1, "method": method, "params": params}, separators=(",", ":")
        ).encode()
        for index, (method, params) in enumerate(calls)
    )


def check_answers(url: str, bodies: tuple[bytes, ...]) -> None:
    """Each body gets a result (not an error) from ``url``; eth_getLogs finds every event."""
    import urllib.request

    for body in bodies:
        request = urllib.request.Request(url, data=body, headers={"Content-Type": "application/json"})
        with urllib.request.urlopen(request, timeout=REQUEST_TIMEOUT_SECONDS) as response:
            answer = json.loads(response.read())
        method = json.loads(body)["method"]
        if "result" not in answer or answer.get("error") is not None:
            raise RuntimeError(f"{url}: {method} did not answer with a result: {answer}")
        if method == "eth_getLogs" and len(answer["result"]) != RUN_TRANSACTIONS:
            raise RuntimeError(f"{url}: eth_getLogs found {len(answer['result'])} events, not {RUN_TRANSACTIONS}")


@contextlib.contextmanager
def _terminate_as_interrupt() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the processes started here are stopped either way."""

    def interrupt(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, interrupt)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def _pid(process_owner: object) -> int | None:
    process = getattr(process_owner, "_process", None)
    pid = getattr(process, "pid", None)
    return pid if isinstance(pid, int) else None


def role_pids(pid: int | None, role: str) -> tuple[int, ...]:
    """The children of ``edgeplane serve`` (``pid``) that run one part: ``edge-worker``, ``api`` or ``delivery``
    (``edgeplane serve`` supervises; its children do the work)."""
    found = []
    for child in child_pids(pid):
        try:
            arguments = Path(f"/proc/{child}/cmdline").read_bytes().split(b"\0")
        except OSError:
            continue
        if role.encode() in arguments[:4]:
            found.append(child)
    return tuple(found)


def edge_pids(pid: int | None) -> tuple[int, ...]:
    """The processes that serve the edge of ``edgeplane serve`` (``pid``): its ``edge-worker`` children, and ``pid``
    itself when it has no ``api`` child (releases before serve only supervised ran the first edge worker, and the
    API, in serve itself)."""
    if pid is None:
        return ()
    workers = role_pids(pid, "edge-worker")
    return workers if role_pids(pid, "api") else (pid, *workers)


def child_pids(pid: int | None) -> list[int]:
    """The processes ``pid`` started (an edgeplane process's delivery process and development chain)."""
    try:
        return [int(child) for child in Path(f"/proc/{pid}/task/{pid}/children").read_text().split()] if pid else []
    except OSError:
        return []


# -- measuring and reporting ---------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Summary:
    """The medians over the rounds of one target at one concurrency."""

    requests_per_second: float
    p50_ms: float
    p99_ms: float
    errors: int
    requests: int
    cpu_percent: dict[str, float]
    mean_ms: float = float("nan")


def summarise(rounds: list[RoundResult]) -> Summary:
    names = sorted({name for result in rounds for name in result.cpu_percent})
    return Summary(
        requests_per_second=statistics.median(result.requests_per_second for result in rounds),
        p50_ms=statistics.median(result.p50_ms for result in rounds),
        p99_ms=statistics.median(result.p99_ms for result in rounds),
        mean_ms=statistics.median(result.mean_ms for result in rounds),
        errors=sum(result.errors for result in rounds),
        requests=sum(result.requests for result in rounds),
        cpu_percent={
            name: statistics.median(result.cpu_percent[name] for result in rounds if name in result.cpu_percent)
            for name in names
        },
    )


def measure(
    urls: dict[Target, str],
    bodies: tuple[bytes, ...],
    pids: dict[str, Pids],
    *,
    concurrency: int,
    rounds: int,
    seconds: float,
    warmup_seconds: float,
    client: str,
    progress: bool,
    together: bool = False,
) -> dict[Target, Summary]:
    """Alternating rounds (direct first, then gateway first, ...) at one concurrency. With ``together`` every round
    loads all targets at once, each from its own load generator: on targets sharing a CPU, whatever else slows the
    machine during a round slows them alike, and the scheduler shares the CPU, so the one that costs more per
    request serves fewer."""
    results: dict[Target, list[RoundResult]] = {target: [] for target in urls}
    order = list(urls)
    with concurrent.futures.ThreadPoolExecutor(max_workers=len(urls) if together else 1) as pool:
        for index in range(rounds):
            targets = order if index % 2 == 0 else order[::-1]
            specs = [
                RoundSpec(urls[target], bodies, concurrency, warmup_seconds, seconds, pids, client)
                for target in targets
            ]
            answers = list(pool.map(run_round, specs))  # one worker: one round after the other
            for target, result in zip(targets, answers, strict=True):
                results[target].append(result)
                if progress:
                    print(
                        f"  round {index + 1}/{rounds} c={concurrency:<3} {target:<8}"
                        f" {result.requests_per_second:9.0f} req/s  p50 {result.p50_ms:7.3f} ms"
                        f"  p99 {result.p99_ms:7.3f} ms  errors {result.errors}{'  (together)' if together else ''}",
                        file=sys.stderr,
                        flush=True,
                    )
    return {target: summarise(rounds_of) for target, rounds_of in results.items()}


def report(summaries: dict[int, dict[Target, Summary]], args: argparse.Namespace) -> dict[str, Any]:
    """Prints the tables and the verdicts; returns the same as a JSON-ready document."""
    document: dict[str, Any] = {
        "seconds_per_round": args.seconds,
        "warmup_seconds": args.warmup,
        "rounds": args.rounds,
        "client": args.client,
        "response_cache": not args.no_cache,
        "cpu_count": os.cpu_count(),
        "concurrency": {},
        "targets": {},
    }
    print(
        f"\nmedian of {args.rounds} rounds of {args.seconds:g} s per target (after {args.warmup:g} s warm-up),"
        f" {args.client} client, {os.cpu_count()} cores, response cache {'off' if args.no_cache else 'on'}"
    )
    for concurrency, by_target in summaries.items():
        direct, gateway = by_target["direct"], by_target["gateway"]
        added = gateway.p50_ms - direct.p50_ms
        ratio = gateway.requests_per_second / direct.requests_per_second if direct.requests_per_second else 0.0
        print(f"\nconcurrency {concurrency}")
        print(f"  {'':<8} {'req/s':>9} {'p50 ms':>8} {'p99 ms':>8} {'errors':>7}   cpu % of one core while measuring")
        for target, summary in by_target.items():
            cpu = "  ".join(f"{name} {value:.0f}" for name, value in summary.cpu_percent.items())
            print(
                f"  {target:<8} {summary.requests_per_second:9.0f} {summary.p50_ms:8.3f} {summary.p99_ms:8.3f}"
                f" {summary.errors:7d}   {cpu}"
            )
        print(f"  added p50: {added:+.3f} ms   throughput ratio (gateway/direct): {ratio:.2f}")
        gateway_cpu = gateway.cpu_percent.get("gateway")
        cpu_per_request = (
            10_000 * gateway_cpu / gateway.requests_per_second if gateway_cpu and gateway.requests_per_second else None
        )
        if cpu_per_request is not None:
            print(f"  gateway CPU per request: {cpu_per_request:.0f} us")
        document["concurrency"][str(concurrency)] = {
            "direct": asdict(direct),
            "gateway": asdict(gateway),
            "added_p50_ms": added,
            "throughput_ratio": ratio,
            "gateway_cpu_us_per_request": cpu_per_request,
        }
    print()
    verdicts: dict[str, Any] = {}
    if LATENCY_CONCURRENCY in summaries:
        added = document["concurrency"][str(LATENCY_CONCURRENCY)]["added_p50_ms"]
        met = added <= TARGET_ADDED_P50_MS
        verdicts["added_p50_ms"] = {"limit": TARGET_ADDED_P50_MS, "value": added, "met": met}
        print(
            f"target: added p50 at concurrency {LATENCY_CONCURRENCY} <= {TARGET_ADDED_P50_MS} ms:"
            f" {added:.3f} ms -> {'MET' if met else 'NOT MET'}"
        )
    if THROUGHPUT_CONCURRENCY in summaries:
        ratio = document["concurrency"][str(THROUGHPUT_CONCURRENCY)]["throughput_ratio"]
        met = ratio >= TARGET_THROUGHPUT_RATIO
        verdicts["throughput_ratio"] = {"limit": TARGET_THROUGHPUT_RATIO, "value": ratio, "met": met}
        print(
            f"target: throughput at concurrency {THROUGHPUT_CONCURRENCY} >= {TARGET_THROUGHPUT_RATIO:.0%} of direct:"
            f" {ratio:.0%} -> {'MET' if met else 'NOT MET'}"
        )
    document["targets"] = verdicts
    return document


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0] if __doc__ else None)
    parser.add_argument("--seconds", type=float, default=3.0, help="measured seconds per round (default 3)")
    parser.add_argument("--warmup", type=float, default=0.5, help="unmeasured seconds before each round (default 0.5)")
    parser.add_argument("--rounds", type=int, default=3, help="rounds per target and concurrency (default 3)")
    parser.add_argument(
        "--concurrency",
        type=int,
        action="append",
        help=f"a concurrency to measure; repeatable (default {' and '.join(map(str, CONCURRENCIES))})",
    )
    parser.add_argument(
        "--client",
        choices=("raw", "aiohttp"),
        default="raw",
        help="load generator client: a minimal keep-alive HTTP/1.1 client (default) or aiohttp",
    )
    parser.add_argument(
        "--no-cache", action="store_true", help="turn the gateway's response cache off: every request goes to anvil"
    )
    parser.add_argument("--json", action="store_true", help="also print the results as one JSON document at the end")
    parser.add_argument("--quiet", action="store_true", help="no per-round progress on stderr")
    args = parser.parse_args(argv)
    if not 0 < args.seconds <= 600:
        parser.error("--seconds must be in (0, 600]")
    if not 0 <= args.warmup <= 60:
        parser.error("--warmup must be in [0, 60]")
    if not 1 <= args.rounds <= 20:
        parser.error("--rounds must be in [1, 20]")
    args.concurrency = tuple(args.concurrency or CONCURRENCIES)
    if not all(1 <= concurrency <= 512 for concurrency in args.concurrency):
        parser.error("--concurrency must be in [1, 512]")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    if str(REPO_ROOT) not in sys.path:
        sys.path.insert(0, str(REPO_ROOT))
    from tests.support.anvil import AnvilNode
    from tests.support.edgeplane import EdgeplaneProcess

    progress = not args.quiet
    with _terminate_as_interrupt(), contextlib.ExitStack() as stack:
        if progress:
            print("starting anvil and edgeplane ...", file=sys.stderr, flush=True)
        node = stack.enter_context(AnvilNode())
        chain = prepare_chain(node)
        scratch = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="edgeplane-bench-")))
        if args.no_cache:
            (scratch / "data").mkdir()
            (scratch / "data" / "edgeplane.toml").write_text("[gateway.cache]\nenabled = false\n")
        edge = stack.enter_context(
            EdgeplaneProcess(
                scratch / "data", upstreams=(f"mainnet={node.url}",), extra_args=("--log-level", "warning")
            )
        )
        urls: dict[Target, str] = {"direct": node.url, "gateway": edge.rpc_url("mainnet")}
        bodies = request_mix(node, chain)
        for url in urls.values():
            check_answers(url, bodies)
        pids: dict[str, Pids] = {"gateway": edge_pids(_pid(edge))}
        anvil = _pid(node)
        if anvil is not None:
            pids["anvil"] = anvil
        summaries = {
            concurrency: measure(
                urls,
                bodies,
                pids,
                concurrency=concurrency,
                rounds=args.rounds,
                seconds=args.seconds,
                warmup_seconds=args.warmup,
                client=args.client,
                progress=progress,
            )
            for concurrency in args.concurrency
        }
        document = report(summaries, args)
        if args.json:
            print(json.dumps(document, indent=None, sort_keys=True))
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted; stopped anvil and edgeplane", file=sys.stderr)
        sys.exit(130)
