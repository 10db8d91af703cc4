"""The request log: an answered request becomes one ``http_requests`` record with every field the edge knows,
journalled, and taken into the store in bulk as a record batch per sealed period; rows no batch can hold still reach
the store, and a refusing store leaves them in the journal for the next take."""

from __future__ import annotations

import asyncio
import errno
import time
from pathlib import Path
from typing import Any

import orjson

from edgeplane.configuration.snapshot import ZoneRoute
from edgeplane.edge.client_location import ClientLocator
from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import EdgeRequest, EdgeResponse
from edgeplane.edge.request_log import HTTP_REQUEST_COLUMNS, RequestLog
from edgeplane.edge.runtime import EdgeRuntime
from edgeplane.logs.datasets import load_dataset
from edgeplane.logs.journal_intake import RECORDS_REFUSED, JournalIntake
from edgeplane.logs.log_store import SegmentedLogStore
from edgeplane.logs.request_journal import RequestJournal, sealed_periods
from edgeplane.logs.request_rows import HTTP_REQUESTS
from edgeplane.waf.firewall import Match, Verdict
from tests.support.journalled_store import JournalledStore
from tests.support.memory_log_store import MemoryLogStore

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="example.com", account_id="a" * 32, plan="enterprise")
STARTED = 1_700_000_000_000_000_000


def edge_request(path: str = "/v1/mainnet", query: bytes = b"", **headers: str) -> EdgeRequest:
    return EdgeRequest(
        method="POST",
        path=path,
        raw_path=path,
        query_string=query,
        headers=[
            (b"host", b"rpc.example.com"),
            *((k.replace("_", "-").encode(), v.encode()) for k, v in headers.items()),
        ],
        http_version="1.1",
        client=("198.51.100.4", 40000),
        server=("127.0.0.1", 8080),
        content_length=17,
        body=b'{"jsonrpc":"2.0"}',
    )


RESPONSE = EdgeResponse(200, b'{"jsonrpc":"2.0","id":1,"result":"0x1"}', headers=((b"cf-ray", b"00ab-EDG"),))
SENT_BYTES = 150  # what the server says it wrote


def emit(log: RequestLog, request: EdgeRequest | None = None, **details: Any) -> None:
    exchange = Exchange(details.pop("host", "rpc.example.com"), details.pop("zone", ZONE))
    response = details.pop("response", RESPONSE)
    ended_ns, sent_bytes = details.pop("ended_ns", time.time_ns()), details.pop("sent_bytes", SENT_BYTES)
    options: dict[str, Any] = {
        "ray_id": "00000000000000ab",
        "started_ns": STARTED,
        "cache_status": "dynamic",
        **details,
    }
    for name, value in options.items():
        setattr(exchange, name, value)
    request = request or edge_request()
    request.context = exchange
    log.emit([(request, response, sent_bytes, ended_ns)])


def test_every_column_is_a_field_of_the_dataset() -> None:
    names = {field.name for field in load_dataset(HTTP_REQUESTS).fields} | {"ZoneName"}
    assert set(HTTP_REQUEST_COLUMNS) <= names
    assert len(set(HTTP_REQUEST_COLUMNS)) == len(HTTP_REQUEST_COLUMNS)


def test_the_record_holds_what_the_edge_knows() -> None:
    store = JournalledStore()
    log = store.log()
    request = edge_request(query=b"a=1", user_agent="web3.py/7", referer="https://app.example/x")
    emit(log, request, country="nz", asn=64500, origin_status=200, origin_duration_ms=3)
    (record,) = store.records[HTTP_REQUESTS]
    ended = record.pop("EdgeEndTimestamp")
    assert ended >= STARTED
    assert record.pop("EdgeTimeToFirstByteMs") == (ended - STARTED) // 1_000_000
    body_bytes = len(RESPONSE.body)
    assert record == {
        "RayID": "00000000000000ab",
        "ZoneName": "example.com",
        "ClientIP": "198.51.100.4",
        "ClientSrcPort": 40000,
        "ClientRequestHost": "rpc.example.com",
        "EdgeRequestHost": "rpc.example.com",
        "ClientRequestMethod": "POST",
        "ClientRequestPath": "/v1/mainnet",
        "ClientRequestURI": "/v1/mainnet?a=1",
        "ClientRequestProtocol": "HTTP/1.1",
        "ClientRequestScheme": "http",
        "ClientRequestSource": "eyeball",
        "ClientRequestUserAgent": "web3.py/7",
        "ClientRequestReferer": "https://app.example/x",
        "ClientXRequestedWith": "",
        "ClientRequestBytes": 17,
        "EdgeResponseStatus": 200,
        "EdgeResponseBodyBytes": body_bytes,
        "EdgeResponseBytes": SENT_BYTES,
        "EdgeResponseContentType": "application/json",
        "EdgeStartTimestamp": STARTED,
        "EdgeServerIP": "127.0.0.1",
        "OriginResponseStatus": 200,
        "OriginResponseDurationMs": 3,
        "ClientCountry": "nz",
        "ClientASN": 64500,
        "CacheCacheStatus": "dynamic",
        "WAFAttackScore": 100,  # not scored (edgeplane.waf.attack_scores)
        "WAFSQLiAttackScore": 100,
        "WAFXSSAttackScore": 100,
        "WAFRCEAttackScore": 100,
    }


def test_what_the_edge_does_not_know_is_missing() -> None:
    store = JournalledStore()
    log = store.log()
    emit(log, zone=None)
    (record,) = store.records[HTTP_REQUESTS]
    for name in ("OriginResponseStatus", "OriginResponseDurationMs", "ClientCountry", "ClientASN", "SecurityAction"):
        assert name not in record
    assert record["ZoneName"] == ""


def probe_match() -> Match:
    """A match of a managed rule whose action is ``log`` (the request goes on)."""
    return Match(
        rule_id="r1",
        ruleset_id="s1",
        ref="r1",
        description="probe",
        action="log",
        source="firewallManaged",
        phase="http_request_firewall_managed",
    )


def test_a_firewall_match_sets_the_security_fields_of_its_row_only() -> None:
    store = JournalledStore()
    log = store.log()
    match = probe_match()
    emit(log, ray_id="0000000000000001")
    emit(log, ray_id="0000000000000002", verdict=Verdict(matches=(match,)))
    first, second = store.records[HTTP_REQUESTS]
    assert "SecurityAction" not in first
    assert second["SecurityAction"] == "log"
    assert second["SecurityRuleIDs"] == ["r1"]
    (event,) = store.records["firewall_events"]
    assert event["RayID"] == "0000000000000002"
    assert event["Action"] == "log"


async def test_rows_reach_the_store_in_bulk_once_their_period_is_sealed() -> None:
    store = JournalledStore()
    log = store.log(seal_interval=1.0)  # the margin of a stalled machine between the first row and the checks
    for number in range(5):
        emit(log, ray_id=f"{number:016x}")
    (open_period,) = store.directory.iterdir()  # journalled as they were emitted, the period still open
    assert open_period.suffix == ".journal"
    assert HTTP_REQUESTS not in store.records
    for number in range(5, 8):
        emit(log, ray_id=f"{number:016x}")
    await asyncio.sleep(0)  # the loop runs: nothing is sealed before the interval
    assert sealed_periods(store.directory) == []
    assert HTTP_REQUESTS not in store.records
    await asyncio.sleep(1.0)  # the seal's timer is due before this sleep's: it has run
    assert [record["RayID"] for record in store.records[HTTP_REQUESTS]] == [f"{n:016x}" for n in range(8)]
    assert store.batches == {HTTP_REQUESTS: 1}
    assert list(store.directory.iterdir()) == []  # taken: the file is gone


async def test_max_rows_seals_at_once() -> None:
    store = JournalledStore()
    log = store.log(max_rows=4)
    for number in range(4):
        emit(log, ray_id=f"{number:016x}")
    await asyncio.sleep(0)
    assert len(store.records[HTTP_REQUESTS]) == 4


async def test_flush_seals_what_waits() -> None:
    store = JournalledStore()
    log = store.log()
    emit(log)
    log.flush()
    assert len(store.records[HTTP_REQUESTS]) == 1
    await asyncio.sleep(0)
    log.flush()
    assert len(store.records[HTTP_REQUESTS]) == 1


async def test_rows_go_to_a_real_store_as_one_column_block(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path / "store") as store:
        journal = RequestJournal(tmp_path / "journal")
        log = RequestLog(journal)
        emit(log, country="nz")
        emit(log, ray_id="00000000000000ac")
        log.flush()
        assert JournalIntake({journal.directory: store}).ingest() == 2
        batch = store.read_columns(HTTP_REQUESTS, 0)
        (part,) = batch.parts
        assert part.num_rows == 2  # type: ignore[union-attr]
        lines = [orjson.loads(line) for line in store.read(HTTP_REQUESTS, 0).records]
    assert [line["RayID"] for line in lines] == ["00000000000000ab", "00000000000000ac"]
    assert lines[0]["ClientCountry"] == "nz"
    assert "ClientCountry" not in lines[1]


def test_a_row_no_batch_holds_is_kept_as_a_line(tmp_path: Path) -> None:
    with SegmentedLogStore(tmp_path / "store") as store:
        journal = RequestJournal(tmp_path / "journal")
        emit(RequestLog(journal), edge_request(path="/v1/\udc80"))  # a lone surrogate: no UTF-8 column takes it
        JournalIntake({journal.directory: store}).ingest()
        (line,) = store.read(HTTP_REQUESTS, 0).records
    record = orjson.loads(line)
    assert record["ClientRequestPath"] == "/v1/\\udc80"
    assert record["RayID"] == "00000000000000ab"


class RefusingStore(MemoryLogStore):
    refusing = True

    def commit_columns(self, dataset: str, batches: Any) -> None:
        if self.refusing:
            raise OSError(errno.ENOSPC, "full")
        super().commit_columns(dataset, batches)


def test_a_refusing_store_is_counted_and_the_rows_wait_in_the_journal() -> None:
    refused = RECORDS_REFUSED.labels(HTTP_REQUESTS)
    before = refused._value.get()
    refusing = RefusingStore()
    store = JournalledStore(store=refusing)
    log = store.log()
    emit(log)
    emit(log)
    assert HTTP_REQUESTS not in store.records
    assert refused._value.get() > before
    assert len(sealed_periods(store.directory)) == 2  # kept for the next take
    refusing.refusing = False
    assert [record["RayID"] for record in store.records[HTTP_REQUESTS]] == ["00000000000000ab"] * 2
    assert sealed_periods(store.directory) == []


async def test_the_edge_runtime_seals_waiting_rows_when_it_closes() -> None:
    store = JournalledStore()
    log = store.log()
    runtime = EdgeRuntime(
        pools={},
        gateway=None,  # type: ignore[arg-type]
        server=None,  # type: ignore[arg-type]
        request_log=log,
        locator=ClientLocator(),
    )
    emit(log)
    await asyncio.sleep(0)
    await runtime.close()
    (record,) = store.records[HTTP_REQUESTS]
    assert record["RayID"] == "00000000000000ab"


def test_a_timer_left_by_an_ended_loop_does_not_stop_later_writes() -> None:
    store = JournalledStore()
    log = store.log()

    async def emit_in_a_loop() -> None:
        emit(log)

    asyncio.run(emit_in_a_loop())  # its timer never runs
    emit(log)  # outside a loop: sealed at once, with the row the loop left in the open period
    assert len(store.records[HTTP_REQUESTS]) == 2

    async def emit_and_wait() -> None:
        log.seal_interval = 0.01
        emit(log)
        await asyncio.sleep(0.1)

    asyncio.run(emit_and_wait())
    assert len(store.records[HTTP_REQUESTS]) == 3
