"""What an HTTP status or a Retry-After header means for delivery."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from edgeplane.logs.destinations import DestinationRejected, DestinationUnavailable
from edgeplane.logs.destinations.errors import failure_for_status, parse_retry_after


@pytest.mark.parametrize(
    ("status", "failure"),
    [
        (500, DestinationUnavailable),
        (503, DestinationUnavailable),
        (599, DestinationUnavailable),
        (408, DestinationUnavailable),
        (425, DestinationUnavailable),
        (429, DestinationUnavailable),
        (300, DestinationRejected),
        (400, DestinationRejected),
        (401, DestinationRejected),
        (403, DestinationRejected),
        (404, DestinationRejected),
        (409, DestinationRejected),
    ],
)
def test_status_classification(status: int, failure: type[Exception]) -> None:
    assert type(failure_for_status(status, "m")) is failure


NOW = datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC)


@pytest.mark.parametrize(
    ("header", "seconds"),
    [
        (None, None),
        ("", None),
        ("120", 120.0),
        (" 5 ", 5.0),
        ("Tue, 02 Jan 2024 03:04:35 GMT", 30.0),
        ("Tue, 02 Jan 2024 03:00:00 GMT", 0.0),  # in the past: retry now
        ("soon", None),
        ("-1", None),
    ],
)
def test_retry_after(header: str | None, seconds: float | None) -> None:
    assert parse_retry_after(header, now=NOW) == seconds
