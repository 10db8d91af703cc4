"""``https://`` destinations: each batch POSTed to an HTTPS endpoint.

The request carries the gzip batch as its body with ``Content-Encoding: gzip`` (the body is the batch's content,
compressed for transport, which HTTP receivers and log collectors decompress by themselves), ``Content-Type``
naming the decompressed content when the caller gives one (``content_encoding="gzip"``) and
``application/octet-stream`` otherwise, and the conf's ``header_*`` headers (which may replace ``Content-Type`` and
``User-Agent`` but not ``Content-Encoding``). A 2xx answer confirms the batch; a redirect is not followed (it is
refused, as a redirect could lead anywhere, metadata services included).

The host is judged by the operator's ``AddressPolicy`` (``address_guard``): an address literal before each request,
a name when each connection is made, and the connection goes to the addresses that were checked. Certificates are
verified against the system's trust store, or against ``ca_bundle`` only when one is given (tests). Proxy
environment variables are ignored. Each request is bounded by ``timeout`` seconds; at most ``MAX_ANSWER_BYTES`` of an
answer's body are read. A connection that fails, is closed or times out fails in one message whatever the cause, so
the job's error text tells nothing of the network between edgeplane and the endpoint.
"""

from __future__ import annotations

import gzip
import socket
import ssl
from datetime import datetime
from pathlib import Path
from typing import Final
from urllib.parse import urlsplit

import aiohttp
from aiohttp.abc import AbstractResolver, ResolveResult

from edgeplane.logs.destination_conf import HttpsDestination
from edgeplane.logs.destinations.address_guard import AddressPolicy, ForbiddenAddress
from edgeplane.logs.destinations.destination import GZIP, check_object_name
from edgeplane.logs.destinations.errors import (
    DestinationFailure,
    DestinationRejected,
    DestinationUnavailable,
    failure_for_status,
    parse_retry_after,
)
from edgeplane.logs.errors import DestinationError

TIMEOUT: Final = 30.0
CONNECT_TIMEOUT: Final = 10.0
MAX_ANSWER_BYTES: Final = 64 * 1024
UNREACHABLE: Final = "the destination could not be reached, or did not answer in time"
USER_AGENT: Final = "edgeplane-logpush"
_NUMERIC: Final = socket.AI_NUMERICHOST | socket.AI_NUMERICSERV
_CONTROLLED_HEADERS: Final = frozenset({"content-encoding", "content-length", "transfer-encoding", "host"})


class HttpsUploader:
    """The ``Destination`` for an ``HttpsDestination``."""

    def __init__(
        self,
        destination: HttpsDestination,
        *,
        addresses: AddressPolicy,
        ca_bundle: str | Path | None = None,
        timeout: float = TIMEOUT,
    ) -> None:
        self.destination = destination
        self.addresses = addresses
        self.timeout = timeout
        self._ssl = ssl.create_default_context(cafile=str(ca_bundle) if ca_bundle is not None else None)
        self._session: aiohttp.ClientSession | None = None
        self._host = urlsplit(destination.url).hostname or ""

    async def put(
        self,
        object_name: str,
        body: bytes,
        *,
        content_type: str = GZIP,
        content_encoding: str | None = None,
        when: datetime | None = None,
    ) -> None:
        """POST ``body`` to the URL; returns on a 2xx answer. ``object_name`` is checked but not sent: the
        endpoint receives batches, not named objects."""
        check_object_name(object_name)
        if content_encoding not in (None, "gzip"):
            raise ValueError(f"https destinations send gzip bodies; content_encoding {content_encoding!r} is wrong")
        inner_type = content_type if content_encoding == "gzip" else "application/octet-stream"
        await self._post(body, inner_type)

    async def write_challenge(self, filename: str, text: str) -> None:
        """POST ``text`` gzip-compressed, as a batch would be."""
        check_object_name(filename)
        await self._post(gzip.compress(text.encode()), "text/plain; charset=utf-8")

    async def close(self) -> None:
        """Close the connection pool."""
        session, self._session = self._session, None
        if session is not None:
            await session.close()

    def _headers(self, content_type: str) -> dict[str, str]:
        configured = dict(self.destination.headers)
        headers = {"Content-Type": content_type, "User-Agent": USER_AGENT}
        lowered = {name.lower() for name in configured}
        headers = {name: value for name, value in headers.items() if name.lower() not in lowered}
        headers.update({name: value for name, value in configured.items() if name.lower() not in _CONTROLLED_HEADERS})
        headers["Content-Encoding"] = "gzip"
        return headers

    async def _post(self, body: bytes, content_type: str) -> None:
        where = self.destination.redacted()
        try:
            self.addresses.check_host(self._host)  # an address literal skips the resolver
            async with self._get_session().post(
                self.destination.url, data=body, headers=self._headers(content_type), allow_redirects=False
            ) as response:
                await response.content.read(MAX_ANSWER_BYTES)  # the rest, if any, goes with the connection
                if 200 <= response.status < 300:
                    return
                message = f"{where}: the endpoint answered {response.status} {response.reason or ''}".rstrip()
                raise failure_for_status(
                    response.status, message, retry_after=parse_retry_after(response.headers.get("Retry-After"))
                )
        except DestinationFailure:
            raise
        except DestinationError as error:
            raise DestinationRejected(f"{where}: {error}") from None
        except ForbiddenAddress as error:
            raise DestinationUnavailable(f"{where}: {error}") from None
        except aiohttp.ClientConnectorCertificateError as error:
            raise DestinationRejected(f"{where}: the certificate does not verify: {error.certificate_error}") from None
        except aiohttp.ClientSSLError:
            raise DestinationRejected(f"{where}: the TLS handshake failed") from None
        except aiohttp.ClientConnectorError as error:
            if isinstance(error.os_error, ForbiddenAddress):
                raise DestinationUnavailable(f"{where}: {error.os_error}") from None
            raise DestinationUnavailable(f"{where}: {UNREACHABLE}") from None
        except (aiohttp.ClientError, TimeoutError, OSError):
            raise DestinationUnavailable(f"{where}: {UNREACHABLE}") from None

    def _get_session(self) -> aiohttp.ClientSession:
        if self._session is None:
            connector = aiohttp.TCPConnector(resolver=GuardedResolver(self.addresses), ssl=self._ssl, limit=8)
            self._session = aiohttp.ClientSession(
                connector=connector,
                timeout=aiohttp.ClientTimeout(total=self.timeout, connect=min(CONNECT_TIMEOUT, self.timeout)),
                auto_decompress=False,
                trust_env=False,
            )
        return self._session


class GuardedResolver(AbstractResolver):
    """An aiohttp resolver that answers with a host's addresses only when the policy allows every one of them;
    raises ``ForbiddenAddress`` otherwise."""

    def __init__(self, addresses: AddressPolicy) -> None:
        self.addresses = addresses

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        try:
            answers = await self.addresses.resolve(host, port, family)
        except DestinationError as error:  # a loopback name, refused as written
            raise ForbiddenAddress(str(error)) from None
        return [
            ResolveResult(hostname=host, host=address, port=port, family=address_family, proto=0, flags=_NUMERIC)
            for address_family, address in answers
        ]

    async def close(self) -> None:
        """Nothing to release."""
