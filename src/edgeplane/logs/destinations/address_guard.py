"""Which addresses a Logpush destination may reach: the public Internet, and the networks the operator allows.

A tenant chooses a destination's host, and edgeplane connects to it from inside the operator's network; so an
address in one of ``SPECIAL_NETWORKS`` (loopback, private, shared CGNAT, link-local, multicast, unspecified,
documentation, benchmarking and reserved ranges of IPv4 and IPv6) is refused unless it lies in one of the operator's
``allowed_networks`` (the ``logs.destinations.allowed_networks`` setting). ``METADATA_ADDRESSES`` (cloud instance
metadata services) are refused even then. An IPv6 address that carries an IPv4 address (IPv4-mapped
``::ffff:0:0/96``, NAT64 ``64:ff9b::/96``, 6to4 ``2002::/16``) is judged as the IPv4 address it carries.

A host written as an address, in any form a resolver accepts (``host_address``), and the names ``localhost`` and
``*.localhost`` (loopback by RFC 6761) are judged without DNS (``check_host``), when a job is created and again
before each connection. Every other name is resolved where the connection is made (``resolve``), and refused when
any of its answers is refused; the HTTPS and S3 destinations then connect only to an address that was checked, so a
DNS answer that changes between check and connection (DNS rebinding) gains nothing.

Refusals of a resolved name say only that the name does not resolve to an address this edgeplane may send to: the
same words as for a name that does not resolve at all, so that the error text of a job is no oracle for the
operator's internal DNS.
"""

from __future__ import annotations

import asyncio
import ipaddress
import socket
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Final, TypeAlias

from edgeplane.logs.destination_conf import host_address
from edgeplane.logs.errors import DestinationError

IPAddress: TypeAlias = ipaddress.IPv4Address | ipaddress.IPv6Address
IPNetwork: TypeAlias = ipaddress.IPv4Network | ipaddress.IPv6Network


def _networks(table: tuple[tuple[str, str], ...]) -> tuple[tuple[IPNetwork, str], ...]:
    return tuple((ipaddress.ip_network(network), kind) for network, kind in table)


# (network, what it is): the IANA special-purpose address registries, as they concern an outbound connection.
SPECIAL_NETWORKS: Final = _networks(
    (
        ("0.0.0.0/8", "unspecified"),
        ("10.0.0.0/8", "private"),
        ("100.64.0.0/10", "shared (CGNAT)"),
        ("127.0.0.0/8", "loopback"),
        ("169.254.0.0/16", "link-local"),
        ("172.16.0.0/12", "private"),
        ("192.0.0.0/24", "reserved"),
        ("192.0.2.0/24", "documentation"),
        ("192.88.99.0/24", "reserved"),
        ("192.168.0.0/16", "private"),
        ("198.18.0.0/15", "reserved"),
        ("198.51.100.0/24", "documentation"),
        ("203.0.113.0/24", "documentation"),
        ("224.0.0.0/4", "multicast"),
        ("240.0.0.0/4", "reserved"),
        ("::/128", "unspecified"),
        ("::1/128", "loopback"),
        ("::/8", "reserved"),
        ("100::/64", "reserved"),
        ("2001::/23", "reserved"),
        ("2001:db8::/32", "documentation"),
        ("3fff::/20", "documentation"),
        ("5f00::/16", "reserved"),
        ("fc00::/7", "private"),
        ("fe80::/10", "link-local"),
        ("fec0::/10", "private"),
        ("ff00::/8", "multicast"),
    )
)
METADATA_ADDRESSES: Final = frozenset(
    ipaddress.ip_address(address)
    for address in (
        "169.254.169.254",  # AWS, GCP, Azure, OpenStack, DigitalOcean, Hetzner, Oracle
        "169.254.170.2",  # ECS task metadata
        "169.254.170.23",  # EKS pod identity
        "100.100.100.200",  # Alibaba Cloud
        "192.0.0.192",  # Oracle Cloud (legacy)
        "fd00:ec2::254",  # AWS over IPv6
        "fd00:ec2::23",  # EKS pod identity over IPv6
    )
)
_NAT64: Final = ipaddress.ip_network("64:ff9b::/96")
_LOOPBACK_NAME: Final = "localhost"
REFUSED_NAME: Final = "does not resolve to an address this edgeplane may send logs to"


class ForbiddenAddress(OSError):
    """A host that does not resolve to an address the policy allows (or does not resolve at all)."""


def carried_ipv4(address: IPAddress) -> IPAddress:
    """The IPv4 address an IPv4-mapped, NAT64 or 6to4 IPv6 address carries; ``address`` itself otherwise."""
    if isinstance(address, ipaddress.IPv4Address):
        return address
    if address.ipv4_mapped is not None:
        return address.ipv4_mapped
    if address in _NAT64:
        return ipaddress.IPv4Address(int(address) & 0xFFFFFFFF)
    if address.sixtofour is not None:
        return address.sixtofour
    return address


def special_kind(address: IPAddress) -> str | None:
    """What ``address`` is when it is not a public unicast address (``"loopback"``, ``"private"``, ...); ``None`` for
    a public one. An address that carries an IPv4 address is what that IPv4 address is."""
    judged = carried_ipv4(address)
    for network, kind in SPECIAL_NETWORKS:
        if judged.version == network.version and judged in network:
            return kind
    return None


@dataclass(frozen=True, slots=True)
class AddressPolicy:
    """The addresses destinations may reach: public ones, and those in ``allowed_networks``; never a metadata
    address."""

    allowed_networks: tuple[IPNetwork, ...] = ()

    def refusal(self, address: IPAddress) -> str | None:
        """Why ``address`` may not be reached (``"a loopback address"``), or ``None`` when it may."""
        judged = carried_ipv4(address)
        if address in METADATA_ADDRESSES or judged in METADATA_ADDRESSES:
            return "a cloud metadata address"
        kind = special_kind(address)
        if kind is None or self._allows(address) or self._allows(judged):
            return None
        return f"{'an' if kind[0] in 'aeiou' else 'a'} {kind} address"

    def check_host(self, host: str) -> None:
        """Raises ``DestinationError`` when ``host`` (as written in a conf) is an address, or a loopback name, that
        may not be reached. Other names pass: they are judged when resolved."""
        address = host_address(host)
        if address is None:
            name = host.strip("[]").rstrip(".").lower()
            if name == _LOOPBACK_NAME or name.endswith("." + _LOOPBACK_NAME):
                address = ipaddress.IPv4Address("127.0.0.1")
            else:
                return
        reason = self.refusal(address)
        if reason is not None:
            raise DestinationError(
                f"destination host {host} is {reason}; this edgeplane sends logs to loopback, private, link-local "
                "and reserved networks only when its operator allows them (logs.destinations.allowed_networks), "
                "and never to metadata services"
            )

    def resolve_blocking(self, host: str, port: int, family: int = socket.AF_UNSPEC) -> list[tuple[int, str]]:
        """``host``'s addresses as ``(family, address)`` pairs, each of them allowed; raises ``DestinationError``
        for a host ``check_host`` refuses, and ``ForbiddenAddress`` when the name does not resolve or any answer is
        refused (one message for both)."""
        self.check_host(host)
        try:
            infos = socket.getaddrinfo(host.strip("[]"), port, family=family, type=socket.SOCK_STREAM)
        except OSError:
            raise ForbiddenAddress(f"destination host {host} {REFUSED_NAME}") from None
        return self._judge(host, infos)

    async def resolve(self, host: str, port: int, family: int = socket.AF_UNSPEC) -> list[tuple[int, str]]:
        """``resolve_blocking`` on the running loop's resolver."""
        self.check_host(host)
        loop = asyncio.get_running_loop()
        try:
            infos = await loop.getaddrinfo(host.strip("[]"), port, family=family, type=socket.SOCK_STREAM)
        except OSError:
            raise ForbiddenAddress(f"destination host {host} {REFUSED_NAME}") from None
        return self._judge(host, infos)

    def _judge(self, host: str, infos: Sequence[tuple[Any, Any, Any, Any, tuple[Any, ...]]]) -> list[tuple[int, str]]:
        answers: list[tuple[int, str]] = []
        for address_family, _, _, _, sockaddr in infos:
            text = str(sockaddr[0])
            address = ipaddress.ip_address(text.split("%", 1)[0])
            if self.refusal(address) is not None:
                raise ForbiddenAddress(f"destination host {host} {REFUSED_NAME}")
            answers.append((int(address_family), text))
        if not answers:
            raise ForbiddenAddress(f"destination host {host} {REFUSED_NAME}")
        return answers

    def _allows(self, address: IPAddress) -> bool:
        return any(address.version == network.version and address in network for network in self.allowed_networks)
