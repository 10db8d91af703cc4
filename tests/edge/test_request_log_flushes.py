"""A sealed period's rows are converted column by column, each distinct text once: whatever the mix of rows in a
period, each record is the one the row gets when it is journalled alone, and rows no batch holds get the same records
as dictionaries."""

from __future__ import annotations

import asyncio
import struct
from typing import Any

import pyarrow as pa
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from edgeplane.configuration.snapshot import ZoneRoute
from edgeplane.edge import request_log
from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_log import HTTP_REQUEST_COLUMNS
from edgeplane.logs import request_rows
from edgeplane.logs.request_rows import HTTP_REQUESTS, RequestRows
from tests.support.journalled_store import JournalledStore

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="example.com", account_id="a" * 32, plan="enterprise")
STARTED = 1_700_000_000_000_000_000

headers = st.lists(
    st.tuples(st.sampled_from([b"user-agent", b"referer", b"x-requested-with", b"accept"]), st.binary(max_size=6)),
    max_size=4,
)
answers = st.fixed_dictionaries(
    {
        "query": st.sampled_from([b"", b"a=1", b"q=\xe9"]),
        "headers": headers,
        "http_version": st.sampled_from(["1.1", "1.0"]),
        "client": st.sampled_from([None, ("198.51.100.4", 40000), ("2001:db8::1", 1)]),
        "server": st.sampled_from([None, ("127.0.0.1", 8080)]),
        "zone": st.sampled_from([None, ZONE]),
        "status": st.sampled_from([200, 403, 502]),
        "content_type": st.sampled_from([b"application/json", b"text/plain; charset=\xe9"]),
        "elapsed_ns": st.integers(-5_000_000, 5_000_000_000),
        "origin": st.sampled_from([None, (200, 0), (502, 31)]),
        "country": st.sampled_from(["", "nz"]),
        "asn": st.sampled_from([0, 64500]),
        "cache_status": st.sampled_from(["hit", "miss", "unknown"]),
        # network, JSON-RPC method, requests, error code, upstream (as the router sets them from the gateway's answer)
        "rpc": st.sampled_from(
            [("", "", 0, None, ""), ("mainnet", "eth_call", 1, None, "node-a"), ("sepolia", "", 3, -32602, "")]
        ),
    }
)


def answer(number: int, details: dict[str, Any]) -> Answer:
    request = EdgeRequest(
        method="POST",
        path="/v1/mainnet",
        query_string=details["query"],
        headers=[(b"host", b"rpc.example.com"), *details["headers"]],
        http_version=details["http_version"],
        client=details["client"],
        server=details["server"],
        content_length=number,
    )
    response = EdgeResponse(details["status"], b"x" * number, content_type=details["content_type"])
    exchange = Exchange("rpc.example.com", details["zone"])
    exchange.ray_id = f"{number:016x}"
    exchange.started_ns = STARTED + number
    if details["origin"] is not None:
        exchange.origin_status, exchange.origin_duration_ms = details["origin"]
    exchange.country, exchange.asn = details["country"], details["asn"]
    exchange.cache_status = details["cache_status"]
    (exchange.network, exchange.rpc_method, exchange.rpc_requests, exchange.rpc_error_code, exchange.upstream) = (
        details.get("rpc", ("", "", 0, None, ""))
    )
    request.context = exchange
    return request, response, 100 + number, STARTED + number + details["elapsed_ns"]


def flushed_together(answers: list[Answer]) -> list[dict[str, Any]]:
    store = JournalledStore()
    log = store.log(max_rows=len(answers) + 1)

    async def emit_all() -> None:
        log.emit(answers[:1])  # a batch of one, then the rest: as the server tells of them
        log.emit(answers[1:])
        log.flush()

    asyncio.run(emit_all())
    assert store.batches.get(HTTP_REQUESTS, 0) <= 1
    return store.records[HTTP_REQUESTS]


def flushed_alone(each: Answer) -> dict[str, Any]:
    store = JournalledStore()
    store.log().emit([each])  # outside a loop: journalled and sealed at once
    (record,) = store.records[HTTP_REQUESTS]
    return record


@settings(max_examples=150, deadline=None)
@given(st.lists(answers, min_size=1, max_size=8))
def test_a_record_does_not_depend_on_the_rows_flushed_with_it(details: list[dict[str, Any]]) -> None:
    each = [answer(number, one) for number, one in enumerate(details)]
    together = flushed_together(each)
    assert together == [flushed_alone(one) for one in each]
    constants = {"ClientRequestScheme", "ClientRequestSource", "EdgeRequestHost"}
    for record in together:
        assert set(record) <= set(HTTP_REQUEST_COLUMNS) | constants
        assert record["EdgeTimeToFirstByteMs"] >= 0


def test_the_values_of_a_mixed_flush() -> None:
    one = answer(1, {**_PLAIN, "query": b"a=1", "headers": [(b"user-agent", b"web3.py/7")], "country": "nz"})
    two = answer(2, {**_PLAIN, "http_version": "1.0", "server": None, "asn": 64500, "elapsed_ns": -1})
    first, second = flushed_together([one, two])
    assert (first["ClientRequestURI"], second["ClientRequestURI"]) == ("/v1/mainnet?a=1", "/v1/mainnet")
    assert (first["ClientRequestUserAgent"], second["ClientRequestUserAgent"]) == ("web3.py/7", "")
    assert (first["ClientRequestProtocol"], second["ClientRequestProtocol"]) == ("HTTP/1.1", "HTTP/1.0")
    assert (first["EdgeServerIP"], second["EdgeServerIP"]) == ("127.0.0.1", "")
    assert (first.get("ClientCountry"), second.get("ClientCountry")) == ("nz", None)
    assert (first.get("ClientASN"), second.get("ClientASN")) == (None, 64500)
    assert (first["EdgeTimeToFirstByteMs"], second["EdgeTimeToFirstByteMs"]) == (3, 0)


class _Unpackable:
    """Packs no row: every row is kept whole."""

    size = request_rows.ROW_FRAME.size

    def pack(self, *numbers: int) -> bytes:
        raise struct.error("no row fits")

    def pack_into(self, *numbers: Any) -> None:
        raise struct.error("no row fits")


def _no_batch(self: RequestRows) -> None:
    raise pa.ArrowInvalid("refused")


@settings(max_examples=60, deadline=None)
@given(st.lists(answers, min_size=1, max_size=6), st.sampled_from(["no batch", "no columns"]))
def test_rows_no_batch_holds_get_the_same_records(details: list[dict[str, Any]], way: str) -> None:
    """The three forms of a row give the same record: in columns (a batch), from the columns one by one when no
    batch holds them (``RequestRows.records``), and whole (``record_of``, for a row whose numbers do not pack)."""
    each = [answer(number, one) for number, one in enumerate(details)]
    expected = flushed_together(each)
    with pytest.MonkeyPatch.context() as patch:
        if way == "no batch":
            patch.setattr(RequestRows, "batch", _no_batch)
        else:
            patch.setattr(request_log, "_ROW_FRAME", _Unpackable())  # the hot path's
            patch.setattr(request_log, "ROW_PAYLOAD", _Unpackable())  # the slow path's
        assert flushed_together(each) == expected


_PLAIN: dict[str, Any] = {
    "query": b"",
    "headers": [],
    "http_version": "1.1",
    "client": ("198.51.100.4", 40000),
    "server": ("127.0.0.1", 8080),
    "zone": ZONE,
    "status": 200,
    "content_type": b"application/json",
    "elapsed_ns": 3_000_000,
    "origin": None,
    "country": "",
    "asn": 0,
    "cache_status": "hit",
}


@settings(max_examples=60, deadline=None)
@given(st.lists(answers, min_size=1, max_size=6), st.sets(st.integers(0, 5)))
def test_a_row_with_a_number_beyond_64_bits_is_kept_whole(details: list[dict[str, Any]], oversized: set[int]) -> None:
    """A number no 64-bit column holds (a Content-Length of 2**64, say) keeps its row out of the columns, not out of
    the log: its record is the one it gets alone."""
    each = [answer(number, one) for number, one in enumerate(details)]
    for index in oversized & set(range(len(each))):
        each[index][0].content_length = 2**64 + index
    together = sorted(flushed_together(each), key=lambda record: str(record["RayID"]))
    assert together == [flushed_alone(one) for one in each]
    assert [record["ClientRequestBytes"] for record in together] == [one[0].content_length for one in each]
