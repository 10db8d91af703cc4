"""Credentials and ids: the formats of API keys, API tokens and object ids, how new ones are made, and how secrets
are kept at rest (as SHA-256 hashes, never in clear).

They are long random strings (37 hex characters, 40 characters of a 64-letter alphabet), so a fast hash is enough:
there is no password to guess. Comparison is constant-time. A password (the dashboard's sign in) is the exception: a
person may choose one some day, so it is kept as a salted scrypt hash, which makes each guess expensive.
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
# scrypt's cost: 16 MiB of memory for each guess (the parameters are stored with each hash, so they can grow).
_SCRYPT_N, _SCRYPT_R, _SCRYPT_P = 2**14, 8, 1


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


def new_password() -> str:
    """A generated password: 24 characters of ``[A-Za-z0-9_-]`` (144 bits), readable and easy to paste."""
    return "".join(secrets.choice(_TOKEN_ALPHABET) for _ in range(24))


def password_hash(password: str) -> str:
    """The stored form of a password: ``scrypt$n$r$p$<salt>$<hash>`` (hex), salted."""
    salt = secrets.token_bytes(16)
    derived = hashlib.scrypt(password.encode("utf-8"), salt=salt, n=_SCRYPT_N, r=_SCRYPT_R, p=_SCRYPT_P, dklen=32)
    return f"scrypt${_SCRYPT_N}${_SCRYPT_R}${_SCRYPT_P}${salt.hex()}${derived.hex()}"


def password_matches(password: str, stored_hash: str) -> bool:
    """True when ``password`` is the one whose ``password_hash`` is stored; False for a malformed stored hash."""
    scheme, _, rest = stored_hash.partition("$")
    parts = rest.split("$")
    if scheme != "scrypt" or len(parts) != 5 or not all(part.isalnum() for part in parts):
        return False
    try:
        n, r, p = (int(part) for part in parts[:3])
        salt, expected = bytes.fromhex(parts[3]), bytes.fromhex(parts[4])
        derived = hashlib.scrypt(
            password.encode("utf-8"), salt=salt, n=n, r=r, p=p, dklen=len(expected), maxmem=256 * 1024 * 1024
        )
    except ValueError:
        return False
    return hmac.compare_digest(derived, expected)
