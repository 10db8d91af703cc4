"""The operator's destination policy: which addresses Logpush destinations may reach (``AddressPolicy``) and the one
directory ``file://`` destinations live under (``file_root``).

The API admits a destination only when the policy allows what its conf says (``admit``: literal addresses,
loopback names, the file root); each destination applies the policy again when it connects or writes (resolved
names, symbolic links), so a job stored before the policy changed is held to the current one.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from urllib.parse import urlsplit

from edgeplane.config import Settings
from edgeplane.logs.destination_conf import Destination, FileDestination, HttpsDestination, S3Destination
from edgeplane.logs.destinations.address_guard import AddressPolicy, ForbiddenAddress
from edgeplane.logs.destinations.file import relative_to_root
from edgeplane.logs.errors import DestinationError

DEFAULT_FILE_ROOT = "destinations"  # under the data directory


@dataclass(frozen=True, slots=True)
class DestinationPolicy:
    """Where destinations may lead. Without a ``file_root`` no ``file://`` destination is admitted."""

    addresses: AddressPolicy = field(default_factory=AddressPolicy)
    file_root: Path | None = None

    @classmethod
    def from_settings(cls, settings: Settings) -> DestinationPolicy:
        """The policy ``logs.destinations`` sets: its ``allowed_networks``, and its ``file_root`` (default
        ``<data dir>/destinations``) made absolute."""
        configured = settings.logs.destinations
        root = configured.file_root if configured.file_root is not None else settings.data_dir / DEFAULT_FILE_ROOT
        return cls(
            addresses=AddressPolicy(tuple(configured.allowed_networks)),
            file_root=Path(root).expanduser().absolute(),
        )

    def admit(self, destination: Destination) -> None:
        """Raises ``DestinationError`` saying why, for a destination whose conf names a refused address or
        loopback name, or a directory outside the file root (or any directory, without a file root). Names are not
        resolved (``check_resolved`` does)."""
        if isinstance(destination, FileDestination):
            if self.file_root is None:
                raise DestinationError("file:// destinations are not enabled on this edgeplane")
            relative_to_root(destination.directory, self.file_root)
            return
        for host, _ in destination_hosts(destination):
            self.addresses.check_host(host)

    def check_resolved(self, destination: Destination) -> None:
        """``admit``, and the names of the destination resolved now: raises ``DestinationError`` when one does not
        resolve to an allowed address (in the same words whether it does not resolve or resolves to a refused
        address)."""
        self.admit(destination)
        for host, port in destination_hosts(destination):
            try:
                self.addresses.resolve_blocking(host, port)
            except ForbiddenAddress as error:
                raise DestinationError(str(error)) from None


def destination_hosts(destination: Destination) -> list[tuple[str, int]]:
    """The hosts (and ports) a destination connects to that its conf chooses: an HTTPS endpoint's, an S3-compatible
    store's ``endpoint=``. None for AWS's own endpoints or a directory."""
    if isinstance(destination, HttpsDestination):
        url = destination.url
    elif isinstance(destination, S3Destination) and destination.endpoint is not None:
        url = destination.endpoint
    else:
        return []
    parts = urlsplit(url)
    return [(parts.hostname or "", parts.port or (443 if parts.scheme == "https" else 80))]
