"""Fixtures for destination tests: a SeaweedFS S3 server for the session, an HTTPS receiver per test, and a way
to make host names resolve to chosen addresses (no DNS server involved)."""

from __future__ import annotations

import socket
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from tests.support.https_receiver import HttpsReceiver
from tests.support.seaweedfs import SeaweedS3


@pytest.fixture(scope="session")
def seaweed() -> Iterator[SeaweedS3]:
    with SeaweedS3() as server:
        yield server


@pytest.fixture
def receiver() -> Iterator[HttpsReceiver]:
    with HttpsReceiver() as server:
        yield server


@pytest.fixture
def fake_dns(monkeypatch: pytest.MonkeyPatch) -> Callable[[str, str], None]:
    """``fake_dns(name, address)`` makes ``name`` resolve to ``address`` for this test; other names resolve as
    usual."""
    answers: dict[str, str] = {}
    real_getaddrinfo = socket.getaddrinfo

    def getaddrinfo(host: Any, port: Any, family: int = 0, type: int = 0, proto: int = 0, flags: int = 0) -> Any:
        if isinstance(host, str) and host in answers:
            host = answers[host]
        return real_getaddrinfo(host, port, family, type, proto, flags)

    monkeypatch.setattr(socket, "getaddrinfo", getaddrinfo)
    return answers.__setitem__
