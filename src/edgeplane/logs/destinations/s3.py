"""``s3://`` destinations: objects in an Amazon S3 bucket or a bucket of an S3-compatible store.

The client is boto3's, driven from worker threads so the event loop never waits on it. With ``endpoint=`` the
store is addressed path-style (``http(s)://endpoint/bucket/key``, which every S3-compatible store accepts) and
checksums are sent only where the S3 API requires them (several stores reject the newer checksum headers);
without it, AWS's regional virtual-hosted endpoints are used. Credentials are the conf's ``access-key-id`` and
``secret-access-key`` when given, otherwise the standard AWS chain (environment, shared config and credential
files, container and instance roles). ``sse=`` becomes the ``ServerSideEncryption`` of every object.

With ``endpoint=`` (a host the tenant chooses) every request goes through a ``PinnedSender``: the endpoint's name is
resolved and judged by the operator's ``AddressPolicy`` before each connection, and the connection is made to the
address judged. AWS's own endpoints are left to boto3. A connection that fails or times out fails in one message,
whatever the cause.

A batch above ``multipart_threshold`` (16 MiB) is sent as a multipart upload in parts of ``part_size`` (8 MiB), up
to four parts at a time; a failed multipart upload is aborted so no part is left billed. Each request has bounded
connect and read timeouts and at most two attempts; retrying beyond that is delivery's job.
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any, Final, TypeVar

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, HTTPClientError, NoCredentialsError
from botocore.exceptions import ConnectionError as BotoConnectionError

from edgeplane.logs.destination_conf import S3Destination, expand_date
from edgeplane.logs.destinations.address_guard import AddressPolicy, ForbiddenAddress
from edgeplane.logs.destinations.destination import GZIP, check_object_name
from edgeplane.logs.destinations.errors import (
    DestinationFailure,
    DestinationRejected,
    DestinationUnavailable,
    failure_for_status,
    parse_retry_after,
)
from edgeplane.logs.destinations.pinned_http import PinnedSender
from edgeplane.logs.errors import DestinationError

if TYPE_CHECKING:
    from mypy_boto3_s3.client import S3Client
    from mypy_boto3_s3.type_defs import CompletedPartTypeDef

_T = TypeVar("_T")

MULTIPART_THRESHOLD: Final = 16 * 1024 * 1024
PART_SIZE: Final = 8 * 1024 * 1024
PARALLEL_PARTS: Final = 4
CONNECT_TIMEOUT: Final = 5.0
READ_TIMEOUT: Final = 30.0
UNREACHABLE: Final = "the store could not be reached, or did not answer in time"
# Error codes S3 and compatible stores use for "slow down" whatever the HTTP status they come with.
_THROTTLING_CODES: Final = frozenset(
    {"SlowDown", "Throttling", "ThrottlingException", "RequestLimitExceeded", "TooManyRequests", "RequestTimeout"}
)


class S3Uploader:
    """The ``Destination`` for an ``S3Destination``."""

    def __init__(
        self,
        destination: S3Destination,
        *,
        addresses: AddressPolicy,
        multipart_threshold: int = MULTIPART_THRESHOLD,
        part_size: int = PART_SIZE,
        connect_timeout: float = CONNECT_TIMEOUT,
        read_timeout: float = READ_TIMEOUT,
    ) -> None:
        self.destination = destination
        self.multipart_threshold = multipart_threshold
        self.part_size = part_size
        self._config = Config(
            region_name=destination.region,
            signature_version="s3v4",
            connect_timeout=connect_timeout,
            read_timeout=read_timeout,
            retries={"mode": "standard", "total_max_attempts": 2},
            s3={"addressing_style": "path" if destination.endpoint else "auto"},
            request_checksum_calculation="when_required" if destination.endpoint else "when_supported",
            response_checksum_validation="when_required" if destination.endpoint else "when_supported",
        )
        self._client: S3Client | None = None
        self._client_lock = threading.Lock()
        self._sender = (
            PinnedSender(
                addresses,
                connect_timeout=connect_timeout,
                read_timeout=read_timeout,
                max_connections=PARALLEL_PARTS + 1,
            )
            if destination.endpoint is not None
            else None
        )

    async def put(
        self,
        object_name: str,
        body: bytes,
        *,
        content_type: str = GZIP,
        content_encoding: str | None = None,
        when: datetime | None = None,
    ) -> None:
        """Store ``body`` as ``<prefix>/<object_name>`` (``{DATE}`` expanded for ``when``, default now) with the
        given Content-Type and Content-Encoding; multipart above ``multipart_threshold``."""
        check_object_name(object_name)
        key = self._key(object_name, when or datetime.now(UTC))
        extra: dict[str, Any] = {"ContentType": content_type}
        if content_encoding is not None:
            extra["ContentEncoding"] = content_encoding
        if self.destination.sse is not None:
            extra["ServerSideEncryption"] = self.destination.sse
        if len(body) > self.multipart_threshold:
            await self._put_multipart(key, body, extra)
        else:
            await self._call(
                lambda client: client.put_object(Bucket=self.destination.bucket, Key=key, Body=body, **extra)
            )

    async def write_challenge(self, filename: str, text: str) -> None:
        """Store ``text`` as ``<prefix>/<filename>`` (``text/plain``)."""
        check_object_name(filename)
        await self.put(filename, text.encode(), content_type="text/plain; charset=utf-8")

    async def close(self) -> None:
        """Close the client's connection pool."""
        with self._client_lock:
            client, self._client = self._client, None
        if client is not None:
            await asyncio.to_thread(client.close)
        if self._sender is not None:
            await asyncio.to_thread(self._sender.close)

    def _key(self, object_name: str, when: datetime) -> str:
        prefix = expand_date(self.destination.prefix, when).strip("/")
        return f"{prefix}/{object_name}" if prefix else object_name

    async def _put_multipart(self, key: str, body: bytes, extra: dict[str, Any]) -> None:
        bucket = self.destination.bucket
        created = await self._call(lambda client: client.create_multipart_upload(Bucket=bucket, Key=key, **extra))
        upload_id = created["UploadId"]
        slots = asyncio.Semaphore(PARALLEL_PARTS)

        async def upload_part(number: int, start: int) -> CompletedPartTypeDef:
            chunk = body[start : start + self.part_size]
            async with slots:
                answer = await self._call(
                    lambda client: client.upload_part(
                        Bucket=bucket, Key=key, UploadId=upload_id, PartNumber=number, Body=chunk
                    )
                )
            return {"PartNumber": number, "ETag": answer["ETag"]}

        try:
            parts = await asyncio.gather(
                *(
                    upload_part(number, start)
                    for number, start in enumerate(range(0, len(body), self.part_size), start=1)
                )
            )
            await self._call(
                lambda client: client.complete_multipart_upload(
                    Bucket=bucket, Key=key, UploadId=upload_id, MultipartUpload={"Parts": parts}
                )
            )
        except BaseException:
            with contextlib.suppress(DestinationFailure):
                await self._call(
                    lambda client: client.abort_multipart_upload(Bucket=bucket, Key=key, UploadId=upload_id)
                )
            raise

    async def _call(self, request: Callable[[S3Client], _T]) -> _T:
        return await asyncio.to_thread(self._call_in_thread, request)

    def _call_in_thread(self, request: Callable[[S3Client], _T]) -> _T:
        try:
            return request(self._get_client())
        except ClientError as error:
            raise self._client_failure(error) from None
        except NoCredentialsError:
            raise DestinationRejected(
                f"{self.destination.redacted()}: no credentials: give access-key-id and secret-access-key or "
                "configure the AWS credential chain"
            ) from None
        except DestinationError as error:  # an address literal the policy refuses
            raise DestinationRejected(f"{self.destination.redacted()}: {error}") from None
        except ForbiddenAddress as error:
            raise DestinationUnavailable(f"{self.destination.redacted()}: {error}") from None
        except (BotoConnectionError, HTTPClientError):  # refused, reset, timed out, TLS failed: one message
            raise DestinationUnavailable(f"{self.destination.redacted()}: {UNREACHABLE}") from None
        except BotoCoreError as error:
            raise DestinationRejected(f"{self.destination.redacted()}: {error}") from None

    def _get_client(self) -> S3Client:
        with self._client_lock:
            if self._client is None:
                secret = self.destination.secret_access_key
                self._client = boto3.session.Session().client(
                    "s3",
                    endpoint_url=self.destination.endpoint,
                    aws_access_key_id=self.destination.access_key_id,
                    aws_secret_access_key=secret.reveal() if secret is not None else None,
                    config=self._config,
                )
                if self._sender is not None:
                    # A before-send handler may answer in botocore's place, which the stubs do not know of.
                    self._client.meta.events.register("before-send.s3", self._sender)  # type: ignore[arg-type]
            return self._client

    def _client_failure(self, error: ClientError) -> DestinationFailure:
        details = error.response.get("Error", {})
        code = details.get("Code", "")
        status = error.response.get("ResponseMetadata", {}).get("HTTPStatusCode", 0)
        headers = error.response.get("ResponseMetadata", {}).get("HTTPHeaders", {})
        message = f"{self.destination.redacted()}: {code or 'error'} ({status}): {details.get('Message', '')}".strip()
        if code in _THROTTLING_CODES:
            return DestinationUnavailable(message)
        if code == "NoSuchBucket":
            return DestinationRejected(f"{message}; the bucket {self.destination.bucket} does not exist")
        return failure_for_status(status, message, retry_after=parse_retry_after(headers.get("retry-after")))
