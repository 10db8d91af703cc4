"""Generated records as the edge journals them: each ``http_requests`` record of ``bench/pipeline.py``'s
``edge_records`` turned back into the answer the edge worker gave (an ``EdgeRequest``, its ``Exchange``, the
``EdgeResponse``, the bytes written and when) and committed through ``RequestLog`` into a ``RequestJournal``, in
sealed periods, as an edge worker leaves them for the delivery process's intake (``bench/intake.py``).

Clients: a journal row's shape (``request_rows.Shape``) holds the client's address, so how many distinct clients a
period sees decides how many shape frames it has beside its rows, which the intake and a reader converting the
period pay for. ``clients`` clients (address, country, ASN, user agent, taken from the first records) stand in for
the records' own, each record drawing one: a gateway's clients send many requests a second. With ``clients`` 0
every record keeps its own address (a shape a row, the worst case). Every ``firewall_every``-th answer has a
firewall match (action ``log``): a row kept whole and a ``firewall_events`` record.
"""

from __future__ import annotations

import itertools
import random
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any

from edgeplane.configuration.snapshot import ZoneRoute
from edgeplane.edge.exchange import Exchange
from edgeplane.edge.http_server import Answer, EdgeRequest, EdgeResponse
from edgeplane.edge.request_log import RequestLog
from edgeplane.logs.request_journal import RequestJournal, sealed_periods
from edgeplane.waf.firewall import Match, Verdict

SERVER = ("10.0.0.5", 8080)
RPC_METHODS = ("eth_call", "eth_blockNumber", "eth_getLogs", "eth_getBalance", "eth_chainId")
PROBE = Verdict(
    matches=(
        Match(
            rule_id="bench-probe",
            ruleset_id="bench",
            ref="bench-probe",
            description="a managed rule that logs",
            action="log",
            source="firewallManaged",
            phase="http_request_firewall_managed",
        ),
    )
)
_CLIENT_FIELDS = ("ClientIP", "ClientCountry", "ClientASN", "ClientRequestUserAgent")


def answers(
    records: Iterable[dict[str, Any]],
    zones: Mapping[str, ZoneRoute],
    *,
    clients: int,
    seed: int,
    firewall_every: int,
) -> Iterator[Answer]:
    """The answer of each record (``edge_records``' form; its zone found by name in ``zones``), with a client drawn
    from the first ``clients`` records' (0: its own) and a firewall match every ``firewall_every`` answers (0:
    none)."""
    rng = random.Random(seed)
    pool: list[tuple[Any, ...]] = []
    for number, record in enumerate(records):
        if clients:
            if len(pool) < clients:
                pool.append(tuple(record.get(name) for name in _CLIENT_FIELDS))
            ip, country, asn, agent = pool[rng.randrange(len(pool))]
        else:
            ip, country, asn, agent = (record.get(name) for name in _CLIENT_FIELDS)
        path, method = record["ClientRequestPath"], record["ClientRequestMethod"]
        headers = [(b"host", record["ClientRequestHost"].encode()), (b"user-agent", agent.encode())]
        if record["ClientRequestReferer"]:
            headers.append((b"referer", record["ClientRequestReferer"].encode()))
        request = EdgeRequest(
            method=method,
            path=path,
            query_string=record["ClientRequestURI"][len(path) + 1 :].encode(),
            headers=headers,
            http_version="1.1",
            client=(ip, record["ClientSrcPort"]),
            server=SERVER,
            content_length=record["ClientRequestBytes"],
        )
        exchange = Exchange(record["ClientRequestHost"], zones.get(record["ZoneName"]))
        exchange.ray_id = record["RayID"]
        exchange.started_ns = record["EdgeStartTimestamp"]
        exchange.country = country or ""
        exchange.asn = asn or 0
        exchange.cache_status = "dynamic"
        exchange.origin_status = record.get("OriginResponseStatus")
        exchange.origin_duration_ms = record.get("OriginResponseDurationMs")
        if exchange.origin_status is not None:
            exchange.network = path.removeprefix("/v1/")
            exchange.rpc_method = RPC_METHODS[rng.getrandbits(8) % len(RPC_METHODS)]
            exchange.rpc_requests = 1
            exchange.upstream = "node-1"
        if firewall_every and number % firewall_every == firewall_every - 1:
            exchange.verdict = PROBE
        request.context = exchange
        response = EdgeResponse(record["EdgeResponseStatus"], bytes(record["EdgeResponseBodyBytes"]))
        yield request, response, record["EdgeResponseBytes"], record["EdgeEndTimestamp"]


def write_journal(directory: Path, answered: Iterable[Answer], period_records: int) -> list[int]:
    """Commits ``answered`` through a ``RequestLog`` into a new journal at ``directory``, sealing a period every
    ``period_records`` answers (and earlier when a period's mapping is full, as the edge does); returns the sealed
    periods."""
    log = RequestLog(RequestJournal(directory), max_rows=period_records)
    iterator = iter(answered)
    while chunk := list(itertools.islice(iterator, period_records)):
        log.emit(chunk)  # outside an event loop: sealed at once
    log.close()
    return sealed_periods(directory)
