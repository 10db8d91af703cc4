"""Logpush filter evaluation: the compiled predicate against two baselines measured in the same run.

On generated ``http_requests`` records (a realistic mix: 27 fields, some of them missing from some records), for a
selective 5-condition filter and a 30-operator filter (21 conditions and 9 groups, as ``MAX_OPERATORS`` counts;
about 1,400 bytes, parsed with a raised size limit, since 30 operators of realistic size never fit in 1000), it measures
records per second of

- ``compiled``: ``compile_filter`` (``tests.support.filter_compiler``), the per-record oracle, once delivery's;
- ``hand``: the same filter written by hand as one Python lambda, with the same semantics for missing fields;
- ``interpreter``: the reference interpreter (``edgeplane.logs.filter_interpreter.evaluate``), on a prefix of the
  records (``--interpreter-records``), since it is an order of magnitude slower;
- ``columns``: ``compile_column_filter`` (``edgeplane.logs.filter_columns``) over the same records as the log store
  holds them, Arrow record batches of ``--batch-records`` records (converted once, before timing, with
  ``record_columns.encode_rows`` and ``decode_block``): the mask of every batch;
- ``columns+take``: the same, plus the selected rows taken out of each batch (``RecordBatch.filter``);
- ``arrow hand``: the same filter written by hand as ``pyarrow.compute`` calls, with the same semantics for missing
  fields (each condition's nulls filled, then plain ``and``/``or``).

Each per-record predicate runs as ``filter(predicate, records)``, the way delivery applies it, for ``--rounds``
rounds in alternating order; the figure is the best round. All must select the same records (the interpreter checked
on the prefix, the column masks against the compiled predicate on every record). Arrow runs on one thread
(``pa.set_cpu_count(1)``), so every figure is per core. Targets: compiled within 1.5x of hand-written (ratio
hand/compiled time <= 1.5) and at least 5 million records/s.

Usage: ``.venv/bin/python bench/filter.py [--records 1000000] [--rounds 5] [--interpreter-records 200000]
[--batch-records 20000] [--json]``
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
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # the per-record predicate: tests.support

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.filter_columns import ColumnPredicate, compile_column_filter
from edgeplane.logs.filter_interpreter import evaluate
from edgeplane.logs.filter_parser import MAX_FILTER_BYTES, count_operators, parse_filter
from edgeplane.logs.record_columns import arrow_schema, column_or_nulls, decode_block, encode_rows
from tests.support.filter_compiler import compile_filter

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


def to_batches(records: Sequence[Record], batch_records: int) -> list[pa.RecordBatch]:
    """``records`` as the log store holds them: blocks of ``batch_records`` records, one Arrow record batch each."""
    batches = []
    for start in range(0, len(records), batch_records):
        payload = encode_rows("http_requests", records[start : start + batch_records])
        if payload is None:
            raise SystemExit("the generated records do not fit the http_requests schema")
        batches.append(decode_block(payload))
    return batches


HTTP_SCHEMA = arrow_schema(load_dataset("http_requests"))


def _column(batch: pa.RecordBatch, name: str) -> pa.Array:
    return column_or_nulls(batch, name, HTTP_SCHEMA.field(name).type)


def _yes(mask: pa.BooleanArray) -> pa.BooleanArray:
    """A positive condition: a missing field (null) does not pass."""
    return mask.fill_null(False)


def _no(mask: pa.BooleanArray) -> pa.BooleanArray:
    """A negated condition: the inverse of the positive one, and a missing field (null) passes."""
    return pc.invert(mask).fill_null(True)


def _any_element(lists: pa.ListArray, matches: pa.BooleanArray) -> pa.BooleanArray:
    """Per list, whether one of its elements matches (false for a null list): a running count read at the offsets."""
    running = pa.concat_arrays(
        [pa.array([0], pa.int64()), pc.cumulative_sum(matches.fill_null(False).cast(pa.int64()))]
    )
    found = pc.greater(pc.subtract(pc.take(running, lists.offsets[1:]), pc.take(running, lists.offsets[:-1])), 0)
    return pc.and_(found, pc.is_valid(lists))


def five_by_arrow(b: pa.RecordBatch) -> pa.BooleanArray:
    return pc.and_(
        pc.and_(
            pc.and_(
                _yes(pc.equal(_column(b, "ClientRequestHost"), "api.example.com")),
                _yes(pc.greater_equal(_column(b, "EdgeResponseStatus"), 400)),
            ),
            pc.and_(
                _yes(pc.starts_with(_column(b, "ClientRequestPath"), "/v1/")),
                _yes(pc.less(_column(b, "BotScore"), 50)),
            ),
        ),
        _no(pc.is_in(_column(b, "ClientCountry"), pa.array(["us", "ca"]))),
    )


def thirty_by_arrow(b: pa.RecordBatch) -> pa.BooleanArray:
    host, status, path = (
        _column(b, "ClientRequestHost"),
        _column(b, "EdgeResponseStatus"),
        _column(b, "ClientRequestPath"),
    )
    method, tags = _column(b, "ClientRequestMethod"), _column(b, "BotTags")
    and_, or_ = pc.and_, pc.or_
    groups = [
        and_(and_(_yes(pc.equal(host, "api.example.com")), _yes(pc.greater_equal(status, 500))),
             or_(_yes(pc.less(_column(b, "BotScore"), 5)), _yes(pc.less_equal(_column(b, "WAFAttackScore"), 3)))),
        and_(and_(_yes(pc.is_in(_column(b, "ClientCountry"), pa.array(["kp", "ir"]))),
                  _no(pc.is_in(method, pa.array(["GET", "HEAD"])))),
             _yes(pc.starts_with(path, "/admin"))),
        and_(and_(_yes(pc.ends_with(path, ".php")), _no(pc.equal(_column(b, "CacheCacheStatus"), "hit"))),
             _yes(pc.match_substring(_column(b, "ClientRequestUserAgent"), "sqlmap"))),
        and_(and_(_any_element(tags, pc.equal(tags.values, "headless")),
                  _yes(pc.is_in(_column(b, "ClientASN"), pa.array([4134, 12389])))),
             _no(pc.starts_with(_column(b, "EdgeColoCode"), "S"))),
        and_(and_(_yes(pc.equal(_column(b, "SecurityAction"), "block")),
                  _yes(pc.greater(_column(b, "EdgeResponseBytes"), 150000))),
             _yes(pc.equal(_column(b, "CacheTieredFill"), True))),
        and_(_yes(pc.equal(status, 429)), _no(pc.ends_with(host, ".com"))),
        and_(and_(_yes(pc.equal(method, "DELETE")), _yes(pc.greater(_column(b, "EdgeResponseCompressionRatio"), 3.5))),
             _no(pc.match_substring(_column(b, "ClientRequestReferer"), "example"))),
    ]  # fmt: skip
    mask = groups[0]
    for group in groups[1:]:
        mask = or_(mask, group)
    return mask


def _seconds(run: Callable[[], int]) -> tuple[float, int]:
    gc.collect()
    started = time.perf_counter()
    selected = run()
    return time.perf_counter() - started, selected


def _per_record(predicate: Predicate, records: Sequence[Record]) -> Callable[[], int]:
    return lambda: sum(1 for _ in filter(predicate, records))


def _masks(predicate: ColumnPredicate, batches: Sequence[pa.RecordBatch]) -> Callable[[], int]:
    return lambda: sum(predicate(batch).true_count for batch in batches)


def _taken(predicate: ColumnPredicate, batches: Sequence[pa.RecordBatch]) -> Callable[[], int]:
    return lambda: sum(batch.filter(predicate(batch)).num_rows for batch in batches)


def measure(name: str, document: dict[str, Any], by_hand: Predicate, by_arrow: ColumnPredicate,
            records: Sequence[Record], batches: Sequence[pa.RecordBatch], rounds: int,
            interpreter_records: int) -> dict[str, Any]:  # fmt: skip
    dataset = load_dataset("http_requests")
    text = json.dumps(document, separators=(",", ":"))
    # The 30-operator filter is about 1,400 bytes: 30 operators of realistic size never fit in 1000 bytes.
    tree = parse_filter(text, dataset, max_bytes=2 * MAX_FILTER_BYTES)
    compiled = compile_filter(tree, dataset)
    columns = compile_column_filter(tree, dataset)

    def interpreted(record: Record) -> bool:
        return evaluate(tree, record, dataset)

    prefix = records[:interpreter_records]
    expected = [r for r in prefix if interpreted(r)]
    for other, label in ((compiled, "compiled"), (by_hand, "hand")):
        got = [r for r in prefix if other(r)]
        if got != expected:
            raise SystemExit(f"{name}: {label} selects {len(got)} records, the interpreter {len(expected)}")
    per_record = [compiled(record) for record in records]
    for column_predicate, label in ((columns, "columns"), (by_arrow, "arrow hand")):
        masks: list[bool] = []
        for batch in batches:
            mask = column_predicate(batch)
            if mask.null_count:
                raise SystemExit(f"{name}: the {label} mask has nulls")
            masks.extend(mask.to_pylist())
        if masks != per_record:
            raise SystemExit(f"{name}: {label} selects {sum(masks)} records, the compiled predicate {sum(per_record)}")
    best: dict[str, float] = {}
    selected: dict[str, int] = {}
    candidates: list[tuple[str, Callable[[], int]]] = [
        ("compiled", _per_record(compiled, records)), ("hand", _per_record(by_hand, records)),
        ("interpreter", _per_record(interpreted, prefix)), ("columns", _masks(columns, batches)),
        ("columns+take", _taken(columns, batches)), ("arrow hand", _masks(by_arrow, batches)),
    ]  # fmt: skip
    for round_ in range(rounds):
        order = candidates if round_ % 2 == 0 else candidates[::-1]
        for label, run in order:
            seconds, count = _seconds(run)
            best[label] = min(best.get(label, seconds), seconds)
            selected[label] = count
    if len({count for label, count in selected.items() if label != "interpreter"}) != 1:
        raise SystemExit(f"{name}: the variants select different numbers of records: {selected}")
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
        "arrow_hand_over_columns_time": round(best["columns"] / best["arrow hand"], 3),
        "columns_over_compiled_speed": round(rate["columns"] / rate["compiled"], 2),
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--records", type=int, default=1_000_000, help=f"records to generate (at most {MAX_RECORDS})")
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--interpreter-records", type=int, default=200_000)
    parser.add_argument("--batch-records", type=int, default=20_000, help="records per Arrow record batch")
    parser.add_argument("--json", action="store_true", help="print one JSON document instead of a table")
    args = parser.parse_args(argv)
    if not 1 <= args.records <= MAX_RECORDS:
        parser.error(f"--records must be between 1 and {MAX_RECORDS}")
    if not 1 <= args.rounds <= 50:
        parser.error("--rounds must be between 1 and 50")
    if not 1 <= args.batch_records <= 1_000_000:
        parser.error("--batch-records must be between 1 and 1000000")
    # One thread for Arrow's kernels and I/O, so that every figure is per core.
    pa.set_cpu_count(1)
    pa.set_io_thread_count(1)
    started = time.perf_counter()
    records = generate_records(args.records)
    generated = time.perf_counter() - started
    started = time.perf_counter()
    batches = to_batches(records, args.batch_records)
    converted = time.perf_counter() - started
    interpreter_records = max(1, min(args.interpreter_records, args.records))
    results = [
        measure("5 conditions", FIVE, five_by_hand, five_by_arrow, records, batches, args.rounds, interpreter_records),
        measure("30 operators", THIRTY, thirty_by_hand, thirty_by_arrow, records, batches, args.rounds,
                interpreter_records),
    ]  # fmt: skip
    if args.json:
        print(json.dumps({"generated_seconds": round(generated, 2), "converted_seconds": round(converted, 2),
                          "batch_records": args.batch_records, "results": results}, indent=2))  # fmt: skip
        return 0
    print(f"{args.records} records generated in {generated:.1f} s, converted to {len(batches)} Arrow batches of "
          f"{args.batch_records} in {converted:.1f} s; best of {args.rounds} rounds; one core")  # fmt: skip
    print(f"{'filter':<14} {'bytes':>5} {'ops':>4} {'selected':>9} {'compiled/s':>12} {'hand/s':>12} "
          f"{'interp/s':>11} {'compiled÷hand time':>19} {'compiled÷interp':>16}")  # fmt: skip
    for r in results:
        rate = r["records_per_second"]
        print(f"{r['filter']:<14} {r['bytes']:>5} {r['operators']:>4} {r['selected']:>9} {rate['compiled']:>12,} "
              f"{rate['hand']:>12,} {rate['interpreter']:>11,} {r['hand_over_compiled_time']:>19} "
              f"{r['compiled_over_interpreter_speed']:>16}")  # fmt: skip
    print(f"{'filter':<14} {'columns/s':>12} {'columns+take/s':>15} {'arrow hand/s':>13} {'columns÷hand time':>18} "
          f"{'columns÷compiled':>17}")  # fmt: skip
    for r in results:
        rate = r["records_per_second"]
        print(f"{r['filter']:<14} {rate['columns']:>12,} {rate['columns+take']:>15,} {rate['arrow hand']:>13,} "
              f"{r['arrow_hand_over_columns_time']:>18} {r['columns_over_compiled_speed']:>17}")  # fmt: skip
    print(f"(filters must stay within {MAX_FILTER_BYTES} bytes; targets: compiled÷hand time <= 1.5, >= 5,000,000/s; "
          "columns÷hand time compares columns with the hand-written Arrow expression)")  # fmt: skip
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
