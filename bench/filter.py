"""Logpush filter evaluation: the compiled predicate against two baselines measured in the same run.

On generated ``http_requests`` records (a realistic mix: 27 fields, some of them missing from some records), for a
selective 5-condition filter and a 30-operator filter (21 conditions and 9 groups, as ``MAX_OPERATORS`` counts;
about 1,400 bytes, parsed with a raised size limit, since 30 operators of realistic size never fit in 1000), it measures
records per second of

- ``compiled``: ``compile_filter`` (``edgeplane.logs.filter_compiler``), the hot path of delivery;
- ``hand``: the same filter written by hand as one Python lambda, with the same semantics for missing fields;
- ``interpreter``: the reference interpreter (``edgeplane.logs.filter_interpreter.evaluate``), on a prefix of the
  records (``--interpreter-records``), since it is an order of magnitude slower.

Each predicate runs as ``filter(predicate, records)``, the way delivery applies it, for ``--rounds`` rounds in
alternating order; the figure is the best round. All three must select the same records (checked on the prefix).
Targets: compiled within 1.5x of hand-written (ratio hand/compiled time <= 1.5) and at least 5 million records/s.

Usage: ``.venv/bin/python bench/filter.py [--records 1000000] [--rounds 5] [--interpreter-records 200000] [--json]``
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

if __package__ is None or __package__ == "":  # python bench/filter.py
    sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.filter_compiler import compile_filter
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, count_operators, parse_filter

Record = Mapping[str, Any]
Predicate = Callable[[Record], bool]

MAX_RECORDS = 5_000_000

HOSTS = ["api.example.com", "www.example.com", "static.example.com", "eth.example.com", "example.com"]
HOST_WEIGHTS = [20, 45, 20, 10, 5]
PATHS = ["/", "/index.html", "/v1/users", "/v1/orders/17", "/v1/eth", "/admin/login", "/static/app.js",
         "/static/style.css", "/wp-login.php", "/api/health", "/.env", "/images/logo.png"]  # fmt: skip
COUNTRIES = ["us", "de", "gb", "fr", "cn", "ru", "br", "in", "jp", "ca", "nl", "kp", "ir", "au"]
METHODS = ["GET", "GET", "GET", "GET", "POST", "POST", "HEAD", "PUT", "DELETE", "OPTIONS"]
STATUSES = [200] * 30 + [204, 301, 302, 304, 304, 400, 401, 403, 403, 404, 404, 404, 429, 500, 502, 503]
AGENTS = ["Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0", "Mozilla/5.0 (Macintosh) Safari/605.1.15",
          "curl/8.5.0", "python-requests/2.32.3", "Go-http-client/1.1", "Googlebot/2.1", "sqlmap/1.8"]  # fmt: skip
CACHE = ["hit", "miss", "dynamic", "expired", "bypass"]
COLOS = ["FRA", "AMS", "LHR", "CDG", "IAD", "SJC", "NRT", "GRU"]
BOT_TAGS = [[], [], [], ["api"], ["verifiedBot"], ["crawler", "verifiedBot"], ["headless"]]
SEC_ACTIONS = ["block", "challenge", "log", "skip", "managedChallenge"]


def generate_records(count: int, seed: int = 1) -> list[dict[str, Any]]:
    """``count`` records of ``http_requests``; deterministic for a seed."""
    rng = random.Random(seed)
    choice, randint, random_ = rng.choice, rng.randint, rng.random
    hosts = rng.choices(HOSTS, HOST_WEIGHTS, k=count)
    start = 1_795_000_000_000_000_000
    records: list[dict[str, Any]] = []
    for index in range(count):
        path = choice(PATHS)
        status = choice(STATUSES)
        record: dict[str, Any] = {
            "ClientIP": f"203.0.113.{index % 251}",
            "ClientCountry": choice(COUNTRIES),
            "ClientASN": choice((13335, 15169, 16509, 3320, 4134, 12389, 7922)),
            "ClientSrcPort": randint(1024, 65535),
            "ClientRequestHost": hosts[index],
            "ClientRequestMethod": choice(METHODS),
            "ClientRequestPath": path,
            "ClientRequestURI": path + ("?page=2" if random_() < 0.1 else ""),
            "ClientRequestProtocol": "HTTP/2",
            "ClientRequestScheme": "https",
            "ClientRequestUserAgent": choice(AGENTS),
            "ClientRequestBytes": randint(200, 4000),
            "BotScore": randint(1, 99),
            "BotScoreSrc": "Machine Learning",
            "CacheCacheStatus": choice(CACHE),
            "CacheTieredFill": random_() < 0.05,
            "EdgeColoCode": choice(COLOS),
            "EdgeResponseStatus": status,
            "EdgeResponseBytes": randint(300, 200_000),
            "EdgeResponseCompressionRatio": round(random_() * 4, 2),
            "EdgeStartTimestamp": start + index * 1_000_000,
            "EdgeEndTimestamp": start + index * 1_000_000 + randint(100_000, 90_000_000),
            "OriginResponseStatus": status,
            "RayID": f"{index:016x}",
            "WAFAttackScore": randint(1, 99),
            "ZoneName": "example.com",
        }
        tags = choice(BOT_TAGS)
        if tags:
            record["BotTags"] = tags
        if random_() < 0.2:
            record["SecurityAction"] = choice(SEC_ACTIONS)
        if random_() < 0.3:
            record["ClientRequestReferer"] = "https://www.example.com/"
        records.append(record)
    return records


FIVE = {
    "where": {
        "and": [
            {"key": "ClientRequestHost", "operator": "eq", "value": "api.example.com"},
            {"key": "EdgeResponseStatus", "operator": "geq", "value": "400"},
            {"key": "ClientRequestPath", "operator": "startsWith", "value": "/v1/"},
            {"key": "BotScore", "operator": "lt", "value": "50"},
            {"key": "ClientCountry", "operator": "!in", "value": ["us", "ca"]},
        ]
    }
}


def five_by_hand(r: Record) -> bool:
    return (
        r.get("ClientRequestHost") == "api.example.com"
        and ((v := r.get("EdgeResponseStatus")) is not None and v >= 400)
        and ((v := r.get("ClientRequestPath")) is not None and v.startswith("/v1/"))
        and ((v := r.get("BotScore")) is not None and v < 50)
        and r.get("ClientCountry") not in {"us", "ca"}
    )


def _c(key: str, operator: str, value: Any) -> dict[str, Any]:
    return {"key": key, "operator": operator, "value": value}


THIRTY = {
    "where": {
        "or": [
            {"and": [_c("ClientRequestHost", "eq", "api.example.com"), _c("EdgeResponseStatus", "geq", "500"),
                     {"or": [_c("BotScore", "lt", "5"), _c("WAFAttackScore", "leq", "3")]}]},
            {"and": [_c("ClientCountry", "in", ["kp", "ir"]), _c("ClientRequestMethod", "!in", ["GET", "HEAD"]),
                     _c("ClientRequestPath", "startsWith", "/admin")]},
            {"and": [_c("ClientRequestPath", "endsWith", ".php"), _c("CacheCacheStatus", "!eq", "hit"),
                     _c("ClientRequestUserAgent", "contains", "sqlmap")]},
            {"and": [_c("BotTags", "contains", "headless"), _c("ClientASN", "in", [4134, 12389]),
                     _c("EdgeColoCode", "!startsWith", "S")]},
            {"and": [_c("SecurityAction", "eq", "block"), _c("EdgeResponseBytes", "gt", "150000"),
                     _c("CacheTieredFill", "eq", "true")]},
            {"and": [_c("EdgeResponseStatus", "eq", "429"), _c("ClientRequestHost", "!endsWith", ".com")]},
            {"and": [_c("ClientRequestMethod", "eq", "DELETE"), _c("EdgeResponseCompressionRatio", "gt", "3.5"),
                     _c("ClientRequestReferer", "!contains", "example")]},
        ]
    }
}  # fmt: skip


def thirty_by_hand(r: Record) -> bool:
    return (
        (
            r.get("ClientRequestHost") == "api.example.com"
            and ((v := r.get("EdgeResponseStatus")) is not None and v >= 500)
            and (
                ((v := r.get("BotScore")) is not None and v < 5)
                or ((v := r.get("WAFAttackScore")) is not None and v <= 3)
            )
        )
        or (
            r.get("ClientCountry") in {"kp", "ir"}
            and r.get("ClientRequestMethod") not in {"GET", "HEAD"}
            and ((v := r.get("ClientRequestPath")) is not None and v.startswith("/admin"))
        )
        or (
            ((v := r.get("ClientRequestPath")) is not None and v.endswith(".php"))
            and r.get("CacheCacheStatus") != "hit"
            and ((v := r.get("ClientRequestUserAgent")) is not None and "sqlmap" in v)
        )
        or (
            ((v := r.get("BotTags")) is not None and "headless" in v)
            and r.get("ClientASN") in {4134, 12389}
            and ((v := r.get("EdgeColoCode")) is None or not v.startswith("S"))
        )
        or (
            r.get("SecurityAction") == "block"
            and ((v := r.get("EdgeResponseBytes")) is not None and v > 150000)
            and r.get("CacheTieredFill") is True
        )
        or (
            r.get("EdgeResponseStatus") == 429 and ((v := r.get("ClientRequestHost")) is None or not v.endswith(".com"))
        )
        or (
            r.get("ClientRequestMethod") == "DELETE"
            and ((v := r.get("EdgeResponseCompressionRatio")) is not None and v > 3.5)
            and ((v := r.get("ClientRequestReferer")) is None or "example" not in v)
        )
    )


def _seconds(predicate: Predicate, records: Sequence[Record]) -> tuple[float, int]:
    gc.collect()
    started = time.perf_counter()
    selected = sum(1 for _ in filter(predicate, records))
    return time.perf_counter() - started, selected


def measure(name: str, document: dict[str, Any], by_hand: Predicate, records: Sequence[Record], rounds: int,
            interpreter_records: int) -> dict[str, Any]:  # fmt: skip
    dataset = load_dataset("http_requests")
    text = json.dumps(document, separators=(",", ":"))
    # The 30-operator filter is about 1,400 bytes: 30 operators of realistic size never fit in 1000 bytes.
    tree = parse_filter(text, dataset, max_bytes=2 * MAX_FILTER_BYTES)
    compiled = compile_filter(tree, dataset)

    def interpreted(record: Record) -> bool:
        return evaluate(tree, record, dataset)

    prefix = records[:interpreter_records]
    expected = [r for r in prefix if interpreted(r)]
    for other, label in ((compiled, "compiled"), (by_hand, "hand")):
        got = [r for r in prefix if other(r)]
        if got != expected:
            raise SystemExit(f"{name}: {label} selects {len(got)} records, the interpreter {len(expected)}")
    best: dict[str, float] = {}
    selected: dict[str, int] = {}
    candidates: list[tuple[str, Predicate, Sequence[Record]]] = [
        ("compiled", compiled, records), ("hand", by_hand, records), ("interpreter", interpreted, prefix)
    ]  # fmt: skip
    for round_ in range(rounds):
        order = candidates if round_ % 2 == 0 else candidates[::-1]
        for label, predicate, sample in order:
            seconds, count = _seconds(predicate, sample)
            best[label] = min(best.get(label, seconds), seconds)
            selected[label] = count
    rate = {label: (len(records) if label != "interpreter" else len(prefix)) / best[label] for label in best}
    return {
        "filter": name,
        "bytes": len(text.encode()),
        "operators": count_operators(tree),
        "records": len(records),
        "selected": selected["compiled"],
        "records_per_second": {label: round(value) for label, value in rate.items()},
        "hand_over_compiled_time": round(best["compiled"] / best["hand"], 3),
        "compiled_over_interpreter_speed": round(rate["compiled"] / rate["interpreter"], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help=f"records to generate (at most {MAX_RECORDS})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interpreter-records", type=int, default=200_000)
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = parser.parse_args(argv)
    if not 1 <= args.records <= MAX_RECORDS:
        parser.error(f"--records must be between 1 and {MAX_RECORDS}")
    if not 1 <= args.rounds <= 50:
        parser.error("--rounds must be between 1 and 50")
    started = time.perf_counter()
    records = generate_records(args.records)
    generated = time.perf_counter() - started
    interpreter_records = max(1, min(args.interpreter_records, args.records))
    results = [
        measure("5 conditions", FIVE, five_by_hand, records, args.rounds, interpreter_records),
        measure("30 operators", THIRTY, thirty_by_hand, records, args.rounds, interpreter_records),
    ]
    if args.json:
        print(json.dumps({"generated_seconds": round(generated, 2), "results": results}, indent=2))
        return 0
    print(f"{args.records} records generated in {generated:.1f} s; best of {args.rounds} rounds")
    print(f"{'filter':<14} {'bytes':>5} {'ops':>4} {'selected':>9} {'compiled/s':>12} {'hand/s':>12} "
          f"{'interp/s':>11} {'compiled÷hand time':>19} {'compiled÷interp':>16}")  # fmt: skip
    for r in results:
        rate = r["records_per_second"]
        print(f"{r['filter']:<14} {r['bytes']:>5} {r['operators']:>4} {r['selected']:>9} {rate['compiled']:>12,} "
              f"{rate['hand']:>12,} {rate['interpreter']:>11,} {r['hand_over_compiled_time']:>19} "
              f"{r['compiled_over_interpreter_speed']:>16}")  # fmt: skip
    print(f"(filters must stay within {MAX_FILTER_BYTES} bytes; targets: compiled÷hand time <= 1.5, >= 5,000,000/s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
