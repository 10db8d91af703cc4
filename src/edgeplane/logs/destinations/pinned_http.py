"""botocore requests sent over connections to addresses the policy checked (the S3 destination's ``endpoint=``).

botocore resolves an endpoint's name itself, when its connection pool opens a connection; checking the name first
and letting botocore connect would leave a window in which a changed DNS answer (DNS rebinding) sends the request
to a refused address. ``PinnedSender`` closes it: as botocore's ``before-send`` handler it sends each request
itself, resolving and judging the host (``AddressPolicy.resolve_blocking``) and connecting to the address it
judged, with the name kept for the ``Host`` header (which the request's signature covers), TLS server name
indication and certificate verification (against botocore's trust store). Connections are pooled per checked
address. Proxy settings are not used: the connection goes to the endpoint itself.
"""

from __future__ import annotations

import ssl
import threading
from typing import Any, Final, cast
from urllib.parse import urlsplit

from botocore.awsrequest import AWSPreparedRequest, AWSResponse
from botocore.exceptions import (
    ConnectionClosedError,
    ConnectTimeoutError,
    EndpointConnectionError,
    HTTPClientError,
    ReadTimeoutError,
    SSLError,
)
from botocore.httpsession import get_cert_path
from urllib3 import HTTPConnectionPool, HTTPSConnectionPool, Timeout
from urllib3.exceptions import (
    ConnectTimeoutError as PoolConnectTimeout,
)
from urllib3.exceptions import (
    NewConnectionError,
    ProtocolError,
)
from urllib3.exceptions import (
    ReadTimeoutError as PoolReadTimeout,
)
from urllib3.exceptions import (
    SSLError as PoolSSLError,
)
from urllib3.util.retry import Retry

from edgeplane.logs.destinations.address_guard import AddressPolicy

MAX_POOLS: Final = 8  # checked addresses kept connections to; a host's answers rarely number more
MAX_ANSWER_BYTES: Final = 1024 * 1024  # S3 answers to uploads are small XML documents
SEND_BLOCK_BYTES: Final = 128 * 1024  # a body is sent in blocks of this size (botocore's own choice)


class PinnedSender:
    """A botocore ``before-send`` handler (``client.meta.events.register("before-send.s3", sender)``) that sends the
    request to an address ``addresses`` allows, and answers botocore with the response. Raises ``ForbiddenAddress``
    or ``DestinationError`` (which botocore passes on) for a host the policy refuses, and botocore's connection
    errors for a failed connection (which botocore may retry)."""

    def __init__(
        self, addresses: AddressPolicy, *, connect_timeout: float, read_timeout: float, max_connections: int
    ) -> None:
        self.addresses = addresses
        self._timeout = Timeout(connect=connect_timeout, read=read_timeout)
        self._max_connections = max_connections
        self._ssl = ssl.create_default_context(cafile=get_cert_path(True))
        self._pools: dict[tuple[str, str, int, str], HTTPConnectionPool] = {}
        self._lock = threading.Lock()

    def __call__(self, request: AWSPreparedRequest, **_: Any) -> AWSResponse:
        parts = urlsplit(request.url)
        host = parts.hostname or ""
        port = parts.port or (443 if parts.scheme == "https" else 80)
        address = self.addresses.resolve_blocking(host, port)[0][1]
        pool = self._pool(parts.scheme, address, port, host)
        headers = {name: value for name, value in request.headers.items() if name.lower() not in ("host", "expect")}
        headers["Host"] = parts.netloc
        target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
        chunked = str(request.headers.get("Transfer-Encoding", "")).lower() == "chunked"
        body: Any = request.body  # bytes or a file object, as botocore prepared it
        try:
            answer = pool.urlopen(
                method=request.method,
                url=target,
                body=body,
                headers=headers,
                retries=Retry(False),
                assert_same_host=False,
                preload_content=False,
                decode_content=False,
                chunked=chunked,
                enforce_content_length=False,
            )
        except PoolSSLError as error:
            raise SSLError(endpoint_url=request.url, error=error) from None
        except NewConnectionError as error:
            raise EndpointConnectionError(endpoint_url=request.url, error=error) from None
        except PoolConnectTimeout as error:
            raise ConnectTimeoutError(endpoint_url=request.url, error=error) from None
        except PoolReadTimeout as error:
            raise ReadTimeoutError(endpoint_url=request.url, error=error) from None
        except ProtocolError as error:
            raise ConnectionClosedError(error=error, request=request, endpoint_url=request.url) from None
        except OSError as error:
            raise HTTPClientError(error=error) from None
        if request.stream_output:
            return AWSResponse(request.url, answer.status, cast(Any, answer.headers), answer)
        try:  # read now, as botocore's own sender does, but no more than an S3 answer can need
            content = answer.read(MAX_ANSWER_BYTES + 1)
        except (ProtocolError, PoolReadTimeout, OSError) as error:
            answer.close()
            raise ConnectionClosedError(error=error, request=request, endpoint_url=request.url) from None
        if len(content) > MAX_ANSWER_BYTES:
            answer.close()
            raise HTTPClientError(error=f"the store's answer is larger than {MAX_ANSWER_BYTES} bytes")
        answer.release_conn()
        return AWSResponse(request.url, answer.status, cast(Any, answer.headers), _Content(content))

    def close(self) -> None:
        """Close every pooled connection."""
        with self._lock:
            pools, self._pools = list(self._pools.values()), {}
        for pool in pools:
            pool.close()

    def _pool(self, scheme: str, address: str, port: int, host: str) -> HTTPConnectionPool:
        key = (scheme, address, port, host)
        with self._lock:
            pool = self._pools.get(key)
            if pool is not None:
                return pool
            if len(self._pools) >= MAX_POOLS:
                self._pools.pop(next(iter(self._pools))).close()
            if scheme == "https":
                pool = HTTPSConnectionPool(
                    address,
                    port,
                    timeout=self._timeout,
                    maxsize=self._max_connections,
                    ssl_context=self._ssl,
                    server_hostname=host,
                    assert_hostname=host,
                    cert_reqs="CERT_REQUIRED",
                    blocksize=SEND_BLOCK_BYTES,
                )
            else:
                pool = HTTPConnectionPool(
                    address, port, timeout=self._timeout, maxsize=self._max_connections, blocksize=SEND_BLOCK_BYTES
                )
            self._pools[key] = pool
            return pool


class _Content:
    """An answer's body, already read, in the shape ``AWSResponse`` reads it from."""

    def __init__(self, content: bytes) -> None:
        self._content = content

    def stream(self) -> list[bytes]:
        return [self._content]
