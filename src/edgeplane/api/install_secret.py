"""This installation's secret key (``<data dir>/secret.key``, mode 0600): it keys what the control plane derives
rather than stores, such as Logpush ownership challenges. ``edgeplane serve`` creates it before it starts the API
process, so that no two children race to create it."""

from __future__ import annotations

import os
import secrets
from pathlib import Path


def ensure_install_secret(data_dir: Path) -> bytes:
    """This installation's secret key, created on first use. Raises ``OSError`` when the data directory cannot be
    written."""
    data_dir.mkdir(parents=True, exist_ok=True)
    path = data_dir / "secret.key"
    if path.exists():
        return path.read_bytes()
    secret = secrets.token_bytes(32)
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "wb") as file:
        file.write(secret)
    return secret
