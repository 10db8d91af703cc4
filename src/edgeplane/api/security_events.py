"""``GET /zones/{zone_id}/security/events`` and ``.../security/events/histogram``: the zone's ``firewall_events``
records of a time range (the activity log of Security → Events), newest first, and their count over time by action.

Both take the same filters, each an exact match: ``action``, ``rule_id``, ``ruleset_id`` (the event's
``Metadata.ruleset_id``), ``ip`` (``ClientIP``), ``country`` (``ClientCountry``, either case), ``path``
(``ClientRequestPath``), ``method`` (the JSON-RPC method of the event's request). ``firewall_events`` has no JSON-RPC
field: each event is given its request's ``JSONRPCMethod`` from the ``http_requests`` record of the same ``RayID``,
and ``attack_scores`` read from its ``Metadata`` (``waf_score``, ...: present when the request was scored).
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, Final

import pyarrow as pa
import pyarrow.compute as pc

from edgeplane.api.endpoint import ApiRequest, ApiResult, paginate
from edgeplane.api.log_reads import NS_PER_SECOND, TimeRange, rfc3339_ns, scan_zone, time_range
from edgeplane.api.permissions import Target
from edgeplane.api.zones import visible_zone
from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.record_columns import rows_of

# Filters on a column of the event: the query parameter and the field.
COLUMN_FILTERS: Final = {
    "action": "Action",
    "rule_id": "RuleID",
    "ip": "ClientIP",
    "country": "ClientCountry",
    "path": "ClientRequestPath",
}
FILTERS: Final = (*COLUMN_FILTERS, "ruleset_id", "method")
_SCORES: Final = {"waf_score": "attack", "waf_score_sqli": "sqli", "waf_score_xss": "xss", "waf_score_rce": "rce"}
_ALWAYS: Final = frozenset({"JSONRPCMethod", "attack_scores"})  # members an event has even when null
# How far apart an event's time and its request's start may be when joining them by RayID.
_JOIN_MARGIN_NS: Final = 60 * NS_PER_SECOND


class SecurityEvents:
    """The security events routes over the log partitions of ``data_dir``."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir

    def list_events(self, request: ApiRequest) -> ApiResult:
        """``GET /zones/{zone_id}/security/events``: the matching events, newest first, paginated (at most 100 a
        page), each with its ``JSONRPCMethod`` and ``attack_scores``."""
        _window, events, retained_since = self._events(request)
        events.sort(key=lambda event: (-event["Datetime"], event.get("MatchIndex", 0)))
        page = paginate(events, request.query, default_per_page=25, max_per_page=100)
        assert page.result_info is not None
        page.result_info["retained_since"] = rfc3339_ns(retained_since) if retained_since is not None else None
        for event in page.result:
            event["Datetime"] = rfc3339_ns(event["Datetime"])
        return page

    def histogram(self, request: ApiRequest) -> ApiResult:
        """``GET /zones/{zone_id}/security/events/histogram``: the matching events per bucket of the range, by
        action."""
        window, events, retained_since = self._events(request)
        per_action: dict[str, list[int]] = {}
        for event in events:
            bucket = (event["Datetime"] - window.since_ns) // (window.bucket_seconds * NS_PER_SECOND)
            per_action.setdefault(event.get("Action") or "none", [0] * window.count)[bucket] += 1
        ranked = sorted(per_action.items(), key=lambda item: (-sum(item[1]), item[0]))
        return ApiResult(
            {
                "since": rfc3339_ns(window.since_ns),
                "until": rfc3339_ns(window.until_ns),
                "bucket_seconds": window.bucket_seconds,
                "buckets": window.bucket_starts(),
                "retained_since": rfc3339_ns(retained_since) if retained_since is not None else None,
                "total": len(events),
                "series": [{"key": key, "total": sum(counts), "counts": counts} for key, counts in ranked],
            }
        )

    def _events(self, request: ApiRequest) -> tuple[TimeRange, list[dict[str, Any]], int | None]:
        zone = visible_zone(request, request.path_params["zone_id"])
        request.require(Target.zone(zone.account_id, zone.id))
        window = time_range(request.query)
        wanted = {name: request.query[name] for name in FILTERS if request.query.get(name)}
        fields = [field.name for field in load_dataset("firewall_events").fields]
        scanned = scan_zone(self.data_dir, "firewall_events", zone.name, window, time_field="Datetime", columns=fields)
        table = scanned.table
        for name, field in COLUMN_FILTERS.items():
            if name in wanted:
                column = table.column(field)
                value = wanted[name]
                if name == "country":
                    column, value = pc.utf8_lower(column), value.lower()
                table = table.filter(pc.fill_null(pc.equal(column, value), False))
        events = rows_of(table.combine_chunks().to_batches()[0]) if table.num_rows else []
        methods = self._methods_of(zone.name, window, events)
        kept = []
        for event in events:
            metadata = event.get("Metadata") or {}
            if "ruleset_id" in wanted and metadata.get("ruleset_id") != wanted["ruleset_id"]:
                continue
            event["JSONRPCMethod"] = methods.get(event.get("RayID") or "")
            if "method" in wanted and event["JSONRPCMethod"] != wanted["method"]:
                continue
            event["attack_scores"] = _attack_scores(metadata)
            event.pop("ZoneName", None)
            kept.append({name: value for name, value in event.items() if value is not None or name in _ALWAYS})
        return window, kept, scanned.retained_since

    def _methods_of(self, zone_name: str, window: TimeRange, events: list[dict[str, Any]]) -> dict[str, str]:
        """The JSON-RPC method of each event's request, by RayID (the requests of the range and a minute around)."""
        if not events:
            return {}
        around = TimeRange(window.since_ns - _JOIN_MARGIN_NS, window.until_ns + _JOIN_MARGIN_NS, window.bucket_seconds)
        requests = scan_zone(
            self.data_dir,
            "http_requests",
            zone_name,
            around,
            time_field="EdgeStartTimestamp",
            columns=("RayID", "JSONRPCMethod"),
        ).table
        rays = pa.array({event.get("RayID") for event in events} - {None}, type=pa.string())
        requests = requests.filter(pc.fill_null(pc.is_in(requests.column("RayID"), value_set=rays), False))
        return {
            ray: method
            for ray, method in zip(
                requests.column("RayID").to_pylist(), requests.column("JSONRPCMethod").to_pylist(), strict=True
            )
            if method is not None
        }


def _attack_scores(metadata: Mapping[str, Any]) -> dict[str, int] | None:
    """The request's WAF attack scores as the event's ``Metadata`` keeps them (None when it was not scored)."""
    scores = {name: int(metadata[key]) for key, name in _SCORES.items() if str(metadata.get(key, "")).isdigit()}
    return scores or None
