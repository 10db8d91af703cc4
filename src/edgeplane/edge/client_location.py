"""Where a client is: its country (ISO 3166 alpha-2, lower case) and its network's ASN, for the firewall's
``ip.src.country`` / ``ip.src.asnum`` and the ``ClientCountry`` / ``ClientASN`` log fields.

Two sources, per field and in this order: a trusted request header (set by a load balancer or CDN in front) when one
is configured and the request carries a usable value; else a MaxMind-format database (``.mmdb``) when one is
configured: a GeoIP2/GeoLite2 Country or City database for the country (``country.iso_code``, else
``registered_country.iso_code``), a GeoLite2 ASN database for ``autonomous_system_number``. One file may serve both
when it holds both; naming the same path twice opens it once. Unknown is ``""`` and ``0``.

Databases are opened once, at start, memory-mapped; a database that cannot be opened is a start-up error
(``ClientDatabaseError``). Lookups are cached per client address, since the same clients come back. On the request
path nothing raises: a malformed address, an IPv6 client and an IPv4-only database, or a record without the key all
mean unknown.
"""

from __future__ import annotations

import functools
import ipaddress
from collections.abc import Sequence
from dataclasses import dataclass
from ipaddress import IPv4Address, IPv6Address
from pathlib import Path
from typing import NamedTuple, Protocol

import maxminddb
from maxminddb import InvalidDatabaseError
from maxminddb.types import Record

from edgeplane.edge.http_server import EdgeRequest

DEFAULT_CACHE_SIZE = 65536
_LARGEST_ASN = 0xFFFFFFFF  # ASNs are 32-bit numbers


class ClientDatabaseError(OSError):
    """A configured client location database that cannot be opened or is not a MaxMind DB file. An ``OSError`` so
    that ``edgeplane serve`` reports it like any other start-up failure of a file: its message, exit status 1."""


class ClientLocation(NamedTuple):
    """A client's country (ISO 3166 alpha-2, lower case; ``""`` when unknown) and ASN (0 when unknown)."""

    country: str
    asn: int


UNKNOWN = ClientLocation("", 0)


class LocationDatabase(Protocol):
    """What the locator needs of an open MaxMind DB reader."""

    def get(self, ip_address: str | IPv4Address | IPv6Address) -> Record | None:
        """The record of the network holding ``ip_address``, or None; ``ValueError`` for an address the database
        cannot hold."""

    def close(self) -> None:
        """Releases the file."""


@dataclass(frozen=True, slots=True)
class DatabaseSummary:
    """What a start-up log line says of an opened database."""

    path: str
    serves: tuple[str, ...]  # "country", "asn"
    database_type: str
    build_epoch: int
    ip_version: int


class ClientLocator:
    """Finds a request's client country and ASN (see the module docstring for the sources and their order)."""

    def __init__(
        self,
        *,
        country_header: bytes | None = None,
        asn_header: bytes | None = None,
        country_database: LocationDatabase | None = None,
        asn_database: LocationDatabase | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
        databases: Sequence[DatabaseSummary] = (),
    ) -> None:
        """``*_header`` are lower-case header names; the databases are open readers (closed by ``close``)."""
        self.country_header = country_header
        self.asn_header = asn_header
        self.country_database = country_database
        self.asn_database = asn_database
        self.databases = tuple(databases)
        self._lookup = functools.lru_cache(maxsize=cache_size)(self._look_up)

    @classmethod
    def open(
        cls,
        *,
        country_header: str | None = None,
        asn_header: str | None = None,
        country_database: Path | None = None,
        asn_database: Path | None = None,
        cache_size: int = DEFAULT_CACHE_SIZE,
    ) -> ClientLocator:
        """The locator of these settings, its databases opened (the same path named twice is opened once).

        Raises ``ClientDatabaseError`` naming the setting and the file when a database is missing, unreadable or not
        a MaxMind DB file.
        """
        opened: dict[Path, tuple[maxminddb.Reader, list[str]]] = {}
        wanted = (
            ("country", "logs.client_country_database", country_database),
            ("asn", "logs.client_asn_database", asn_database),
        )
        try:
            for field, setting, path in wanted:
                if path is None:
                    continue
                if path not in opened:
                    opened[path] = (_open_database(setting, path), [])
                opened[path][1].append(field)
        except ClientDatabaseError:
            for reader, _fields in opened.values():
                reader.close()
            raise
        summaries = [_summary(path, reader, fields) for path, (reader, fields) in opened.items()]
        return cls(
            country_header=_header_name(country_header),
            asn_header=_header_name(asn_header),
            country_database=opened[country_database][0] if country_database is not None else None,
            asn_database=opened[asn_database][0] if asn_database is not None else None,
            cache_size=cache_size,
            databases=summaries,
        )

    def locate(self, request: EdgeRequest) -> ClientLocation:
        """The client's country and ASN: each from its trusted header when configured and usable on the request,
        else from its database by the client's address, else unknown. Never raises."""
        country = _country(request.header(self.country_header)) if self.country_header is not None else ""
        asn = _asn(request.header(self.asn_header)) if self.asn_header is not None else 0
        if country and asn:
            return ClientLocation(country, asn)
        wants_country = not country and self.country_database is not None
        wants_asn = not asn and self.asn_database is not None
        if (wants_country or wants_asn) and request.client is not None:
            found = self._lookup(request.client[0])
            return ClientLocation(country or found.country, asn or found.asn)
        return ClientLocation(country, asn) if country or asn else UNKNOWN

    def lookup(self, client_ip: str) -> ClientLocation:
        """The databases' answer for one address (cached); unknown for a malformed address or one the databases do
        not cover. Never raises."""
        return self._lookup(client_ip)

    def close(self) -> None:
        """Releases the databases' files."""
        for database in {id(db): db for db in (self.country_database, self.asn_database) if db is not None}.values():
            database.close()
        self._lookup.cache_clear()

    def _look_up(self, client_ip: str) -> ClientLocation:
        try:
            address: IPv4Address | IPv6Address = ipaddress.ip_address(client_ip)
        except ValueError:
            return UNKNOWN
        # A dual-stack listener sees IPv4 clients as ::ffff:a.b.c.d; databases file them under their IPv4 address.
        if isinstance(address, IPv6Address) and address.ipv4_mapped is not None:
            address = address.ipv4_mapped
        country_record = _record(self.country_database, address)
        if self.asn_database is self.country_database:
            asn_record = country_record
        else:
            asn_record = _record(self.asn_database, address)
        return ClientLocation(_record_country(country_record), _record_asn(asn_record))


def _open_database(setting: str, path: Path) -> maxminddb.Reader:
    try:
        return maxminddb.open_database(path, maxminddb.MODE_AUTO)
    except FileNotFoundError:
        raise ClientDatabaseError(f"{setting}: no such file: {path}") from None
    except OSError as exc:
        raise ClientDatabaseError(f"{setting}: cannot read {path}: {exc.strerror or exc}") from None
    except (InvalidDatabaseError, ValueError):
        # The reader's own message repeats the path and adds nothing an operator can act on.
        raise ClientDatabaseError(f"{setting}: {path} is not a MaxMind DB file") from None


def _summary(path: Path, reader: maxminddb.Reader, fields: list[str]) -> DatabaseSummary:
    metadata = reader.metadata()
    return DatabaseSummary(
        path=str(path),
        serves=tuple(fields),
        database_type=metadata.database_type,
        build_epoch=metadata.build_epoch,
        ip_version=metadata.ip_version,
    )


def _record(database: LocationDatabase | None, address: IPv4Address | IPv6Address) -> Record | None:
    if database is None:
        return None
    try:
        return database.get(address)
    except (ValueError, InvalidDatabaseError):
        # An IPv6 client and an IPv4-only database, or a damaged record: unknown, never a failed request.
        return None


def _record_country(record: Record | None) -> str:
    if not isinstance(record, dict):
        return ""
    for key in ("country", "registered_country"):
        entry = record.get(key)
        if isinstance(entry, dict):
            code = entry.get("iso_code")
            if isinstance(code, str) and len(code) == 2 and code.isascii():
                return code.lower()
    return ""


def _record_asn(record: Record | None) -> int:
    if not isinstance(record, dict):
        return 0
    number = record.get("autonomous_system_number")
    return number if isinstance(number, int) and not isinstance(number, bool) and number > 0 else 0


def _country(value: bytes | None) -> str:
    """A trusted header's country code, or "" when absent or not two letters or digits (Cloudflare's ``T1``)."""
    if not value:
        return ""
    code = value.strip()
    return code.decode("ascii").lower() if len(code) == 2 and code.isalnum() else ""


def _asn(value: bytes | None) -> int:
    """A trusted header's ASN (``13335`` or ``AS13335``), or 0 when absent or not a number."""
    if not value:
        return 0
    digits = value.strip()
    if digits[:2].lower() == b"as":
        digits = digits[2:]
    number = int(digits) if digits.isdigit() and len(digits) <= 10 else 0
    return number if number <= _LARGEST_ASN else 0


def _header_name(name: str | None) -> bytes | None:
    return name.strip().lower().encode("latin-1") if name and name.strip() else None
