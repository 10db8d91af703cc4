"""Secrets at rest: API keys and token values are stored as SHA-256 hashes, never in clear.

They are long random strings (37 hex characters, 40 characters of a 64-letter alphabet), so a fast hash is enough:
there is no password to guess. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re

API_KEY_FORMAT = re.compile(r"[0-9a-f]{37}")
API_TOKEN_FORMAT = re.compile(r"[A-Za-z0-9_-]{40}")
OBJECT_ID_FORMAT = re.compile(r"[0-9a-f]{32}")  # users, accounts, zones, tokens


def secret_hash(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """True when ``secret`` is the one whose hash is stored."""
    return hmac.compare_digest(secret_hash(secret), stored_hash)
