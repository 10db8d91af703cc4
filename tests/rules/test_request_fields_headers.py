"""Header-derived request fields are the same whether decoded afresh or remembered from an earlier request with the
same header lines, and a request's own fields never leak into another's."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from edgeplane.rules import RequestFields

NAMES = st.sampled_from([b"host", b"user-agent", b"User-Agent", b"referer", b"cookie", b"x-forwarded-for", b"x-a"])
HEADERS = st.lists(st.tuples(NAMES, st.binary(max_size=20).filter(lambda value: b"\n" not in value)), max_size=8)
FIELDS = (
    "http_request_headers",
    "http_request_headers_names",
    "http_request_headers_values",
    "http_user_agent",
    "http_referer",
    "http_x_forwarded_for",
    "http_cookie",
)


def fields(headers: list[tuple[bytes, bytes]]) -> RequestFields:
    return RequestFields.from_http(
        method="POST",
        scheme="http",
        host="localhost",
        raw_path="/v1/mainnet",
        query="",
        headers=list(headers),
        body=b"{}",
        client_ip="127.0.0.1",
        client_port=40000,
        server_port=80,
        http_version="1.1",
    )


def decoded(headers: list[tuple[bytes, bytes]]) -> dict[str, object]:
    """The fields as the header lines say, computed here without the request fields' code."""
    names = [name.decode("utf-8", "surrogateescape").lower() for name, _ in headers]
    values = [value.decode("utf-8", "surrogateescape") for _, value in headers]
    grouped: dict[str, list[str]] = {}
    for name, value in zip(names, values, strict=True):
        grouped.setdefault(name, []).append(value)
    return {
        "http_request_headers": grouped,
        "http_request_headers_names": names,
        "http_request_headers_values": values,
        "http_user_agent": grouped.get("user-agent", [""])[0],
        "http_referer": grouped.get("referer", [""])[0],
        "http_x_forwarded_for": ", ".join(grouped.get("x-forwarded-for", [])),
        "http_cookie": "; ".join(grouped.get("cookie", [])),
    }


@given(st.lists(HEADERS, min_size=1, max_size=6))
def test_remembered_header_fields_are_those_of_the_header_lines(requests: list[list[tuple[bytes, bytes]]]) -> None:
    for headers in requests + requests:  # the second round is answered from memory
        request = fields(headers)
        assert {name: getattr(request, name) for name in FIELDS} == decoded(headers)
