"""The HTTP request as the SecLang engine sees it: the request line, the header fields in order, and the body.

A plain value object with no parsing: :mod:`edgeplane.seclang.variables` derives ModSecurity's collections from it.
Every field is bytes as sent on the wire (ModSecurity works on bytes), so the engine can be fed by the edge server,
by a test, or by the CRS regression runner without decoding anything first.
"""

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class HttpRequest:
    """One HTTP request: ``target`` is the request-target as sent (origin-form ``/a/b.php?x=1`` or absolute-form),
    ``headers`` are ``(name, value)`` pairs in the order received with names as sent, ``body`` the whole body."""

    method: bytes
    target: bytes
    protocol: bytes
    headers: tuple[tuple[bytes, bytes], ...]
    body: bytes
    remote_addr: str = "127.0.0.1"
