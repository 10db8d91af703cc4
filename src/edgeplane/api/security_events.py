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
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

import orjson
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
# How far apart an event's time and its request's start may be when joining them by RayID.
_JOIN_MARGIN_NS: Final = 60 * NS_PER_SECOND


class SecurityEvents:
    """The security events routes over the log partitions of ``data_dir``. The filters and the ordering run on the
    columns; only the events of the page asked for become Python objects."""

    def __init__(self, data_dir: Path | None) -> None:
        self.data_dir = data_dir

    def list_events(self, request: ApiRequest) -> ApiResult:
        """``GET /zones/{zone_id}/security/events``: the matching events, newest first, paginated (at most 100 a
        page), each with its ``JSONRPCMethod`` and ``attack_scores``."""
        asked = self._asked(request)
        query = request.query

        def page_of_events() -> ApiResult:
            matched = self._matching(asked)
            ordered = matched.events.sort_by([("Datetime", "descending"), ("MatchIndex", "ascending")])
            page = paginate(list(range(ordered.num_rows)), query, default_per_page=25, max_per_page=100)
            assert page.result_info is not None
            page.result_info["retained_since"] = _time_or_none(matched.retained_since)
            chosen = ordered.take(pa.array(page.result, type=pa.int64())) if page.result else ordered.slice(0, 0)
            events = rows_of(chosen.combine_chunks().to_batches()[0]) if chosen.num_rows else []
            page.result = [_event_json(event, matched.methods) for event in events]
            return page

        return ApiResult(None, later=page_of_events)  # the scan holds no database connection

    def histogram(self, request: ApiRequest) -> ApiResult:
        """``GET /zones/{zone_id}/security/events/histogram``: the matching events per bucket of the range, by
        action."""
        asked = self._asked(request)
        return ApiResult(None, later=lambda: self._histogram(asked))  # the scan holds no database connection

    def _histogram(self, asked: _Asked) -> ApiResult:
        matched = self._matching(asked)
        window, events = matched.window, matched.events
        grouped = (
            pa.table(
                {
                    "action": pc.fill_null(events.column("Action"), "none"),
                    "bucket": window.bucket_of(events.column("Datetime")),
                }
            )
            .group_by(["action", "bucket"])
            .aggregate([([], "count_all")])
        )
        per_action: dict[str, list[int]] = {}
        for action, bucket, tally in zip(
            grouped.column("action").to_pylist(),
            grouped.column("bucket").to_pylist(),
            grouped.column("count_all").to_pylist(),
            strict=True,
        ):
            per_action.setdefault(action, [0] * window.count)[bucket] += tally
        ranked = sorted(per_action.items(), key=lambda item: (-sum(item[1]), item[0]))
        return ApiResult(
            {
                "since": rfc3339_ns(window.since_ns),
                "until": rfc3339_ns(window.until_ns),
                "bucket_seconds": window.bucket_seconds,
                "buckets": window.bucket_starts(),
                "retained_since": _time_or_none(matched.retained_since),
                "total": events.num_rows,
                "series": [{"key": key, "total": sum(counts), "counts": counts} for key, counts in ranked],
            }
        )

    @staticmethod
    def _asked(request: ApiRequest) -> _Asked:
        """The zone (visible to the caller and permitted), the range and the filters asked for: all the database is
        needed for."""
        zone = visible_zone(request, request.path_params["zone_id"])
        request.require(Target.zone(zone.account_id, zone.id))
        window = time_range(request.query)
        wanted = {name: request.query[name] for name in FILTERS if request.query.get(name)}
        return _Asked(zone.name, window, wanted)

    def _matching(self, asked: _Asked) -> _Matched:
        zone_name, window, wanted = asked.zone_name, asked.window, asked.wanted
        fields = [field.name for field in load_dataset("firewall_events").fields]
        scanned = scan_zone(self.data_dir, "firewall_events", zone_name, window, time_field="Datetime", columns=fields)
        events = scanned.table
        for name, field in COLUMN_FILTERS.items():
            if name in wanted:
                column, value = events.column(field), wanted[name]
                if name == "country":
                    column, value = pc.utf8_lower(column), value.lower()
                events = events.filter(pc.fill_null(pc.equal(column, value), False))
        if "ruleset_id" in wanted:
            rulesets = [_ruleset_of(text) for text in events.column("Metadata").to_pylist()]
            events = events.filter(pa.array([ruleset == wanted["ruleset_id"] for ruleset in rulesets]))
        methods = self._methods_of(zone_name, window, events.column("RayID"))
        if "method" in wanted:
            rays = events.column("RayID").to_pylist()
            events = events.filter(pa.array([methods.get(ray or "") == wanted["method"] for ray in rays]))
        return _Matched(window, events, methods, scanned.retained_since)

    def _methods_of(self, zone_name: str, window: TimeRange, rays: pa.ChunkedArray) -> dict[str, str]:
        """The JSON-RPC method of each event's request, by RayID (the requests of the range and a minute around)."""
        if not len(rays):
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
        wanted = pc.unique(rays.combine_chunks())
        requests = requests.filter(pc.fill_null(pc.is_in(requests.column("RayID"), value_set=wanted), False))
        requests = requests.filter(pc.is_valid(requests.column("JSONRPCMethod")))
        return dict(
            zip(requests.column("RayID").to_pylist(), requests.column("JSONRPCMethod").to_pylist(), strict=True)
        )


@dataclass(frozen=True, slots=True)
class _Asked:
    """What a request asks of the events: its zone's name, its range, and its filters by query parameter."""

    zone_name: str
    window: TimeRange
    wanted: dict[str, str]


@dataclass(frozen=True, slots=True)
class _Matched:
    """The events a request's range and filters select, in columns, and the JSON-RPC methods of their requests."""

    window: TimeRange
    events: pa.Table
    methods: dict[str, str]
    retained_since: int | None


def _time_or_none(nanoseconds: int | None) -> str | None:
    return rfc3339_ns(nanoseconds) if nanoseconds is not None else None


def _ruleset_of(metadata: str | None) -> str | None:
    """The ``ruleset_id`` of an event's ``Metadata`` (JSON text in the column)."""
    if not metadata:
        return None
    parsed = orjson.loads(metadata)
    return parsed.get("ruleset_id") if isinstance(parsed, dict) else None


def _event_json(event: dict[str, Any], methods: Mapping[str, str]) -> dict[str, Any]:
    """An event as the list answers it: its fields (nulls left out), its time as RFC 3339, its request's JSON-RPC
    method and its attack scores."""
    metadata = event.get("Metadata") or {}
    answer = {name: value for name, value in event.items() if value is not None and name != "ZoneName"}
    answer["Datetime"] = rfc3339_ns(event["Datetime"])
    answer["JSONRPCMethod"] = methods.get(event.get("RayID") or "")
    answer["attack_scores"] = _attack_scores(metadata)
    return answer


def _attack_scores(metadata: Mapping[str, Any]) -> dict[str, int] | None:
    """The request's WAF attack scores as the event's ``Metadata`` keeps them (None when it was not scored)."""
    scores = {name: int(metadata[key]) for key, name in _SCORES.items() if str(metadata.get(key, "")).isdigit()}
    return scores or None
