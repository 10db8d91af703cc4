"""destination_conf: the supported schemes, the refused ones, and secrets kept out of sight."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

import pytest

from edgeplane.logs.destination_conf import (
    MAX_DESTINATION_CONF_LENGTH,
    FileDestination,
    HttpsDestination,
    S3Destination,
    Secret,
    expand_date,
    parse_destination_conf,
)
from edgeplane.logs.errors import DestinationError


def refusal(conf: str) -> str:
    with pytest.raises(DestinationError) as caught:
        parse_destination_conf(conf)
    return str(caught.value)


@pytest.mark.parametrize(
    ("conf", "directory"),
    [
        ("file:///var/lib/edgeplane/logs", "/var/lib/edgeplane/logs"),
        ("file://localhost/srv/logs/{DATE}", "/srv/logs/{DATE}"),
        ("file:///srv/my%20logs", "/srv/my logs"),
    ],
)
def test_file(conf: str, directory: str) -> None:
    assert parse_destination_conf(conf) == FileDestination(directory)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("file://relative/dir", "absolute path"),
        ("file://", "absolute path"),
        ("file:///a/../etc", "'..'"),
        ("file:///a?x=1", "no parameters"),
    ],
)
def test_file_refused(conf: str, message: str) -> None:
    assert message in refusal(conf)


def test_s3_seed_shape() -> None:
    assert parse_destination_conf("s3://my-bucket/logs/{DATE}?region=us-west-2") == S3Destination(
        bucket="my-bucket", prefix="logs/{DATE}", region="us-west-2"
    )


def test_s3_compatible_store_with_credentials() -> None:
    conf = (
        "s3://logs/edge?region=auto&endpoint=http://127.0.0.1:8333"
        "&access-key-id=AKIDEXAMPLE&secret-access-key=wJalr%2FSECRET&sse=AES256"
    )
    destination = parse_destination_conf(conf)
    assert isinstance(destination, S3Destination)
    assert destination.endpoint == "http://127.0.0.1:8333"
    assert destination.access_key_id == "AKIDEXAMPLE"
    assert destination.secret_access_key == Secret("wJalr/SECRET")
    assert destination.secret_access_key is not None
    assert destination.secret_access_key.reveal() == "wJalr/SECRET"
    assert destination.sse == "AES256"
    for shown in (repr(destination), str(destination), destination.redacted()):
        assert "SECRET" not in shown
    assert "secret-access-key=REDACTED" in destination.redacted()
    assert parse_destination_conf("s3://b-1?region=auto&endpoint=minio.example.net:9000").endpoint == (  # type: ignore[union-attr]
        "https://minio.example.net:9000"
    )


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("s3://bucket/dir", "needs ?region="),
        ("s3://bucket/dir?region=", "needs ?region="),
        ("s3://Bucket?region=us-east-1", "bucket name 'Bucket'"),
        ("s3://ab?region=us-east-1", "bucket name"),
        ("s3:///dir?region=us-east-1", "bucket name ''"),
        ("s3://bucket?region=us-east-1&acl=public", "parameter acl is unknown"),
        ("s3://bucket?region=us-east-1&region=eu-west-1", "more than once"),
        ("s3://bucket?region=US_EAST", "region"),
        ("s3://bucket?region=auto&access-key-id=A", "both access-key-id and secret-access-key"),
        ("s3://bucket?region=auto&secret-access-key=S", "both access-key-id and secret-access-key"),
        ("s3://bucket?region=auto&sse=none", "sse must be one of AES256, aws:kms"),
        ("s3://bucket?region=auto&endpoint=ftp://x", "endpoint"),
    ],
)
def test_s3_refused(conf: str, message: str) -> None:
    assert message in refusal(conf)


def test_https_headers_become_request_headers() -> None:
    conf = "https://logs.example.com:8443/ingest?tag=edge&header_Authorization=Basic%20c2VjcmV0&header_X-Source=ep"
    destination = parse_destination_conf(conf)
    assert isinstance(destination, HttpsDestination)
    assert destination.url == "https://logs.example.com:8443/ingest?tag=edge"
    assert dict(destination.headers) == {"Authorization": "Basic c2VjcmV0", "X-Source": "ep"}
    for shown in (repr(destination), str(destination), destination.redacted()):
        assert "c2VjcmV0" not in shown
        assert "ep'" not in shown
    assert "Authorization" in repr(destination)


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("https:///path", "needs a host"),
        ("https://x.example/?header_=1", "not a valid header name"),
        ("https://x.example/?header_A%20B=1", "not a valid header name"),
        ("https://x.example/?header_A=1%0d%0aB:2", "line break"),
        ("https://x.example/?header_A=1&header_a=2", "more than once"),
        ("https://user:pw@x.example/", "credentials"),
        ("https://x.example:99999/", "not a valid URL"),
        ("https://x.example/#frag", "fragment"),
        ("http://x.example/", "use https://"),
        ("https://x.example/a b", "white space"),
    ],
)
def test_https_refused(conf: str, message: str) -> None:
    assert message in refusal(conf)


@pytest.mark.parametrize("scheme", ["r2", "gs", "azure", "sumo", "splunk", "datadog", "R2"])
def test_recognised_but_unsupported_schemes(scheme: str) -> None:
    assert refusal(f"{scheme}://bucket/path?x=1") == (
        f"destination scheme {scheme.lower()}:// is not supported by this edgeplane"
    )


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ("", "empty"),
        ("bucket/path", "<scheme>://"),
        ("ftp://host/x", "unknown destination scheme ftp://"),
        ("s3://" + "a" * MAX_DESTINATION_CONF_LENGTH, "at most 4096"),
    ],
)
def test_malformed(conf: str, message: str) -> None:
    assert message in refusal(conf)


@pytest.mark.parametrize(
    "host",
    [
        "127.0.0.1",
        "10.0.0.1",
        "[::1]",
        "169.254.169.254",
        "metadata.example.com",
        "xn--bcher-kva.example",
        "2130706433",
    ],
)
def test_hosts_are_not_judged_by_the_parser(host: str) -> None:
    # Whether a host may be reached is the operator's policy (tests/logs/destinations/test_address_policy.py).
    assert isinstance(parse_destination_conf(f"https://{host}/in"), HttpsDestination)


# 127.0.0.1 in fullwidth digits, which IDNA would turn into ASCII digits on the way to the resolver
FULLWIDTH_LOOPBACK = "\uff11\uff12\uff17.\uff10.\uff10.\uff11"


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        (f"https://{FULLWIDTH_LOOPBACK}/in", "ASCII host name"),
        ("https://bücher.example/in", "xn--"),
        ("https://%31%32%37.0.0.1/in", "ASCII host name"),
        ("https://a..b/in", "ASCII host name"),
        ("https://[fe80::1%25eth0]/in", "IPv6"),
        (f"s3://bucket?region=auto&endpoint=http://{FULLWIDTH_LOOPBACK}:8333", "ASCII host name"),
    ],
)
def test_hosts_must_be_ascii_names_or_addresses(conf: str, message: str) -> None:
    assert message in refusal(conf)


def test_at_most_twenty_headers() -> None:
    twenty = "&".join(f"header_X-{number}=v" for number in range(20))
    assert len(parse_destination_conf(f"https://x.example/?{twenty}").headers) == 20  # type: ignore[union-attr]
    assert "more than 20 header_" in refusal(f"https://x.example/?{twenty}&header_X-20=v")


def test_length_limit_is_inclusive() -> None:
    conf = "file:///" + "a" * (MAX_DESTINATION_CONF_LENGTH - len("file:///"))
    assert len(conf) == MAX_DESTINATION_CONF_LENGTH
    parse_destination_conf(conf)


@pytest.mark.parametrize(
    ("when", "expected"),
    [
        (date(2026, 11, 21), "logs/20261121/x{DATEX}"),
        (datetime(2026, 11, 21, 23, 30), "logs/20261121/x{DATEX}"),
        (datetime(2026, 11, 21, 23, 30, tzinfo=timezone(timedelta(hours=-2))), "logs/20261122/x{DATEX}"),
        (datetime(2026, 11, 21, 0, 30, tzinfo=UTC), "logs/20261121/x{DATEX}"),
    ],
)
def test_expand_date(when: date, expected: str) -> None:
    assert expand_date("logs/{DATE}/x{DATEX}", when) == expected
