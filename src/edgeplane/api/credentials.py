"""Credentials and ids: the formats of API keys, API tokens and object ids, how new ones are made, and how secrets
are kept at rest (as SHA-256 hashes, never in clear).

They are long random strings (37 hex characters, 40 characters of a 64-letter alphabet), so a fast hash is enough:
there is no password to guess. Comparison is constant-time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
import string

API_KEY_FORMAT = re.compile(r"[0-9a-f]{37}")
API_TOKEN_FORMAT = re.compile(r"[A-Za-z0-9_-]{40}")
OBJECT_ID_FORMAT = re.compile(r"[0-9a-f]{32}")  # users, accounts, zones, tokens

_TOKEN_ALPHABET = string.ascii_letters + string.digits + "_-"


def new_api_key() -> str:
    """A global API key: 37 lowercase hex characters."""
    return secrets.token_hex(19)[:37]


def new_api_token() -> str:
    """An API token: 40 characters of ``[A-Za-z0-9_-]``."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(40))


def new_object_id() -> str:
    """A zone, account, ruleset or rule id: 32 lowercase hex characters."""
    return secrets.token_hex(16)


def secret_hash(secret: str) -> str:
    """The stored form of a secret."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def matches(secret: str, stored_hash: str) -> bool:
    """True when ``secret`` is the one whose hash is stored."""
    return hmac.compare_digest(secret_hash(secret), stored_hash)
