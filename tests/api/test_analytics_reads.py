"""The read endpoints over the log store: ``/zones/{zone_id}/analytics/requests`` and ``/security/events`` (with
``/histogram``), on records appended to an edge worker's log partition: the aggregations, the filters, the range and
scan limits, and the same authentication and scoping as the other zone routes."""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from starlette.testclient import TestClient

from edgeplane.api.asgi import build_api_app
from edgeplane.api.endpoint import ControlPlane
from edgeplane.api.permissions import ZONE_SCOPE
from edgeplane.bootstrap import ensure_bootstrap
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.partitions import partition_directory
from edgeplane.logs.record_scan import ScanLimitError, scan_records
from edgeplane.store.database import Database
from tests.api.conftest import Api

SINCE = datetime(2026, 11, 27, 5, 0, tzinfo=UTC)
UNTIL = SINCE + timedelta(minutes=30)  # 60 buckets of 30 seconds
RANGE = "since=2026-11-27T05:00:00Z&until=2026-11-27T05:30:00Z"


def ns(minutes: float) -> int:
    return int((SINCE + timedelta(minutes=minutes)).timestamp() * 1_000_000_000)


def request_record(zone: str, minute: float, **fields: Any) -> dict[str, Any]:
    return {"ZoneName": zone, "EdgeStartTimestamp": ns(minute), "RayID": f"ray-{minute}", **fields}


@pytest.fixture
def world(database: Database, tmp_path: Path) -> Iterator[tuple[Api, Path]]:
    data_dir = tmp_path / "data"
    ensure_bootstrap(tmp_path, database)
    credentials = json.loads((tmp_path / "credentials.json").read_text())
    plane = ControlPlane(database, secret=b"test-secret", data_dir=data_dir)
    with TestClient(build_api_app(plane)) as client:
        yield Api(client, credentials, []), data_dir


def zone_of(api: Api) -> tuple[str, str]:
    zone_id = api.credentials["zone_id"]
    return zone_id, api.call("GET", f"/zones/{zone_id}").json()["result"]["name"]


def append(data_dir: Path, dataset: str, rows: list[dict[str, Any]], worker: int = 0) -> None:
    with SegmentedLogStore(partition_directory(data_dir, worker)) as store:
        store.append_rows(dataset, rows)


def token_with(api: Api, group: str, zone_id: str) -> dict[str, str]:
    policy = {"effect": "allow", "resources": {f"{ZONE_SCOPE}.{zone_id}": "*"}, "permission_groups": [{"name": group}]}
    made = api.call("POST", "/user/tokens", json={"name": group, "policies": [policy]}).json()
    assert made["success"], made
    return {"Authorization": f"Bearer {made['result']['value']}"}


def test_requests_aggregated_by_dimension_over_the_range(world: tuple[Api, Path]) -> None:
    api, data_dir = world
    zone_id, zone = zone_of(api)
    common = {
        "Web3Network": "mainnet",
        "CacheCacheStatus": "miss",
        "JSONRPCRequests": 1,
        "JSONRPCMethod": "eth_call",
        "EdgeResponseStatus": 200,
    }
    rows = [
        *(
            request_record(zone, minute, **common, OriginResponseDurationMs=ms)
            for minute, ms in [(0.1, 10), (0.2, 20), (0.3, 30), (0.4, 40), (0.45, 500)]
        ),
        request_record(
            zone, 1.0, Web3Network="sepolia", CacheCacheStatus="hit", JSONRPCMethod="eth_chainId",
            EdgeResponseStatus=200, JSONRPCRequests=1,
        ),
        request_record(
            zone, 29.9, Web3Network="mainnet", JSONRPCMethod="eth_call", EdgeResponseStatus=200,
            JSONRPCErrorCode=-32000, JSONRPCRequests=1, OriginResponseDurationMs=7,
        ),
        request_record(zone, 10.0, EdgeResponseStatus=403),  # blocked: no network, method or cache status
        request_record("other.example", 1.0, Web3Network="mainnet", EdgeResponseStatus=200),  # another zone
        request_record(zone, 31.0, Web3Network="mainnet", EdgeResponseStatus=200),  # after the range
    ]  # fmt: skip
    append(data_dir, "http_requests", rows[:5])
    append(data_dir, "http_requests", rows[5:], worker=1)  # every partition is read
    answer = api.call("GET", f"/zones/{zone_id}/analytics/requests?{RANGE}").json()
    assert answer["success"], answer
    result = answer["result"]
    assert (result["bucket_seconds"], len(result["buckets"]), result["buckets"][0]) == (30, 60, "2026-11-27T05:00:00Z")
    assert result["totals"] == {
        "requests": 8,
        "jsonrpc_requests": 7,
        "errors": 2,
        "cache_hits": 1,
        "cache_misses": 5,
    }
    assert result["method"] is None
    network = {series["key"]: series for series in result["series"]["network"]}
    assert (network["mainnet"]["total"], network["mainnet"]["counts"][0]) == (6, 5)
    assert network["mainnet"]["counts"][59] == 1
    assert (network["sepolia"]["counts"][2], network["none"]["counts"][20]) == (1, 1)
    assert [series["key"] for series in result["series"]["status"]] == ["200", "403"]
    assert {series["key"]: series["total"] for series in result["series"]["cache_status"]} == {
        "miss": 5,
        "none": 2,
        "hit": 1,
    }
    assert result["top_methods"][0] == {"method": "eth_call", "requests": 6, "errors": 1, "p50_ms": 20, "p99_ms": 500}
    assert result["top_methods"][1]["method"] == "eth_chainId"
    assert result["errors"]["by_code"] == [{"error": "HTTP 403", "count": 1}, {"error": "JSON-RPC -32000", "count": 1}]
    assert (result["errors"]["counts"][20], result["errors"]["counts"][59], sum(result["errors"]["counts"])) == (
        1,
        1,
        2,
    )
    upstream = result["upstream_time"]
    assert (upstream["p50_ms"][0], upstream["p99_ms"][0], upstream["p50_ms"][1], upstream["p50_ms"][59]) == (
        30,
        500,
        None,
        7,
    )
    assert (upstream["p50_ms_total"], upstream["p99_ms_total"]) == (20, 500)
    assert result["retained_since"] is None

    # One JSON-RPC method: every figure is of its requests only.
    narrowed = api.call("GET", f"/zones/{zone_id}/analytics/requests?{RANGE}&method=eth_call").json()["result"]
    assert narrowed["method"] == "eth_call"
    assert narrowed["totals"] == {
        "requests": 6,
        "jsonrpc_requests": 6,
        "errors": 1,
        "cache_hits": 0,
        "cache_misses": 5,
    }
    assert [series["key"] for series in narrowed["series"]["method"]] == ["eth_call"]
    assert [item["method"] for item in narrowed["top_methods"]] == ["eth_call"]
    assert (narrowed["upstream_time"]["p50_ms_total"], narrowed["upstream_time"]["p99_ms_total"]) == (20, 500)
    unknown = api.call("GET", f"/zones/{zone_id}/analytics/requests?{RANGE}&method=none").json()["result"]
    assert unknown["totals"]["requests"] == 0  # an exact match: "none" is the charts' name for no method, not a filter
    assert unknown["series"]["network"] == []


def firewall_event(zone: str, minute: float, ray: str, **fields: Any) -> dict[str, Any]:
    return {"ZoneName": zone, "Datetime": ns(minute), "RayID": ray, "Kind": "firewall", **fields}


def test_security_events_filtered_joined_and_counted(world: tuple[Api, Path]) -> None:
    api, data_dir = world
    zone_id, zone = zone_of(api)
    scores = {"waf_score": "12", "waf_score_sqli": "9", "waf_score_xss": "80", "waf_score_rce": "70"}
    append(
        data_dir,
        "firewall_events",
        [
            firewall_event(
                zone, 1.0, "r1", Action="block", RuleID="rule-a", ClientIP="192.0.2.1", ClientCountry="nl",
                ClientRequestPath="/v1/mainnet", Metadata={"ruleset_id": "set-1", **scores}, Source="firewallCustom",
            ),
            firewall_event(
                zone, 2.0, "r2", Action="log", RuleID="rule-b", ClientIP="192.0.2.2", ClientCountry="de",
                ClientRequestPath="/v1/sepolia", Metadata={"ruleset_id": "set-2"},
            ),
            firewall_event(zone, 3.0, "r3", Action="block", RuleID="rule-a", Metadata={"ruleset_id": "set-1"}),
            firewall_event("other.example", 1.0, "r4", Action="block", RuleID="rule-a"),
        ],
    )  # fmt: skip
    append(
        data_dir,
        "http_requests",
        [request_record(zone, 1.0, RayID="r1", JSONRPCMethod="eth_sendRawTransaction"),
         request_record(zone, 2.0, RayID="r2", JSONRPCMethod="eth_call")],
    )  # fmt: skip
    path = f"/zones/{zone_id}/security/events"
    listed = api.call("GET", f"{path}?{RANGE}").json()
    assert listed["success"], listed
    assert [event["RayID"] for event in listed["result"]] == ["r3", "r2", "r1"]
    assert listed["result_info"]["total_count"] == 3
    first = listed["result"][2]
    assert first["Datetime"] == "2026-11-27T05:01:00Z"
    assert first["JSONRPCMethod"] == "eth_sendRawTransaction"
    assert first["attack_scores"] == {"attack": 12, "sqli": 9, "xss": 80, "rce": 70}
    assert (first["Metadata"]["ruleset_id"], first["RuleID"]) == ("set-1", "rule-a")
    assert (listed["result"][0]["JSONRPCMethod"], listed["result"][0]["attack_scores"]) == (None, None)
    for query, rays in [
        ("action=block", ["r3", "r1"]),
        ("rule_id=rule-b", ["r2"]),
        ("ruleset_id=set-1", ["r3", "r1"]),
        ("ip=192.0.2.2", ["r2"]),
        ("country=NL", ["r1"]),
        ("path=/v1/sepolia", ["r2"]),
        ("method=eth_sendRawTransaction", ["r1"]),
        ("action=block&ruleset_id=set-2", []),
    ]:
        answer = api.call("GET", f"{path}?{RANGE}&{query}").json()
        assert [event["RayID"] for event in answer["result"]] == rays, query
    histogram = api.call("GET", f"{path}/histogram?{RANGE}").json()["result"]
    assert histogram["total"] == 3
    series = {item["key"]: item["counts"] for item in histogram["series"]}
    assert (series["block"][2], series["block"][6], series["log"][4], sum(series["log"])) == (1, 1, 1, 1)
    only_log = api.call("GET", f"{path}/histogram?{RANGE}&action=log").json()["result"]
    assert [item["key"] for item in only_log["series"]] == ["log"]


@pytest.mark.parametrize(
    ("query", "code"),
    [
        ("since=yesterday", 1001),
        ("since=2026-11-27T05:00:00", 1001),
        ("since=2026-11-27T05:30:00Z&until=2026-11-27T05:00:00Z", 1001),
        ("since=2026-11-19T05:00:00Z&until=2026-11-27T05:00:00Z", 1010),
    ],
)
def test_a_range_it_cannot_read_is_refused_with_a_code(world: tuple[Api, Path], query: str, code: int) -> None:
    api, _data_dir = world
    zone_id, _zone = zone_of(api)
    for path in ("analytics/requests", "security/events", "security/events/histogram"):
        response = api.call("GET", f"/zones/{zone_id}/{path}?{query}")
        assert (response.status_code, response.json()["errors"][0]["code"]) == (400, code), path


def test_the_same_authentication_and_scoping_as_the_zone_routes(world: tuple[Api, Path]) -> None:
    api, _data_dir = world
    zone_id, _zone = zone_of(api)
    paths = [
        f"/zones/{zone_id}/{p}?{RANGE}" for p in ("analytics/requests", "security/events", "security/events/histogram")
    ]
    logs_reader = token_with(api, "Logs Read", zone_id)
    analytics_reader = token_with(api, "Analytics Read", zone_id)
    for path in paths:
        assert api.call("GET", path, headers={"Authorization": "Bearer nope"}).status_code in (400, 401, 403)
        refused = api.call("GET", path, headers=logs_reader)
        assert (refused.status_code, refused.json()["success"]) == (403, False), path
        assert api.call("GET", path, headers=analytics_reader).json()["success"] is True, path
        assert api.call("GET", path, headers=api.key_headers).json()["success"] is True, path
        unknown = api.call("GET", path.replace(zone_id, "0" * 32))
        assert unknown.status_code == 404, path


def test_a_scan_stops_at_its_limit_rather_than_miss_records(tmp_path: Path) -> None:
    rows = [request_record("z.example", minute, Web3Network="mainnet") for minute in (1, 2, 3, 4)]
    append(tmp_path, "http_requests", rows)

    def scan(since_minute: float, limit: int) -> int:
        return scan_records(
            tmp_path,
            "http_requests",
            zone_name="z.example",
            time_field="EdgeStartTimestamp",
            since_ns=ns(since_minute),
            until_ns=ns(30),
            columns=("Web3Network",),
            scan_limit=limit,
        ).table.num_rows

    assert scan(0, 4) == 4
    with pytest.raises(ScanLimitError):
        scan(0, 2)  # the newest two are inside the range, and so may be older ones
    assert scan(2.5, 3) == 2  # the oldest record read is before the range: nothing older is in it


def test_retention_is_reported_as_where_the_answer_starts(tmp_path: Path) -> None:
    directory = partition_directory(tmp_path, 0)
    with SegmentedLogStore(directory, segment_bytes=1, retention_bytes=1) as store:
        for minute in (1, 2, 3):
            store.append_rows("http_requests", [request_record("z.example", minute, Web3Network="mainnet")])
            store.flush()
    scanned = scan_records(
        tmp_path,
        "http_requests",
        zone_name="z.example",
        time_field="EdgeStartTimestamp",
        since_ns=ns(0),
        until_ns=ns(30),
        columns=("Web3Network",),
        scan_limit=1000,
    )
    assert scanned.table.num_rows < 3
    assert scanned.retained_since == scanned.table.column("EdgeStartTimestamp")[0].as_py()


def test_the_matches_of_one_request_list_the_terminating_one_first(world: tuple[Api, Path]) -> None:
    api, data_dir = world
    zone_id, zone = zone_of(api)
    append(
        data_dir,
        "firewall_events",
        [
            firewall_event(zone, 5.0, "r9", Action="log", RuleID="logged", MatchIndex=1),
            firewall_event(zone, 5.0, "r9", Action="block", RuleID="blocking", MatchIndex=0),
            firewall_event(zone, 4.0, "r8", Action="log", RuleID="earlier", MatchIndex=0),
        ],
    )
    listed = api.call("GET", f"/zones/{zone_id}/security/events?{RANGE}&per_page=2&page=1").json()
    assert [event["RuleID"] for event in listed["result"]] == ["blocking", "logged"]
    assert (listed["result_info"]["total_count"], listed["result_info"]["total_pages"]) == (3, 2)
    second = api.call("GET", f"/zones/{zone_id}/security/events?{RANGE}&per_page=2&page=2").json()
    assert [event["RuleID"] for event in second["result"]] == ["earlier"]


@pytest.mark.parametrize("path", ["analytics/requests", "security/events", "security/events/histogram"])
def test_a_scan_holds_no_database_connection(
    world: tuple[Api, Path], database: Database, monkeypatch: pytest.MonkeyPatch, path: str
) -> None:
    """The scans of the log store run after the handler's session is closed: a long read does not hold one of the
    pool's connections (nor, on SQLite, a read transaction) while it runs."""
    import edgeplane.api.analytics as analytics
    import edgeplane.api.security_events as security_events

    api, _data_dir = world
    zone_id, _zone = zone_of(api)
    checked_out: list[int] = []
    for module in (analytics, security_events):
        scan = module.scan_zone

        def watched(*args: Any, scan: Any = scan, **kwargs: Any) -> Any:
            checked_out.append(database.engine.pool.checkedout())  # type: ignore[attr-defined]
            return scan(*args, **kwargs)

        monkeypatch.setattr(module, "scan_zone", watched)
    answer = api.call("GET", f"/zones/{zone_id}/{path}?{RANGE}").json()
    assert answer["success"], answer
    assert checked_out
    assert set(checked_out) == {0}
