"""``GET /zones/{zone_id}/analytics/requests``: the zone's ``http_requests`` records of a time range, aggregated for
the dashboard's Analytics page: requests over time by network, JSON-RPC method, status and cache status; the top
methods; the errors; the upstream time's p50 and p99. Computed with Arrow's kernels over the columns the edge
wrote (``edgeplane.logs.record_scan``), in the API process: the edge's request path is not involved.

A request is an error when its ``EdgeResponseStatus`` is 400 or more or it carries a ``JSONRPCErrorCode``. The upstream
time is ``OriginResponseDurationMs`` of the requests that went upstream; its percentiles are by nearest rank. The
totals count the cache's hits and misses (``CacheCacheStatus``), whose ratio the page shows; ``method`` narrows every
figure to the requests of one JSON-RPC method (an exact match, as the security events' filter).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.api.endpoint import ApiRequest, ApiResult
from edgeplane.api.log_reads import TimeRange, nearest_rank_index, rfc3339_ns, scan_zone, time_range
from edgeplane.api.permissions import Target
from edgeplane.api.zones import visible_zone

# The dimensions a chart splits requests by: the name in the answer, and the field.
DIMENSIONS: Final = {
    "network": "Web3Network",
    "method": "JSONRPCMethod",
    "status": "EdgeResponseStatus",
    "cache_status": "CacheCacheStatus",
}
TOP_KEYS: Final = 8  # a chart's series: the 8 largest, the rest summed as "other"
TOP_METHODS: Final = 10
NONE_KEY: Final = "none"
OTHER_KEY: Final = "other"
_COLUMNS: Final = (*DIMENSIONS.values(), "JSONRPCRequests", "JSONRPCErrorCode", "OriginResponseDurationMs")


class Analytics:
    """The analytics routes over the log partitions of ``data_dir``."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir

    def requests(self, request: ApiRequest) -> ApiResult:
        """``GET /zones/{zone_id}/analytics/requests?since=&until=&method=``: see the module docstring and
        docs/api.md."""
        zone = visible_zone(request, request.path_params["zone_id"])
        request.require(Target.zone(zone.account_id, zone.id))
        window = time_range(request.query)
        method = request.query.get("method") or None
        zone_name = zone.name

        def scan() -> ApiResult:
            scanned = scan_zone(
                self.data_dir, "http_requests", zone_name, window, time_field="EdgeStartTimestamp", columns=_COLUMNS
            )
            table = scanned.table
            if method is not None:
                table = table.filter(pc.fill_null(pc.equal(table.column("JSONRPCMethod"), method), False))
            coverage = _coverage(window, scanned.retained_since)
            return ApiResult(request_analytics(table, window) | coverage | {"method": method})

        return ApiResult(None, later=scan)  # the scan holds no database connection


def _coverage(window: TimeRange, retained_since: int | None) -> dict[str, Any]:
    return {
        "since": rfc3339_ns(window.since_ns),
        "until": rfc3339_ns(window.until_ns),
        "bucket_seconds": window.bucket_seconds,
        "buckets": window.bucket_starts(),
        "retained_since": rfc3339_ns(retained_since) if retained_since is not None else None,
    }


def request_analytics(table: pa.Table, window: TimeRange) -> dict[str, Any]:
    """The aggregations of ``http_requests`` records (a table of ``_COLUMNS`` and ``EdgeStartTimestamp``)."""
    buckets = window.bucket_of(table.column("EdgeStartTimestamp"))
    status = table.column("EdgeResponseStatus")
    error_code = table.column("JSONRPCErrorCode")
    failed = pc.fill_null(pc.or_(pc.greater_equal(status, 400), pc.is_valid(error_code)), False)
    durations = table.column("OriginResponseDurationMs")
    cache_status = table.column("CacheCacheStatus")
    return {
        "totals": {
            "requests": table.num_rows,
            "jsonrpc_requests": pc.sum(table.column("JSONRPCRequests")).as_py() or 0,
            "errors": pc.sum(pc.cast(failed, pa.int64())).as_py() or 0,
            "cache_hits": _count_equal(cache_status, "hit"),
            "cache_misses": _count_equal(cache_status, "miss"),
        },
        "series": {
            name: _series(_keys(table.column(field)), buckets, window.count) for name, field in DIMENSIONS.items()
        },
        "top_methods": _top_methods(_keys(table.column("JSONRPCMethod")), failed, durations),
        "errors": {
            "counts": _counts(pc.filter(buckets, failed), window.count),
            "by_code": _error_codes(error_code, status, failed),
        },
        "upstream_time": _upstream_time(buckets, durations, window.count),
    }


def _count_equal(column: pa.ChunkedArray, value: str) -> int:
    """How many of ``column``'s values are ``value``."""
    return int(pc.sum(pc.cast(pc.fill_null(pc.equal(column, value), False), pa.int64())).as_py() or 0)


def _keys(column: pa.ChunkedArray) -> pa.ChunkedArray:
    """A dimension's values as text, a missing one as ``none``."""
    text = column if pa.types.is_string(column.type) else pc.cast(column, pa.string())
    return pc.fill_null(text, NONE_KEY)


def _counts(buckets: pa.ChunkedArray | pa.Array, count: int) -> list[int]:
    """How many of ``buckets`` fall in each bucket."""
    counts = [0] * count
    if len(buckets):
        tallies = pc.value_counts(buckets)
        for value, tally in zip(tallies.field("values").to_pylist(), tallies.field("counts").to_pylist(), strict=True):
            if value is not None and 0 <= value < count:
                counts[value] += tally
    return counts


def _series(keys: pa.ChunkedArray, buckets: pa.ChunkedArray, count: int) -> list[dict[str, Any]]:
    """Requests per bucket of each key, the largest keys first; past ``TOP_KEYS``, the rest as ``other``."""
    if not len(keys):
        return []
    grouped = pa.table({"key": keys, "bucket": buckets}).group_by(["key", "bucket"]).aggregate([([], "count_all")])
    per_key: dict[str, list[int]] = {}
    for key, bucket, tally in zip(
        grouped.column("key").to_pylist(),
        grouped.column("bucket").to_pylist(),
        grouped.column("count_all").to_pylist(),
        strict=True,
    ):
        per_key.setdefault(key, [0] * count)[bucket] += tally
    ranked = sorted(per_key.items(), key=lambda item: (-sum(item[1]), item[0]))
    series = [{"key": key, "total": sum(counts), "counts": counts} for key, counts in ranked[:TOP_KEYS]]
    if len(ranked) > TOP_KEYS:
        rest = [sum(column) for column in zip(*(counts for _key, counts in ranked[TOP_KEYS:]), strict=True)]
        series.append({"key": OTHER_KEY, "total": sum(rest), "counts": rest})
    return series


def _top_methods(methods: pa.ChunkedArray, failed: pa.ChunkedArray, durations: pa.ChunkedArray) -> list[dict[str, Any]]:
    """The methods with the most requests: their requests, errors and upstream p50 and p99."""
    if not len(methods):
        return []
    table = pa.table({"method": methods, "failed": pc.cast(failed, pa.int64())})
    grouped = table.group_by("method").aggregate([([], "count_all"), ("failed", "sum")])
    ranked = sorted(
        zip(grouped.column("method").to_pylist(), grouped.column("count_all").to_pylist(), strict=True),
        key=lambda item: (-item[1], item[0]),
    )[:TOP_METHODS]
    errors = dict(zip(grouped.column("method").to_pylist(), grouped.column("failed_sum").to_pylist(), strict=True))
    times = percentiles_by(methods, durations)
    return [
        {
            "method": method,
            "requests": requests,
            "errors": errors[method],
            "p50_ms": times.get(method, (None, None))[0],
            "p99_ms": times.get(method, (None, None))[1],
        }
        for method, requests in ranked
    ]


def _error_codes(error_code: pa.ChunkedArray, status: pa.ChunkedArray, failed: pa.ChunkedArray) -> list[dict[str, Any]]:
    """The failed requests by what failed: the JSON-RPC error code when there is one, else the HTTP status."""
    labels = pc.if_else(
        pc.is_valid(error_code),
        pc.binary_join_element_wise("JSON-RPC ", pc.cast(error_code, pa.string()), ""),
        pc.binary_join_element_wise("HTTP ", pc.cast(status, pa.string()), ""),
    )
    chosen = pc.filter(pc.fill_null(labels, "HTTP none"), failed)
    if not len(chosen):
        return []
    tallies = pc.value_counts(chosen)
    pairs = zip(tallies.field("values").to_pylist(), tallies.field("counts").to_pylist(), strict=True)
    return [{"error": label, "count": tally} for label, tally in sorted(pairs, key=lambda item: (-item[1], item[0]))]


def _upstream_time(buckets: pa.ChunkedArray, durations: pa.ChunkedArray, count: int) -> dict[str, Any]:
    """The upstream time's p50 and p99 in each bucket and over the range (None where nothing went upstream)."""
    per_bucket = percentiles_by(buckets, durations)
    overall = percentiles_by(pa.chunked_array([pa.repeat(pa.scalar(0, pa.int8()), len(durations))]), durations)
    p50_total, p99_total = overall.get(0, (None, None))
    return {
        "p50_ms": [per_bucket.get(bucket, (None, None))[0] for bucket in range(count)],
        "p99_ms": [per_bucket.get(bucket, (None, None))[1] for bucket in range(count)],
        "p50_ms_total": p50_total,
        "p99_ms_total": p99_total,
    }


def percentiles_by(keys: pa.ChunkedArray, values: pa.ChunkedArray) -> dict[Any, tuple[int, int]]:
    """The p50 and p99 by nearest rank of the non-null ``values`` of each key: the values sorted within their key
    once (the keys as the integer codes of a dictionary, which sort faster than text), and the ranks read at each
    key's run, so that no value becomes a Python object but the chosen ones."""
    encoded = pc.dictionary_encode(keys.combine_chunks())
    table = pa.table({"code": encoded.indices, "value": values.combine_chunks()})
    table = table.filter(pc.is_valid(table.column("value"))).sort_by([("code", "ascending"), ("value", "ascending")])
    if not table.num_rows:
        return {}
    runs = pc.run_end_encode(table.column("code").combine_chunks())
    sorted_values = table.column("value").combine_chunks()
    names = encoded.dictionary.to_pylist()
    found: dict[Any, tuple[int, int]] = {}
    start = 0
    for code, end in zip(runs.values.to_pylist(), runs.run_ends.to_pylist(), strict=True):
        size = end - start
        found[names[code]] = (
            sorted_values[start + nearest_rank_index(size, 0.5)].as_py(),
            sorted_values[start + nearest_rank_index(size, 0.99)].as_py(),
        )
        start = end
    return found
