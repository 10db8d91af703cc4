"""Destinations: where Logpush batches are uploaded, behind one interface (``Destination``).

``open_destination`` turns a parsed ``destination_conf`` into the uploader for it: ``FileUploader`` (a directory),
``S3Uploader`` (Amazon S3 or an S3-compatible store) or ``HttpsUploader`` (an HTTPS endpoint). Every upload either
returns, confirmed, or raises ``DestinationUnavailable`` (retry later) or ``DestinationRejected`` (the job needs
changing); both are ``DestinationFailure``. Each is held to the operator's ``DestinationPolicy`` (the addresses it may
reach, the directory files live under) when it connects or writes. See ``docs/destinations.md``.
"""

from __future__ import annotations

from pathlib import Path

from edgeplane.logs.destination_conf import FileDestination, HttpsDestination, S3Destination
from edgeplane.logs.destinations.destination import Destination, check_object_name
from edgeplane.logs.destinations.errors import DestinationFailure, DestinationRejected, DestinationUnavailable
from edgeplane.logs.destinations.file import FileUploader
from edgeplane.logs.destinations.https import TIMEOUT, HttpsUploader
from edgeplane.logs.destinations.policy import DestinationPolicy
from edgeplane.logs.destinations.s3 import S3Uploader

__all__ = [
    "Destination",
    "DestinationFailure",
    "DestinationPolicy",
    "DestinationRejected",
    "DestinationUnavailable",
    "FileUploader",
    "HttpsUploader",
    "S3Uploader",
    "check_object_name",
    "open_destination",
]


def open_destination(
    parsed: FileDestination | S3Destination | HttpsDestination,
    *,
    policy: DestinationPolicy,
    ca_bundle: str | Path | None = None,
    timeout: float = TIMEOUT,
) -> Destination:
    """The ``Destination`` for a parsed conf, held to ``policy``. Nothing is contacted yet: connections are made by
    the first upload. ``ca_bundle`` (a PEM file) replaces the system's trust store for an HTTPS destination, and
    ``timeout`` bounds each HTTPS request; both are ignored by the other kinds."""
    if isinstance(parsed, FileDestination):
        return FileUploader(parsed, root=policy.file_root)
    if isinstance(parsed, S3Destination):
        return S3Uploader(parsed, addresses=policy.addresses)
    return HttpsUploader(parsed, addresses=policy.addresses, ca_bundle=ca_bundle, timeout=timeout)
