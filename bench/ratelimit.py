"""What rate limiting rules cost the edge per request, and whether counting across processes contends.

1. **Per request.** The firewall of a zone with one custom rule (baseline) against the same zone with three rate
   limiting rules more (per client address; per client and JSON-RPC method, fanned out over a batch's calls; a
   compute-unit budget per client from the gateway's cost table), each request built as the edge builds it
   (``RequestFields.from_http`` with the gateway's JSON-RPC reader) and evaluated against the node's shared counter
   table, over a mix of single calls and batches from many addresses, none of them over its rate (the common case:
   every rule counts). Rounds alternate the order; the figure is the median over rounds of the CPU time per request
   (``time.process_time``) of each side and their difference.
2. **Contention.** Two processes count as fast as they can in one table, first each on its own key, then both on the
   same key (one bucket, one lock, one cache line); the ratio of the second's throughput to the first's shows what
   the lock costs when all workers hit one key. Printed as the median over rounds.

Usage: ``.venv/bin/python bench/ratelimit.py [--rounds 7] [--requests 20000] [--json]``
"""

from __future__ import annotations

import argparse
import json
import multiprocessing
import statistics
import sys
import time
from pathlib import Path
from typing import Any, Final

REPO_ROOT: Final = Path(__file__).resolve().parents[1]
if str(REPO_ROOT / "src") not in sys.path:
    sys.path.insert(0, str(REPO_ROOT / "src"))

import orjson  # noqa: E402

from edgeplane.gateway.method_costs import MethodCosts  # noqa: E402
from edgeplane.gateway.request_facts import JsonRpcReader  # noqa: E402
from edgeplane.rate_counters import RateCounters  # noqa: E402
from edgeplane.rules import RequestFields  # noqa: E402
from edgeplane.waf.firewall import Entrypoint, Firewall, compile_firewall  # noqa: E402

CUSTOM: Final = [{"id": "c1", "action": "block", "expression": 'http.request.uri.path eq "/admin"'}]


def _rule(rule_id: str, characteristics: list[str], expression: str = "true", **counts: Any) -> dict[str, Any]:
    counts = counts or {"requests_per_period": 10_000_000}
    return {
        "id": rule_id,
        "action": "block",
        "expression": expression,
        "ratelimit": {
            "characteristics": ["cf.colo.id", *characteristics],
            "period": 60,
            "mitigation_timeout": 0,
            **counts,
        },
    }


# Three rules as a zone writes them with Cloudflare's characteristics: per address, per API key, per method.
PLAIN: Final = [
    _rule("per-ip", ["ip.src"]),
    _rule("per-key", ['http.request.headers["x-api-key"]']),
    _rule("per-method", ['lookup_json_string(http.request.body.raw, "method")']),
]
LIMITS: Final = [
    {
        "id": "per-ip",
        "action": "block",
        "expression": "true",
        "ratelimit": {
            "characteristics": ["cf.colo.id", "ip.src"],
            "period": 60,
            "requests_per_period": 10_000_000,
            "mitigation_timeout": 0,
        },
    },
    {
        "id": "per-method",
        "action": "block",
        "expression": 'http.request.uri.path eq "/v1/mainnet"',
        "ratelimit": {
            "characteristics": ["cf.colo.id", "ip.src", "edgeplane.jsonrpc.methods"],
            "period": 60,
            "requests_per_period": 10_000_000,
            "mitigation_timeout": 0,
        },
    },
    {
        "id": "budget",
        "action": "block",
        "expression": "true",
        "ratelimit": {
            "characteristics": ["cf.colo.id", "ip.src"],
            "period": 60,
            "score_per_period": 1_000_000,
            "score_response_header_name": "edgeplane-rpc-cost",
            "mitigation_timeout": 0,
        },
    },
]
BODIES: Final = [
    orjson.dumps({"jsonrpc": "2.0", "id": 1, "method": "eth_blockNumber", "params": []}),
    orjson.dumps(
        {
            "jsonrpc": "2.0",
            "id": 2,
            "method": "eth_call",
            "params": [{"to": "0x" + "ab" * 20, "data": "0x70a08231" + "00" * 32}, "latest"],
        }
    ),
    orjson.dumps({"jsonrpc": "2.0", "id": 3, "method": "eth_getBalance", "params": ["0x" + "cd" * 20, "latest"]}),
    orjson.dumps([{"jsonrpc": "2.0", "id": index, "method": "eth_chainId", "params": []} for index in range(3)]),
]


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--requests", type=int, default=20_000, help="requests per side and round")
    parser.add_argument("--contention-seconds", type=float, default=1.0)
    parser.add_argument("--json", action="store_true")
    return parser.parse_args(argv)


def build_request(index: int, reader: JsonRpcReader) -> RequestFields:
    fields = RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path="/v1/mainnet",
        query="",
        headers=[
            (b"host", b"localhost"),
            (b"content-type", b"application/json"),
            (b"user-agent", b"web3.py/7"),
            (b"x-api-key", b"key-%d" % (index % 64)),
        ],
        body=BODIES[index % len(BODIES)],
        client_ip=f"10.{(index >> 16) & 255}.{(index >> 8) & 255}.{index & 255}",
    )
    fields.jsonrpc_reader = reader
    return fields


def time_side(firewall: Firewall, counters: RateCounters, reader: JsonRpcReader, requests: int) -> float:
    """CPU seconds per request: building the fields and evaluating them."""
    table = counters.table
    started = time.process_time()
    for index in range(requests):
        fields = build_request(index % 4096, reader)
        fields.body_document.document()  # the gateway parses the body anyway: not the rules' cost
        verdict = firewall.evaluate(fields, counters=table)
        if verdict.blocked:
            raise AssertionError("a request was refused: the bench's budgets are too small")
    return (time.process_time() - started) / requests


def per_request(args: argparse.Namespace) -> dict[str, Any]:
    reader = JsonRpcReader(MethodCosts.from_settings(), lambda network: 20_000_000)
    firewalls = {"custom rule only": compile_firewall({"http_request_firewall_custom": [Entrypoint(CUSTOM, "rs-c")]})}
    for name, rules in (("three plain rules", PLAIN), ("three JSON-RPC rules", LIMITS)):
        firewalls[name] = compile_firewall(
            {"http_request_firewall_custom": [Entrypoint(CUSTOM, "rs-c")], "http_ratelimit": [Entrypoint(rules, name)]}
        )
        assert not firewalls[name].problems, firewalls[name].problems
    counters = RateCounters.create(262_144)
    for firewall in firewalls.values():  # warm every side up
        time_side(firewall, counters, reader, 2000)
    figures: dict[str, list[float]] = {name: [] for name in firewalls}
    for round_number in range(args.rounds):
        order = list(firewalls.items())
        for name, firewall in order if round_number % 2 == 0 else reversed(order):
            figures[name].append(time_side(firewall, counters, reader, args.requests))
    counters.close()
    baseline = figures.pop("custom rule only")
    base = statistics.median(baseline)
    result: dict[str, Any] = {"baseline_us": base * 1e6}
    for name, times in figures.items():
        result[name] = {
            "us": statistics.median(times) * 1e6,
            "added_us": statistics.median([b - a for a, b in zip(baseline, times, strict=True)]) * 1e6,
        }
    return result


def _hammer(fd: int, key: str, seconds: float, results: Any) -> None:
    counters = RateCounters.attach(fd)
    table = counters.table
    values = (key,)
    deadline = time.monotonic() + seconds
    count = 0
    now = time.monotonic_ns() // 1_000_000
    while time.monotonic() < deadline:
        for _ in range(1000):
            table.acquire(7, values, 60_000, 10**12, 1, 0, now)
        count += 1000
        now = time.monotonic_ns() // 1_000_000
    results.put(count / seconds)


def contention(args: argparse.Namespace) -> dict[str, Any]:
    context = multiprocessing.get_context("fork")
    ratios = []
    rates: dict[str, list[float]] = {"own_keys": [], "one_key": []}
    counters = RateCounters.create(65_536)
    for _ in range(max(3, args.rounds // 2)):
        for name, keys in (("own_keys", ("a", "b")), ("one_key", ("k", "k"))):
            results = context.Queue()
            workers = [
                context.Process(target=_hammer, args=(counters.fd, key, args.contention_seconds, results))
                for key in keys
            ]
            for worker in workers:
                worker.start()
            total = sum(results.get() for _ in workers)
            for worker in workers:
                worker.join()
            rates[name].append(total)
        ratios.append(rates["one_key"][-1] / rates["own_keys"][-1])
    counters.close()
    return {
        "own_keys_per_second": statistics.median(rates["own_keys"]),
        "one_key_per_second": statistics.median(rates["one_key"]),
        "one_key_over_own_keys": statistics.median(ratios),
    }


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    figures = {"per_request": per_request(args), "contention": contention(args)}
    if args.json:
        print(json.dumps(figures, indent=2))
        return 0
    cost = figures["per_request"]
    print(f"per request, one custom rule: {cost.pop('baseline_us'):.2f} us")
    for name, side in cost.items():
        print(f"  with {name}: {side['us']:.2f} us, +{side['added_us']:.2f} us (median of the rounds' differences)")
    shared = figures["contention"]
    print(
        f"two processes counting: own keys {shared['own_keys_per_second']:,.0f}/s, one key "
        f"{shared['one_key_per_second']:,.0f}/s, ratio {shared['one_key_over_own_keys']:.2f}"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
