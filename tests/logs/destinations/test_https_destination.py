"""``https://`` destinations against a real HTTPS receiver with a test certificate (on loopback, which the policy of
these tests allows as an operator would), and the address policy applied where connections are made."""

from __future__ import annotations

import gzip
import ipaddress
import re
from collections.abc import AsyncIterator, Callable

import pytest

from edgeplane.logs.destination_conf import Headers, HttpsDestination, parse_destination_conf
from edgeplane.logs.destinations import (
    DestinationPolicy,
    DestinationRejected,
    DestinationUnavailable,
    HttpsUploader,
    open_destination,
)
from edgeplane.logs.destinations.address_guard import AddressPolicy
from edgeplane.logs.destinations.https import UNREACHABLE
from tests.support.https_receiver import TEST_HOST_NAME, HttpsReceiver

MakeHttps = Callable[..., HttpsUploader]
FakeDns = Callable[[str, str], None]

LOOPBACK = DestinationPolicy(AddressPolicy((ipaddress.ip_network("127.0.0.0/8"), ipaddress.ip_network("::1/128"))))
STRICT = DestinationPolicy()
BATCH = gzip.compress(b'{"RayID":"1","EdgeResponseStatus":200}\n{"RayID":"2","EdgeResponseStatus":502}\n')


@pytest.fixture
async def https(receiver: HttpsReceiver) -> AsyncIterator[MakeHttps]:
    opened: list[HttpsUploader] = []

    def make(
        conf: str | None = None,
        *,
        trusted: bool = True,
        timeout: float = 10.0,
        policy: DestinationPolicy = LOOPBACK,
    ) -> HttpsUploader:
        parsed = parse_destination_conf(conf or f"{receiver.url}/ingest")
        destination = open_destination(
            parsed, policy=policy, ca_bundle=receiver.ca_path if trusted else None, timeout=timeout
        )
        assert isinstance(destination, HttpsUploader)
        opened.append(destination)
        return destination

    yield make
    for destination in opened:
        await destination.close()


async def test_the_batch_arrives_gzip_encoded_with_the_configured_headers(
    receiver: HttpsReceiver, https: MakeHttps
) -> None:
    destination = https(f"{receiver.url}/ingest/logs?source=edge&header_Authorization=Bearer%20t0ken&header_X-Env=prod")
    await destination.put("batch.gz", BATCH, content_type="application/x-ndjson", content_encoding="gzip")

    [request] = receiver.requests
    assert (request.method, request.path) == ("POST", "/ingest/logs?source=edge")
    assert request.headers["Authorization"] == "Bearer t0ken"
    assert request.headers["X-Env"] == "prod"
    assert request.headers["Content-Encoding"] == "gzip"
    assert request.headers["Content-Type"] == "application/x-ndjson"
    assert request.body == BATCH
    assert request.decompressed == gzip.decompress(BATCH)


async def test_without_a_named_content_type_the_body_is_octet_stream(receiver: HttpsReceiver, https: MakeHttps) -> None:
    await https().put("batch.gz", BATCH)
    [request] = receiver.requests
    assert request.headers["Content-Type"] == "application/octet-stream"
    assert request.headers["Content-Encoding"] == "gzip"


async def test_configured_headers_cannot_undo_the_encoding(receiver: HttpsReceiver, https: MakeHttps) -> None:
    destination = https(f"{receiver.url}/?header_Content-Encoding=identity&header_Content-Type=text/plain")
    await destination.put("batch.gz", BATCH)
    [request] = receiver.requests
    assert request.headers["Content-Encoding"] == "gzip"
    assert request.headers["Content-Type"] == "text/plain"


async def test_the_challenge_is_posted_gzip_compressed(receiver: HttpsReceiver, https: MakeHttps) -> None:
    await https().write_challenge("ownership-challenge-1a2b.txt", "challenge-text")
    [request] = receiver.requests
    assert request.decompressed == b"challenge-text"


@pytest.mark.parametrize(
    ("status", "failure"),
    [
        (500, DestinationUnavailable),
        (502, DestinationUnavailable),
        (503, DestinationUnavailable),
        (408, DestinationUnavailable),
        (429, DestinationUnavailable),
        (400, DestinationRejected),
        (401, DestinationRejected),
        (403, DestinationRejected),
        (404, DestinationRejected),
        (413, DestinationRejected),
        (301, DestinationRejected),  # redirects are not followed
    ],
)
async def test_a_non_2xx_answer_is_classified(
    receiver: HttpsReceiver, https: MakeHttps, status: int, failure: type[Exception]
) -> None:
    receiver.answer(status, {"Location": "https://169.254.169.254/"} if status == 301 else None)
    destination = https(f"{receiver.url}/ingest?header_Authorization=secret-token")
    with pytest.raises(failure, match=rf"answered {status}") as raised:
        await destination.put("batch.gz", BATCH)
    assert "secret-token" not in str(raised.value)
    assert len(receiver.requests) == 1


@pytest.mark.parametrize("status", [200, 201, 202, 204])
async def test_any_2xx_answer_confirms(receiver: HttpsReceiver, https: MakeHttps, status: int) -> None:
    receiver.answer(status)
    await https().put("batch.gz", BATCH)  # confirmed: no exception
    [request] = receiver.requests
    assert request.body == BATCH


async def test_retry_after_is_passed_on(receiver: HttpsReceiver, https: MakeHttps) -> None:
    receiver.answer(429, {"Retry-After": "7"})
    with pytest.raises(DestinationUnavailable) as raised:
        await https().put("batch.gz", BATCH)
    assert raised.value.retry_after == 7.0


async def test_a_certificate_from_an_unknown_authority_is_rejected(receiver: HttpsReceiver, https: MakeHttps) -> None:
    with pytest.raises(DestinationRejected, match="certificate does not verify"):
        await https(trusted=False).put("batch.gz", BATCH)
    assert receiver.requests == []


async def test_a_host_name_is_verified_against_the_certificate(
    receiver: HttpsReceiver, https: MakeHttps, fake_dns: FakeDns
) -> None:
    fake_dns("elsewhere.test", "127.0.0.1")  # right address, but the certificate is not for this name
    with pytest.raises(DestinationRejected, match="certificate does not verify"):
        await https(f"https://elsewhere.test:{receiver.port}/").put("batch.gz", BATCH)


async def test_a_name_resolving_to_an_allowed_address_is_used(
    receiver: HttpsReceiver, https: MakeHttps, fake_dns: FakeDns
) -> None:
    fake_dns(TEST_HOST_NAME, "127.0.0.1")
    await https(f"https://{TEST_HOST_NAME}:{receiver.port}/ingest").put("batch.gz", BATCH)
    [request] = receiver.requests
    assert request.headers["Host"] == f"{TEST_HOST_NAME}:{receiver.port}"


@pytest.mark.parametrize(
    ("address", "policy"),
    [
        ("169.254.169.254", LOOPBACK),
        ("169.254.0.1", LOOPBACK),
        ("fd00:ec2::254", LOOPBACK),
        ("fe80::1", LOOPBACK),
        ("10.0.0.1", LOOPBACK),
        ("127.0.0.1", STRICT),
        ("::1", STRICT),
    ],
)
async def test_a_name_resolving_to_a_refused_address_is_never_connected_to(
    receiver: HttpsReceiver, https: MakeHttps, fake_dns: FakeDns, address: str, policy: DestinationPolicy
) -> None:
    fake_dns("internal.test", address)
    with pytest.raises(DestinationUnavailable) as raised:
        await https(f"https://internal.test:{receiver.port}/", policy=policy).put("batch.gz", BATCH)
    assert str(raised.value).endswith("internal.test does not resolve to an address this edgeplane may send logs to")
    assert address not in str(raised.value)
    assert receiver.requests == []


@pytest.mark.parametrize("host", ["127.0.0.1", "127.1", "2130706433", "localhost", "[::ffff:127.0.0.1]"])
async def test_a_loopback_endpoint_is_refused_by_default(receiver: HttpsReceiver, https: MakeHttps, host: str) -> None:
    with pytest.raises(DestinationRejected, match="loopback"):
        await https(f"https://{host}:{receiver.port}/ingest", policy=STRICT).put("batch.gz", BATCH)
    assert receiver.requests == []


async def test_a_literal_metadata_address_is_refused_even_past_the_parser(receiver: HttpsReceiver) -> None:
    everything = AddressPolicy((ipaddress.ip_network("0.0.0.0/0"),))
    destination = HttpsUploader(
        HttpsDestination(url="https://169.254.169.254/latest", headers=Headers({})), addresses=everything
    )
    try:
        with pytest.raises(DestinationRejected, match=re.escape("169.254.169.254 is a cloud metadata address")):
            await destination.put("batch.gz", BATCH)
    finally:
        await destination.close()


async def test_an_endpoint_that_is_down_is_unavailable_until_it_is_back(
    receiver: HttpsReceiver, https: MakeHttps
) -> None:
    destination = https()
    receiver.stop()
    with pytest.raises(DestinationUnavailable, match=UNREACHABLE):
        await destination.put("batch.gz", BATCH)
    receiver.start()
    await destination.put("batch.gz", BATCH)
    assert len(receiver.requests) == 1


async def test_refused_and_timed_out_connections_fail_in_the_same_words(
    receiver: HttpsReceiver, https: MakeHttps
) -> None:
    receiver.delay = 2.0
    with pytest.raises(DestinationUnavailable) as slow:
        await https(timeout=0.5).put("batch.gz", BATCH)
    receiver.stop()
    with pytest.raises(DestinationUnavailable) as down:
        await https(timeout=0.5).put("batch.gz", BATCH)
    assert str(slow.value) == str(down.value) == f"https://127.0.0.1:{receiver.port}/ingest: {UNREACHABLE}"
