"""``s3://`` destinations against a real S3 server (SeaweedFS, on loopback, which the policy of these tests allows as
an operator would), read back with boto3; the endpoint's address judged and pinned for every request."""

from __future__ import annotations

import contextlib
import gzip
import http.server
import ipaddress
import os
import socket
import threading
from collections.abc import AsyncIterator, Callable
from datetime import UTC, datetime

import pytest

from edgeplane.logs.destination_conf import parse_destination_conf
from edgeplane.logs.destinations import (
    DestinationPolicy,
    DestinationRejected,
    DestinationUnavailable,
    S3Uploader,
    open_destination,
)
from edgeplane.logs.destinations.address_guard import AddressPolicy
from edgeplane.logs.destinations.s3 import UNREACHABLE
from tests.support.seaweedfs import WRITER_BUCKET, SeaweedS3

LOOPBACK = DestinationPolicy(AddressPolicy((ipaddress.ip_network("127.0.0.0/8"),)))


def conf(server: SeaweedS3, bucket: str, prefix: str = "", *, key: str | None = None, secret: str | None = None) -> str:
    path = f"/{prefix}" if prefix else ""
    return (
        f"s3://{bucket}{path}?region={server.region}&endpoint={server.endpoint}"
        f"&access-key-id={key or server.access_key}&secret-access-key={secret or server.secret_key}"
    )


def s3(text: str, policy: DestinationPolicy = LOOPBACK) -> S3Uploader:
    destination = open_destination(parse_destination_conf(text), policy=policy)
    assert isinstance(destination, S3Uploader)
    return destination


Closing = Callable[[S3Uploader], S3Uploader]
FakeDns = Callable[[str, str], None]


@pytest.fixture
async def closing() -> AsyncIterator[Closing]:
    """``closing(destination)`` is ``destination``, closed when the test ends."""
    opened: list[S3Uploader] = []

    def close_later(destination: S3Uploader) -> S3Uploader:
        opened.append(destination)
        return destination

    yield close_later
    for destination in opened:
        await destination.close()


async def test_a_batch_lands_under_the_prefix_with_its_content_type(seaweed: SeaweedS3, closing: Closing) -> None:
    body = gzip.compress(b'{"RayID":"1"}\n{"RayID":"2"}\n')
    destination = closing(s3(conf(seaweed, "logs-small", "http_requests/{DATE}")))
    when = datetime(2024, 5, 6, 7, 8, tzinfo=UTC)
    await destination.put("20240506T070800Z_1.log.gz", body, when=when)

    stored = seaweed.client().get_object(Bucket="logs-small", Key="http_requests/20240506/20240506T070800Z_1.log.gz")
    assert stored["Body"].read() == body
    assert stored["ContentType"] == "application/gzip"
    assert gzip.decompress(body).splitlines() == [b'{"RayID":"1"}', b'{"RayID":"2"}']


async def test_content_encoding_is_stored_when_given(seaweed: SeaweedS3, closing: Closing) -> None:
    destination = closing(s3(conf(seaweed, "logs-encoding")))
    await destination.put(
        "batch.ndjson", gzip.compress(b"{}\n"), content_type="application/x-ndjson", content_encoding="gzip"
    )
    head = seaweed.client().head_object(Bucket="logs-encoding", Key="batch.ndjson")
    assert (head["ContentType"], head["ContentEncoding"]) == ("application/x-ndjson", "gzip")


async def test_a_large_batch_goes_up_in_parts(seaweed: SeaweedS3, closing: Closing) -> None:
    body = os.urandom(20 * 1024 * 1024)  # above the 16 MiB threshold: parts of 8, 8 and 4 MiB
    destination = closing(s3(conf(seaweed, "logs-large", "big")))
    await destination.put("batch.gz", body)

    client = seaweed.client()
    head = client.head_object(Bucket="logs-large", Key="big/batch.gz")
    assert head["ETag"].strip('"').endswith("-3")
    assert head["ContentLength"] == len(body)
    assert client.get_object(Bucket="logs-large", Key="big/batch.gz")["Body"].read() == body
    assert client.list_multipart_uploads(Bucket="logs-large").get("Uploads", []) == []


async def test_the_challenge_is_written_as_text(seaweed: SeaweedS3, closing: Closing) -> None:
    destination = closing(s3(conf(seaweed, "logs-challenge", "dir")))
    await destination.write_challenge("ownership-challenge-1a2b.txt", "challenge-text")
    stored = seaweed.client().get_object(Bucket="logs-challenge", Key="dir/ownership-challenge-1a2b.txt")
    assert stored["Body"].read() == b"challenge-text"
    assert stored["ContentType"].startswith("text/plain")


async def test_credentials_come_from_the_environment_when_the_conf_has_none(
    seaweed: SeaweedS3, closing: Closing, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", seaweed.access_key)
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", seaweed.secret_key)
    destination = closing(s3(f"s3://logs-env?region={seaweed.region}&endpoint={seaweed.endpoint}"))
    await destination.put("batch.gz", b"x")
    assert seaweed.client().get_object(Bucket="logs-env", Key="batch.gz")["Body"].read() == b"x"


async def test_a_wrong_secret_is_rejected_without_showing_it(seaweed: SeaweedS3, closing: Closing) -> None:
    destination = closing(s3(conf(seaweed, "logs-wrong", secret="not-the-secret-key")))
    with pytest.raises(DestinationRejected) as raised:
        await destination.put("batch.gz", b"x")
    message = str(raised.value)
    assert "SignatureDoesNotMatch (403)" in message
    assert message.startswith("s3://logs-wrong?")
    assert "not-the-secret-key" not in message
    assert "secret-access-key=REDACTED" in message


async def test_an_unknown_key_is_rejected(seaweed: SeaweedS3, closing: Closing) -> None:
    destination = closing(s3(conf(seaweed, "logs-wrong", key="nobody", secret="nothing")))
    with pytest.raises(DestinationRejected, match=r"\(403\)"):
        await destination.put("batch.gz", b"x")


async def test_a_bucket_the_identity_may_not_write_is_rejected(seaweed: SeaweedS3, closing: Closing) -> None:
    allowed = closing(s3(conf(seaweed, WRITER_BUCKET, key=seaweed.writer_access_key, secret=seaweed.writer_secret_key)))
    seaweed.client().create_bucket(Bucket=WRITER_BUCKET)
    await allowed.put("batch.gz", b"x")
    other = closing(
        s3(conf(seaweed, "logs-forbidden", key=seaweed.writer_access_key, secret=seaweed.writer_secret_key))
    )
    with pytest.raises(DestinationRejected, match="AccessDenied"):
        await other.put("batch.gz", b"x")


@pytest.mark.parametrize("address", ["169.254.169.254", "10.0.0.1", "192.168.0.1", "::1"])
async def test_an_endpoint_name_that_resolves_to_a_refused_address_is_never_connected_to(
    seaweed: SeaweedS3, closing: Closing, fake_dns: FakeDns, address: str
) -> None:
    fake_dns("internal.test", address)
    destination = closing(s3(conf(seaweed, "logs-metadata").replace("127.0.0.1", "internal.test")))
    with pytest.raises(DestinationUnavailable) as raised:
        await destination.put("batch.gz", b"x")
    assert str(raised.value).endswith("internal.test does not resolve to an address this edgeplane may send logs to")
    assert address not in str(raised.value)


@pytest.mark.parametrize("endpoint", ["127.0.0.1", "2130706433", "0x7f.1", "localhost"])
async def test_a_loopback_endpoint_is_refused_by_default(seaweed: SeaweedS3, closing: Closing, endpoint: str) -> None:
    destination = closing(s3(conf(seaweed, "logs-strict").replace("127.0.0.1", endpoint), DestinationPolicy()))
    with pytest.raises(DestinationRejected, match="is a loopback address"):
        await destination.put("batch.gz", b"x")
    assert not bucket_exists(seaweed, "logs-strict")  # nothing was sent


async def test_the_checked_address_is_the_one_connected_to(
    seaweed: SeaweedS3, closing: Closing, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A rebinding resolver: an allowed answer first, a refused one to every later question. The upload goes to the
    # address that was checked; nothing asks the resolver a second time.
    answers = iter(["127.0.0.1", *["169.254.169.254"] * 20])
    asked: list[str] = []
    real_getaddrinfo = socket.getaddrinfo

    def rebinding(host: object, *args: object, **kwargs: object) -> object:
        if host == "store.test":
            asked.append(host)
            host = next(answers)
        return real_getaddrinfo(host, *args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    destination = closing(s3(conf(seaweed, "logs-pinned").replace("127.0.0.1", "store.test")))
    await destination.put("batch.gz", b"pinned")
    assert asked == ["store.test"]  # one question per request (the signature covers Host: store.test:port)
    assert seaweed.client().get_object(Bucket="logs-pinned", Key="batch.gz")["Body"].read() == b"pinned"
    with pytest.raises(DestinationUnavailable, match="does not resolve to an address"):
        await destination.put("again.gz", b"x")


def bucket_exists(server: SeaweedS3, bucket: str) -> bool:
    return any(item["Name"] == bucket for item in server.client().list_buckets().get("Buckets", []))


async def test_an_outage_is_unavailable_and_uploads_resume_after_it(closing: Closing) -> None:
    with SeaweedS3() as server:
        destination = closing(s3(conf(server, "logs-outage")))
        await destination.put("before.gz", b"before")

        server.stop()
        with pytest.raises(DestinationUnavailable, match=rf"^s3://logs-outage\?.*: {UNREACHABLE}$"):
            await destination.put("during.gz", b"during")

        server.start()
        await destination.put("after.gz", b"after")
        client = server.client()
        assert client.get_object(Bucket="logs-outage", Key="before.gz")["Body"].read() == b"before"
        assert client.get_object(Bucket="logs-outage", Key="after.gz")["Body"].read() == b"after"
        keys = [item["Key"] for item in client.list_objects_v2(Bucket="logs-outage")["Contents"]]
        assert keys == ["after.gz", "before.gz"]


async def test_an_endless_answer_is_read_only_so_far(closing: Closing) -> None:
    # A store that answers an upload with more than any S3 answer needs: read up to the bound, then given up.
    class Endless(http.server.BaseHTTPRequestHandler):
        def do_PUT(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(200)
            self.end_headers()
            with contextlib.suppress(OSError):
                for _ in range(64):
                    self.wfile.write(b"x" * 65536)

        def log_message(self, *args: object) -> None:
            pass

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Endless)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        endpoint = f"http://127.0.0.1:{server.server_address[1]}"
        destination = closing(
            s3(f"s3://logs-endless?region=auto&endpoint={endpoint}&access-key-id=a&secret-access-key=b")
        )
        with pytest.raises(DestinationUnavailable, match=UNREACHABLE):
            await destination.put("batch.gz", b"x")
    finally:
        server.shutdown()
        server.server_close()
