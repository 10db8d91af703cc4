"""The connect-time half of the metadata-address rule.

``destination_conf`` refuses a host that *is* a link-local or cloud-metadata address; it does not resolve names.
Here the name is resolved when a connection is about to be made, and a name with any such address among its
answers (IPv4 169.254.0.0/16, IPv6 fe80::/10 and fd00:ec2::254, also IPv4-mapped) is refused, so a DNS record
cannot point a job at the instance metadata service. The HTTPS destination connects to exactly the addresses
checked here; the S3 destination checks before each upload and its client resolves again (a window a DNS
rebinding attacker would have to hit within one upload).
"""

from __future__ import annotations

import asyncio
import socket

from edgeplane.logs.destination_conf import _refuse_metadata_host
from edgeplane.logs.destinations.errors import DestinationRejected, DestinationUnavailable
from edgeplane.logs.errors import DestinationError


class ForbiddenAddress(OSError):
    """A host name that resolves to a link-local or metadata address."""


def check_address(host: str, address: str) -> None:
    """Raise ``ForbiddenAddress`` when ``address`` (an IP literal that ``host`` resolved to) is link-local or a
    cloud-metadata address."""
    try:
        _refuse_metadata_host(address)
    except DestinationError:
        raise ForbiddenAddress(
            f"destination host {host} resolves to {address}, a link-local or metadata address; refused"
        ) from None


async def resolve_allowed(host: str, port: int, family: int = socket.AF_UNSPEC) -> list[tuple[int, str]]:
    """``host``'s addresses as ``(family, address)`` pairs; raises ``ForbiddenAddress`` when any of them is
    link-local or a metadata address, and ``OSError`` (``socket.gaierror``) when the name does not resolve."""
    infos = await asyncio.get_running_loop().getaddrinfo(host, port, family=family, type=socket.SOCK_STREAM)
    answers: list[tuple[int, str]] = []
    for address_family, _, _, _, sockaddr in infos:
        address = str(sockaddr[0])
        check_address(host, address)
        answers.append((int(address_family), address))
    return answers


async def guard_host(host: str, port: int) -> None:
    """Resolve ``host`` and refuse it as ``resolve_allowed`` does, as destination failures: ``DestinationRejected``
    for a forbidden address, ``DestinationUnavailable`` for a name that does not resolve now."""
    try:
        await resolve_allowed(host, port)
    except ForbiddenAddress as error:
        raise DestinationRejected(str(error)) from None
    except OSError as error:
        raise DestinationUnavailable(f"destination host {host} does not resolve: {error}") from None
