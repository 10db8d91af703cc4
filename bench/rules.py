"""Rules-language evaluation: compiled expressions against the same expressions written by hand in Python.

On generated requests (``RequestFields`` built with ``from_http``: a mix of methods, paths, hosts, clients, user
agents and headers), for six typical custom-rule expressions, it measures evaluations per second of

- ``call``: the ``Expression`` called as the WAF engine calls it (``expression(request)``);
- ``predicate``: ``expression.predicate`` (the same function since an ``Expression`` is the generated function
  itself; kept to show that the call adds nothing);
- ``hand``: the same expression written by hand as one Python lambda over the same request object (attribute reads,
  the same RE2 wrapper for ``matches`` and ``wildcard``, ``str.lower`` where the rule says ``lower``).

Each runs over the request list for ``--rounds`` rounds in alternating order; the figure is the best round. All
three must agree on every request. Lazily computed fields are computed before timing (a warm-up pass), as they are
after a WAF engine's first rule reads them. Targets (issue 6): ``call`` within 2x of ``hand`` (time ratio
call/hand <= 2) and at least 2,000,000 evaluations/s for the three-clause expression.

Usage: ``.venv/bin/python bench/rules.py [--requests 20000] [--rounds 5] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

if __package__ is None or __package__ == "":  # python bench/rules.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from edgeplane.rules import RequestFields, compile_expression
from edgeplane.rules.addresses import network_range
from edgeplane.rules.regex import compile_regex, compile_wildcard

Check = Callable[[Any], bool]

METHODS = ["GET", "GET", "GET", "POST", "POST", "PUT", "HEAD", "OPTIONS"]
PATHS = ["/v1/mainnet", "/v1/mainnet", "/v1/sepolia", "/", "/admin/login", "/internal/metrics", "/static/app.js",
         "/api/users/17", "/wp-login.php"]  # fmt: skip
HOSTS = ["api.example.com", "www.example.com", "eth.example.com"]
CLIENTS = ["10.1.2.3", "203.0.113.9", "198.51.100.20", "192.168.1.10", "172.16.4.4", "2001:db8::7", "45.33.1.2"]
COUNTRIES = ["DE", "US", "CN", "RU", "FR", "BR"]
AGENTS = [b"Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0", b"curl/8.5.0", b"sqlmap/1.8#stable", b"",
          b"python-requests/2.32.3", b"Go-http-client/1.1"]  # fmt: skip


def generate_requests(count: int, seed: int = 1) -> list[RequestFields]:
    """``count`` requests; deterministic for a seed."""
    rng = random.Random(seed)
    requests = []
    for index in range(count):
        headers = [(b"host", b"api.example.com"), (b"accept", b"*/*")]
        agent = rng.choice(AGENTS)
        if agent:
            headers.append((b"user-agent", agent))
        if rng.random() < 0.05:
            headers.append((b"x-debug", b"1"))
        query = rng.choice(["", "", "page=2", "token=abc&x=1", "q=union%20select"])
        request = RequestFields.from_http(
            method=rng.choice(METHODS), scheme="https", host=rng.choice(HOSTS), raw_path=rng.choice(PATHS),
            query=query, headers=headers, body=b"", client_ip=rng.choice(CLIENTS), server_port=443,
            country=rng.choice(COUNTRIES), asn=13335, ray_id=f"{index:016x}",
        )  # fmt: skip
        request.cf_bot_management_score = rng.randint(1, 99)
        requests.append(request)
    return requests


def _range(cidr: str) -> tuple[int, int]:
    return network_range(cidr)


TEN = _range("10.0.0.0/8")
PRIVATE = [_range("10.0.0.0/8"), _range("192.168.0.0/16"), _range("172.16.0.0/12")]
ADMIN = compile_regex("^/admin", 0).test
INTERNAL = compile_wildcard("/internal/*", strict=False, position=0).test
BLOCKED_COUNTRIES = frozenset({"CN", "RU"})
WRITE_METHODS = frozenset({"POST", "PUT"})

CASES: list[tuple[str, str, Check]] = [
    ("three clauses",
     'http.request.method eq "POST" and http.request.uri.path eq "/v1/mainnet" and not ip.src in {10.0.0.0/8}',
     lambda r: r.http_request_method == "POST" and r.http_request_uri_path == "/v1/mainnet"
     and not (TEN[0] <= r.ip_src <= TEN[1])),
    ("admin from countries",
     'http.host eq "api.example.com" and http.request.uri.path matches "^/admin" and ip.src.country in {"CN" "RU"}',
     lambda r: r.http_host == "api.example.com" and ADMIN(r.http_request_uri_path)
     and r.ip_src_country in BLOCKED_COUNTRIES),
    ("bot writes",
     'cf.bot_management.score lt 30 and not cf.bot_management.verified_bot and http.request.method in {"POST" "PUT"}',
     lambda r: r.cf_bot_management_score < 30 and not r.cf_bot_management_verified_bot
     and r.http_request_method in WRITE_METHODS),
    ("scanner agents",
     'lower(http.user_agent) contains "sqlmap" or http.user_agent eq ""',
     lambda r: "sqlmap" in r.http_user_agent.lower() or r.http_user_agent == ""),
    ("debug header with token",
     'any(http.request.headers.names[*] eq "x-debug") and http.request.uri.query contains "token="',
     lambda r: any(name == "x-debug" for name in r.http_request_headers_names)
     and "token=" in r.http_request_uri_query),
    ("private clients or internal paths",
     'ip.src in {10.0.0.0/8 192.168.0.0/16 172.16.0.0/12} or http.request.uri.path wildcard "/internal/*"',
     lambda r: any(low <= r.ip_src <= high for low, high in PRIVATE) or INTERNAL(r.http_request_uri_path)),
]  # fmt: skip


def _seconds(check: Check, requests: Sequence[RequestFields]) -> tuple[float, int]:
    gc.collect()
    started = time.perf_counter()
    matched = sum(1 for _ in filter(check, requests))
    return time.perf_counter() - started, matched


def measure(name: str, text: str, by_hand: Check, requests: Sequence[RequestFields], rounds: int) -> dict[str, Any]:
    expression = compile_expression(text)
    candidates: list[tuple[str, Check]] = [("call", expression), ("predicate", expression.predicate),
                                           ("hand", by_hand)]  # fmt: skip
    expected = [by_hand(r) for r in requests]  # also the warm-up pass: lazy fields are computed here
    for label, check in candidates:
        if [check(r) for r in requests] != expected:
            raise SystemExit(f"{name}: {label} disagrees with the hand-written expression")
    best: dict[str, float] = {}
    for round_ in range(rounds):
        for label, check in candidates if round_ % 2 == 0 else candidates[::-1]:
            seconds, _ = _seconds(check, requests)
            best[label] = min(best.get(label, seconds), seconds)
    return {
        "expression": name,
        "text": text,
        "matched": sum(expected),
        "evaluations_per_second": {label: round(len(requests) / seconds) for label, seconds in best.items()},
        "call_over_hand_time": round(best["call"] / best["hand"], 3),
        "predicate_over_hand_time": round(best["predicate"] / best["hand"], 3),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--requests", type=int, default=20_000)
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = parser.parse_args(argv)
    if not 1 <= args.requests <= 1_000_000 or not 1 <= args.rounds <= 50:
        parser.error("--requests must be within 1..1000000 and --rounds within 1..50")
    requests = generate_requests(args.requests)
    results = [measure(name, text, by_hand, requests, args.rounds) for name, text, by_hand in CASES]
    if args.json:
        print(json.dumps({"requests": args.requests, "results": results}, indent=2))
        return 0
    print(f"{args.requests} requests; best of {args.rounds} rounds")
    print(f"{'expression':<34} {'matched':>8} {'call/s':>12} {'predicate/s':>12} {'hand/s':>12} "
          f"{'call÷hand time':>15} {'predicate÷hand':>15}")  # fmt: skip
    for r in results:
        rate = r["evaluations_per_second"]
        print(f"{r['expression']:<34} {r['matched']:>8} {rate['call']:>12,} {rate['predicate']:>12,} "
              f"{rate['hand']:>12,} {r['call_over_hand_time']:>15} {r['predicate_over_hand_time']:>15}")  # fmt: skip
    print("(targets: call÷hand time <= 2; >= 2,000,000 evaluations/s for the three-clause expression)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
