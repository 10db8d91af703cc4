"""Requests the Rules-language tests and benchmark evaluate expressions on."""

from __future__ import annotations

from edgeplane.rules import RequestFields


def make_request(**overrides: object) -> RequestFields:
    """A typical API request; keyword arguments replace ``from_http`` arguments."""
    arguments: dict[str, object] = {
        "method": "POST",
        "scheme": "https",
        "host": "api.example.com",
        "raw_path": "/v1/mainnet",
        "query": "id=7&tag=a&tag=b&q=union%20SELECT+1",
        "headers": [
            (b"host", b"api.example.com"),
            (b"user-agent", b"Mozilla/5.0 (X11; Linux x86_64) Firefox/132.0"),
            (b"content-type", b"application/json; charset=utf-8"),
            (b"x-tag", b"one"),
            (b"x-tag", b"two"),
            (b"cookie", b"session=abc; theme=dark"),
        ],
        "body": b'{"jsonrpc":"2.0","method":"eth_call","id":1,"params":[{"to":"0x00"}]}',
        "client_ip": "203.0.113.9",
        "server_port": 443,
        "country": "DE",
        "asn": 3320,
        "ray_id": "8f0c0a1b2c3d4e5f",
    }
    arguments.update(overrides)
    return RequestFields.from_http(**arguments)  # type: ignore[arg-type]
