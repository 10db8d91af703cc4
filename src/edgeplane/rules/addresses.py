"""IP addresses as Rules-language values: one ``int`` key per address, so that ``eq`` is an integer comparison and
a CIDR is one closed integer range (two integer comparisons), with no object allocated per request.

An IPv4 address is its 32-bit number; an IPv6 address is its 128-bit number plus ``IPV6_OFFSET``, so the two
families never overlap (wirefilter keeps them distinct: ``::ffff:10.0.0.1`` is not in ``10.0.0.0/8``).
"""

from __future__ import annotations

import ipaddress
import socket

IPV6_OFFSET = 1 << 128


class AddressError(ValueError):
    """The text is not an IP address or network of the Rules language."""


def address_key(text: str) -> int:
    """The key of one IPv4 or IPv6 address. Raises ``AddressError`` for anything else (a CIDR included)."""
    try:
        address = ipaddress.ip_address(text)
    except ValueError as error:
        raise AddressError(f"invalid IP address {text!r}") from error
    return _key(address)


def network_range(text: str) -> tuple[int, int]:
    """The first and last key of a CIDR (``10.0.0.0/8``, ``2001:db8::/32``). Raises ``AddressError`` if ``text`` is
    not a valid CIDR, host bits set included (``10.0.0.1/8``), as wirefilter does."""
    address, slash, prefix = text.partition("/")
    if ":" not in address and address.count(".") < 3:
        # wirefilter's shorthand in sets: "10" is 10.0.0.0/8, "192.168" is 192.168.0.0/16 (or the prefix given).
        parts = address.split(".")
        text = ".".join(parts + ["0"] * (4 - len(parts))) + "/" + (prefix if slash else str(8 * len(parts)))
    try:
        network = ipaddress.ip_network(text, strict=True)
    except ValueError as error:
        raise AddressError(f"invalid CIDR {text!r}") from error
    return _key(network.network_address), _key(network.broadcast_address)


def key_text(key: int) -> str:
    """The usual text of the address with key ``key`` (``to_string``, error messages)."""
    if key >= IPV6_OFFSET:
        return str(ipaddress.IPv6Address(key - IPV6_OFFSET))
    return str(ipaddress.IPv4Address(key))


def client_key(text: str) -> int:
    """The key of a client address as the edge reports it; 0 (``0.0.0.0``) when it is not an address (a Unix
    socket, a test client), so that a request always has an ``ip.src``."""
    try:
        # inet_pton is some ten times faster than ipaddress for the address every request carries.
        return int.from_bytes(socket.inet_pton(socket.AF_INET, text), "big")
    except OSError:
        pass
    try:
        return _key(ipaddress.ip_address(text.strip("[]")))
    except ValueError:
        return 0


def _key(address: ipaddress.IPv4Address | ipaddress.IPv6Address) -> int:
    if address.version == 4:
        return int(address)
    return int(address) + IPV6_OFFSET
