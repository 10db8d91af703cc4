"""The client's country and ASN: trusted headers first, then MaxMind-format databases, else unknown; never an error
on the request path, a clear one at start for a database that cannot be opened.

The databases are small ``.mmdb`` files written here with mmdb-writer: a Country-style one (IPv6 with the IPv4
space, like GeoLite2-Country) and an IPv4-only ASN one, plus one file holding both kinds of keys.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from maxminddb.types import Record
from mmdb_writer import MmdbU32, MMDBWriter
from netaddr import IPSet
from pydantic import ValidationError

from edgeplane.body_document import BodyDocument
from edgeplane.config import LogSettings
from edgeplane.configuration.snapshot import EdgeSnapshot, SnapshotHolder, ZoneRoute
from edgeplane.edge.client_location import ClientDatabaseError, ClientLocation, ClientLocator, LocationDatabase
from edgeplane.edge.http_server import EdgeRequest
from edgeplane.edge.router import EdgeRouter
from edgeplane.gateway.service import GatewayResponse
from edgeplane.logs.tail import tail_records
from edgeplane.waf.firewall import compile_firewall
from tests.support.anvil import free_port
from tests.support.edgeplane import EdgeplaneProcess
from tests.support.journalled_store import JournalledStore
from tests.support.routing import answer_request, answer_through

COUNTRY_NETWORKS: dict[str, dict[str, Any]] = {
    "127.0.0.0/8": {"country": {"iso_code": "NZ"}},
    "198.51.100.0/24": {"country": {"iso_code": "FR"}, "registered_country": {"iso_code": "DE"}},
    "203.0.113.0/24": {"registered_country": {"iso_code": "JP"}},  # no country: falls back to registered_country
    "192.0.2.0/24": {"continent": {"code": "EU"}},  # a record without any country
    "2001:db8::/32": {"country": {"iso_code": "CH"}},
}
ASN_NETWORKS: dict[str, dict[str, Any]] = {
    "127.0.0.0/8": {"autonomous_system_number": MmdbU32(64500), "autonomous_system_organization": "Loopback"},
    "198.51.100.0/24": {"autonomous_system_number": MmdbU32(64501)},
    "203.0.113.0/24": {"autonomous_system_organization": "no number"},
}


def write_mmdb(path: Path, database_type: str, networks: dict[str, dict[str, Any]], *, ipv6: bool) -> Path:
    writer = MMDBWriter(
        ip_version=6 if ipv6 else 4,
        ipv4_compatible=ipv6,
        database_type=database_type,
        languages=["en"],
        description="edgeplane test",
    )
    for network, record in networks.items():
        writer.insert_network(IPSet([network]), record)
    writer.to_db_file(str(path))
    return path


@dataclass
class Databases:
    country: Path
    asn: Path
    both: Path
    garbage: Path


@pytest.fixture(scope="module")
def databases(tmp_path_factory: pytest.TempPathFactory) -> Databases:
    directory = tmp_path_factory.mktemp("mmdb")
    both = {
        "127.0.0.0/8": {"country": {"iso_code": "AU"}, "autonomous_system_number": MmdbU32(64510)},
        "2001:db8::/32": {"registered_country": {"iso_code": "SE"}, "autonomous_system_number": MmdbU32(64511)},
    }
    garbage = directory / "garbage.mmdb"
    garbage.write_bytes(b"this is not a MaxMind DB file" * 10)
    return Databases(
        country=write_mmdb(directory / "country.mmdb", "GeoLite2-Country", COUNTRY_NETWORKS, ipv6=True),
        asn=write_mmdb(directory / "asn.mmdb", "GeoLite2-ASN", ASN_NETWORKS, ipv6=False),
        both=write_mmdb(directory / "both.mmdb", "Test-Country-ASN", both, ipv6=True),
        garbage=garbage,
    )


@pytest.fixture(scope="module")
def locator(databases: Databases) -> Iterator[ClientLocator]:
    opened = ClientLocator.open(country_database=databases.country, asn_database=databases.asn)
    yield opened
    opened.close()


def request_from(client_ip: str | None, headers: list[tuple[bytes, bytes]] | None = None) -> EdgeRequest:
    return EdgeRequest(
        method="POST",
        path="/v1/mainnet",
        query_string=b"",
        headers=headers or [],
        http_version="1.1",
        client=(client_ip, 40000) if client_ip is not None else None,
        server=("127.0.0.1", 8787),
    )


LOOKUPS = [
    ("127.0.0.1", "nz", 64500),
    ("127.255.0.9", "nz", 64500),
    ("198.51.100.7", "fr", 64501),  # country wins over registered_country
    ("203.0.113.9", "jp", 0),  # registered_country only; an ASN record without the number
    ("192.0.2.1", "", 0),  # a record without a country
    ("8.8.8.8", "", 0),  # in no network
    ("2001:db8::5", "ch", 0),  # IPv6: the ASN database is IPv4-only, so unknown there, not an error
    ("2001:4860::1", "", 0),
    ("::ffff:127.0.0.1", "nz", 64500),  # an IPv4 client seen by a dual-stack listener
    ("not-an-address", "", 0),
    ("", "", 0),
    ("999.1.1.1", "", 0),
    ("127.0.0.1 ", "", 0),
    ("fe80::1%eth0", "", 0),
    ("1.2.3", "", 0),
]


@pytest.mark.parametrize(("client_ip", "country", "asn"), LOOKUPS)
def test_the_databases_answer_by_client_address(locator: ClientLocator, client_ip: str, country: str, asn: int) -> None:
    assert locator.locate(request_from(client_ip)) == (country, asn)
    assert locator.lookup(client_ip) == ClientLocation(country, asn)


HEADERS = [
    # request headers, expected (country, asn); the client is 127.0.0.1, which the databases place in nz/64500
    ([], ("nz", 64500)),
    ([(b"cf-ipcountry", b"US"), (b"x-client-asn", b"13335")], ("us", 13335)),
    ([(b"cf-ipcountry", b" gb ")], ("gb", 64500)),  # each field on its own: the ASN still comes from the database
    ([(b"x-client-asn", b"AS15169")], ("nz", 15169)),
    ([(b"cf-ipcountry", b"T1")], ("t1", 64500)),  # Cloudflare's code for Tor is passed on as sent
    # A value the header cannot mean is as good as no header: the database answers.
    ([(b"cf-ipcountry", b"")], ("nz", 64500)),
    ([(b"cf-ipcountry", b"Germany"), (b"x-client-asn", b"cloudflare")], ("nz", 64500)),
    ([(b"cf-ipcountry", b"\xc3\xa9\xc3\xa9"), (b"x-client-asn", b"-5")], ("nz", 64500)),
    ([(b"x-client-asn", b"99999999999")], ("nz", 64500)),
    ([(b"x-client-asn", b"0")], ("nz", 64500)),
    # Headers that are not the configured ones are not trusted.
    ([(b"x-country", b"US"), (b"x-asn", b"13335")], ("nz", 64500)),
]


@pytest.mark.parametrize(("headers", "expected"), HEADERS)
def test_a_trusted_header_comes_before_the_database(
    databases: Databases, headers: list[tuple[bytes, bytes]], expected: tuple[str, int]
) -> None:
    located = ClientLocator.open(
        country_header="CF-IPCountry",
        asn_header="X-Client-ASN",
        country_database=databases.country,
        asn_database=databases.asn,
    )
    assert located.locate(request_from("127.0.0.1", headers)) == expected
    located.close()


def test_headers_alone_without_databases() -> None:
    located = ClientLocator.open(country_header="cf-ipcountry", asn_header="x-client-asn")
    assert located.databases == ()
    assert located.locate(request_from("127.0.0.1", [(b"cf-ipcountry", b"DE")])) == ("de", 0)
    assert located.locate(request_from("127.0.0.1", [(b"x-client-asn", b"64496")])) == ("", 64496)
    assert located.locate(request_from("127.0.0.1")) == ("", 0)


def test_nothing_configured_means_unknown() -> None:
    located = ClientLocator.open()
    assert located.locate(request_from("127.0.0.1", [(b"cf-ipcountry", b"DE")])) == ("", 0)
    assert located.locate(request_from(None)) == ("", 0)


def test_a_request_without_a_client_address_is_unknown(locator: ClientLocator) -> None:
    assert locator.locate(request_from(None)) == ("", 0)


def test_one_file_named_for_both_serves_both_and_is_opened_once(databases: Databases) -> None:
    located = ClientLocator.open(country_database=databases.both, asn_database=databases.both)
    assert located.locate(request_from("127.0.0.1")) == ("au", 64510)
    assert located.locate(request_from("2001:db8::1")) == ("se", 64511)
    assert located.country_database is located.asn_database
    [summary] = located.databases
    assert summary.path == str(databases.both)
    assert summary.serves == ("country", "asn")
    assert summary.database_type == "Test-Country-ASN"
    assert summary.ip_version == 6
    assert abs(summary.build_epoch - time.time()) < 24 * 3600
    located.close()


def test_a_summary_per_database(locator: ClientLocator, databases: Databases) -> None:
    assert [(s.path, s.serves, s.database_type, s.ip_version) for s in locator.databases] == [
        (str(databases.country), ("country",), "GeoLite2-Country", 6),
        (str(databases.asn), ("asn",), "GeoLite2-ASN", 4),
    ]


def test_only_a_country_database(databases: Databases) -> None:
    located = ClientLocator.open(country_database=databases.country)
    assert located.locate(request_from("198.51.100.7")) == ("fr", 0)
    located.close()


def test_a_database_that_cannot_be_opened_is_a_start_up_error(databases: Databases, tmp_path: Path) -> None:
    cases = [
        ({"country_database": tmp_path / "missing.mmdb"}, "logs.client_country_database: no such file"),
        ({"asn_database": tmp_path / "missing.mmdb"}, "logs.client_asn_database: no such file"),
        ({"country_database": databases.garbage}, "is not a MaxMind DB file"),
        ({"asn_database": tmp_path}, "logs.client_asn_database: .* is not a MaxMind DB file"),
        # The country database opens, then the ASN one fails: still an error (and the first is closed).
        ({"country_database": databases.country, "asn_database": databases.garbage}, "logs.client_asn_database"),
    ]
    for options, message in cases:
        with pytest.raises(ClientDatabaseError, match=message) as raised:
            ClientLocator.open(**options)  # type: ignore[arg-type]
        assert isinstance(raised.value, OSError)
        path = str(next(iter(options.values())) if len(options) == 1 else databases.garbage)
        assert path in str(raised.value)


@dataclass
class CountingDatabase:
    """A real reader that counts the lookups reaching it."""

    reader: LocationDatabase
    calls: list[str] = field(default_factory=list)

    def get(self, ip_address: str | IPv4Address | IPv6Address) -> Record | None:
        self.calls.append(str(ip_address))
        return self.reader.get(ip_address)

    def close(self) -> None:
        self.reader.close()


def counting(databases: Databases, cache_size: int) -> tuple[ClientLocator, CountingDatabase, CountingDatabase]:
    opened = ClientLocator.open(country_database=databases.country, asn_database=databases.asn)
    assert opened.country_database is not None
    assert opened.asn_database is not None
    country, asn = CountingDatabase(opened.country_database), CountingDatabase(opened.asn_database)
    return ClientLocator(country_database=country, asn_database=asn, cache_size=cache_size), country, asn


def test_repeated_clients_are_looked_up_once(databases: Databases) -> None:
    located, country, asn = counting(databases, cache_size=16)
    for _ in range(100):
        assert located.locate(request_from("127.0.0.1")) == ("nz", 64500)
        assert located.locate(request_from("198.51.100.7")) == ("fr", 64501)
    assert sorted(country.calls) == sorted(asn.calls) == ["127.0.0.1", "198.51.100.7"]
    located.close()


def test_the_cache_is_bounded(databases: Databases) -> None:
    located, country, _ = counting(databases, cache_size=2)
    for client in ("127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.1"):
        assert located.locate(request_from(client)) == ("nz", 64500)
    # The first client was pushed out by the third, so it is looked up again.
    assert country.calls == ["127.0.0.1", "127.0.0.2", "127.0.0.3", "127.0.0.1"]
    located.close()


def test_headers_that_answer_both_fields_skip_the_databases(databases: Databases) -> None:
    located, country, asn = counting(databases, cache_size=16)
    located.country_header, located.asn_header = b"cf-ipcountry", b"x-client-asn"
    headers = [(b"cf-ipcountry", b"US"), (b"x-client-asn", b"13335")]
    assert located.locate(request_from("127.0.0.1", headers)) == ("us", 13335)
    assert country.calls == asn.calls == []
    located.close()


@settings(max_examples=300, deadline=None)
@given(client_ip=st.one_of(st.text(max_size=60), st.ip_addresses().map(str)))
def test_any_client_address_is_answered_without_an_error(locator: ClientLocator, client_ip: str) -> None:
    country, asn = locator.locate(request_from(client_ip))
    assert country == "" or (len(country) == 2 and country.islower())
    assert asn >= 0


@settings(max_examples=200, deadline=None)
@given(country=st.binary(max_size=12), asn=st.binary(max_size=24))
def test_any_header_value_is_answered_without_an_error(databases: Databases, country: bytes, asn: bytes) -> None:
    located = ClientLocator(country_header=b"cf-ipcountry", asn_header=b"x-client-asn")
    found = located.locate(request_from("127.0.0.1", [(b"cf-ipcountry", country), (b"x-client-asn", asn)]))
    assert found.country == "" or len(found.country) == 2
    assert 0 <= found.asn <= 0xFFFFFFFF


# Through the router: the firewall's ip.src.country / ip.src.asnum and the http_requests record.

ZONE = ZoneRoute(zone_id="z" * 32, zone_name="localhost", account_id="a" * 32, plan="enterprise")
CALL = b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'


class FakeGateway:
    pools = {"mainnet": object()}

    def respond(self, network: str, body: BodyDocument) -> GatewayResponse:
        return GatewayResponse(200, b'{"jsonrpc":"2.0","id":1,"result":"0x1"}')


def json_request(client_ip: str) -> EdgeRequest:
    return EdgeRequest(
        method="POST",
        path="/v1/mainnet",
        raw_path="/v1/mainnet",
        query_string=b"",
        headers=[(b"host", b"localhost"), (b"content-type", b"application/json")],
        http_version="1.1",
        client=(client_ip, 40000),
        server=("127.0.0.1", 8787),
        content_length=len(CALL),
        body=CALL,
    )


def routed(locator: ClientLocator, expression: str) -> tuple[EdgeRouter, JournalledStore]:
    rule = {"action": "block", "expression": expression, "enabled": True}
    firewall = compile_firewall({"http_request_firewall_custom": [rule]})
    snapshot = EdgeSnapshot(web3_hostnames={"localhost": ZONE}, firewalls={ZONE.zone_id: firewall})
    store = JournalledStore()
    router = EdgeRouter(FakeGateway(), SnapshotHolder(snapshot), store.log(), locator)  # type: ignore[arg-type]
    return router, store


@pytest.mark.parametrize(
    ("expression", "client_ip", "status"),
    [
        ('ip.src.country eq "nz"', "127.0.0.1", 403),
        ('ip.src.country eq "nz"', "198.51.100.7", 200),
        ("ip.src.asnum eq 64501", "198.51.100.7", 403),
        ("ip.src.asnum eq 64501", "127.0.0.1", 200),
        ('ip.src.country in {"fr" "de"} and ip.src.asnum eq 64501', "198.51.100.7", 403),
    ],
)
async def test_the_firewall_sees_the_database_answer(
    locator: ClientLocator, expression: str, client_ip: str, status: int
) -> None:
    router, _ = routed(locator, expression)
    response = await answer_through(router, json_request(client_ip))
    assert response.status == status


async def test_the_request_record_carries_country_and_asn(locator: ClientLocator) -> None:
    router, store = routed(locator, 'ip.src.country eq "zz"')
    await answer_through(router, json_request("127.0.0.1"))
    await answer_through(router, json_request("8.8.8.8"))
    head_only = EdgeRequest(
        method="GET",
        path="/v1/mainnet",
        query_string=b"",
        headers=[(b"host", b"localhost")],
        http_version="1.1",
        client=("198.51.100.7", 1),
        server=None,
    )
    refused = await answer_request(router, head_only)  # refused after the zone's firewall has run
    assert refused.status == 405
    router.request_log.flush()  # type: ignore[union-attr]
    known, unknown, head_refused = store.records["http_requests"]
    assert (known["ClientCountry"], known["ClientASN"]) == ("nz", 64500)
    assert "ClientCountry" not in unknown
    assert "ClientASN" not in unknown
    assert (head_refused["ClientCountry"], head_refused["ClientASN"]) == ("fr", 64501)


# Through `edgeplane serve`.


def serve_config(tmp_path: Path, databases: Databases, upstream_port: int) -> Path:
    config = tmp_path / "edgeplane.toml"
    config.write_text(
        "edge_workers = 1\n"
        f'[networks.mainnet]\nupstreams = [{{ url = "http://127.0.0.1:{upstream_port}" }}]\n'
        f'[logs]\nclient_country_database = "{databases.country}"\nclient_asn_database = "{databases.asn}"\n',
        encoding="utf-8",
    )
    return config


@pytest.mark.e2e
def test_serve_puts_country_and_asn_in_records_and_the_firewall_sees_them(databases: Databases, tmp_path: Path) -> None:
    import httpx

    data_dir = tmp_path / "data"
    config = serve_config(tmp_path, databases, free_port())
    with EdgeplaneProcess(data_dir, extra_args=("--config", str(config))) as service:
        assert "client location database opened" in service.log()
        first = httpx.post(service.rpc_url(), content=CALL, headers={"content-type": "application/json"}, timeout=30)
        assert first.status_code != 403
        rule = {"action": "block", "expression": 'ip.src.country eq "nz" and ip.src.asnum eq 64500'}
        service.v4(
            "PUT", "/zones/{zone}/rulesets/phases/http_request_firewall_custom/entrypoint", json={"rules": [rule]}
        )
        deadline = time.monotonic() + 10
        while True:
            answer = httpx.post(
                service.rpc_url(), content=CALL, headers={"content-type": "application/json"}, timeout=30
            )
            if answer.status_code == 403 or time.monotonic() > deadline:
                break
            time.sleep(0.1)
        assert answer.status_code == 403
        records: list[dict[str, Any]] = []
        while len(records) < 2 and time.monotonic() < deadline + 5:
            records = list(tail_records(data_dir, "http_requests", from_start=True, follow=False))
            time.sleep(0.1)
    assert records, "no http_requests record was written"
    assert {(r.get("ClientCountry"), r.get("ClientASN")) for r in records} == {("nz", 64500)}


@pytest.mark.e2e
@pytest.mark.parametrize(
    ("database", "status", "message"),
    [
        # A missing file is a settings error, found before anything starts.
        ("missing", 2, "logs.client_asn_database: Value error, no such file: {path}"),
        # A file that is not a MaxMind DB is found when the edge opens it.
        ("garbage", 1, "edgeplane: logs.client_asn_database: {path} is not a MaxMind DB file"),
    ],
)
def test_serve_refuses_to_start_with_a_database_it_cannot_open(
    databases: Databases, tmp_path: Path, database: str, status: int, message: str
) -> None:
    path = tmp_path / "nowhere.mmdb" if database == "missing" else databases.garbage
    config = serve_config(tmp_path, databases, free_port())
    config.write_text(config.read_text(encoding="utf-8").replace(str(databases.asn), str(path)), encoding="utf-8")
    command = [sys.executable, "-m", "edgeplane", "serve", "--config", str(config), "--data-dir", str(tmp_path / "d")]
    command += ["--edge-port", str(free_port()), "--api-port", str(free_port())]
    env = {name: value for name, value in os.environ.items() if not name.startswith("EDGEPLANE_")}
    finished = subprocess.run(command, capture_output=True, timeout=60, check=False, env=env)
    assert finished.returncode == status
    assert message.format(path=path) in finished.stderr.decode()
    assert "Traceback" not in finished.stderr.decode()


def test_a_missing_database_is_a_settings_error(tmp_path: Path, databases: Databases) -> None:
    with pytest.raises(ValidationError, match="no such file"):
        LogSettings(client_country_database=tmp_path / "missing.mmdb")
    assert LogSettings(client_asn_database=databases.asn).client_asn_database == databases.asn
