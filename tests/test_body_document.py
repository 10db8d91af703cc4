"""A request body's one JSON reading: parsed on the first ``document()``, never before and never again, with the
parser's reason on every call when the body is not JSON."""

from __future__ import annotations

from typing import Any

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from edgeplane import body_document
from edgeplane.body_document import BodyDocument, NotJson

LOADS = orjson.loads  # the parser itself, not counted


@pytest.fixture
def parsed(monkeypatch: pytest.MonkeyPatch) -> list[bytes]:
    """The bytes each orjson parse of ``edgeplane.body_document`` was given, in order."""
    given_bytes: list[bytes] = []

    def counted(data: bytes) -> Any:
        given_bytes.append(data)
        return LOADS(data)

    monkeypatch.setattr(body_document.orjson, "loads", counted)
    return given_bytes


def test_nothing_is_parsed_until_the_document_is_asked_for(parsed: list[bytes]) -> None:
    body = BodyDocument(b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}')
    assert parsed == []
    assert body.raw == b'{"jsonrpc":"2.0","id":1,"method":"eth_chainId","params":[]}'


def test_the_document_is_parsed_once_and_is_the_same_object_each_time(parsed: list[bytes]) -> None:
    body = BodyDocument(b'{"id":1,"params":[{"to":"0x00"}]}')
    first = body.document()
    assert first == {"id": 1, "params": [{"to": "0x00"}]}
    assert body.document() is first
    assert body.document() is first
    assert parsed == [b'{"id":1,"params":[{"to":"0x00"}]}']


@pytest.mark.parametrize("raw", [b"", b"{", b"not json", b'{"a":}', b"\xff\xfe", b'{"a":1} x', b"1E400"])
def test_a_body_that_is_not_json_raises_the_parsers_reason_on_every_call(parsed: list[bytes], raw: bytes) -> None:
    with pytest.raises(orjson.JSONDecodeError) as direct:
        LOADS(raw)
    body = BodyDocument(raw)
    for _ in range(3):
        with pytest.raises(NotJson) as caught:
            body.document()
        assert caught.value.reason == direct.value.msg
    assert parsed == [raw]


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**64 - 1) | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda children: st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=8), children, max_size=4),
    max_leaves=12,
)


def orjson_reading(raw: bytes) -> tuple[str, Any]:
    try:
        return "document", LOADS(raw)
    except orjson.JSONDecodeError as error:
        return "not JSON", error.msg


def shared_reading(raw: bytes) -> tuple[str, Any]:
    try:
        return "document", BodyDocument(raw).document()
    except NotJson as error:
        return "not JSON", error.reason


@given(st.binary(max_size=64) | json_values.map(orjson.dumps))
def test_the_document_is_orjsons_reading(raw: bytes) -> None:
    assert shared_reading(raw) == orjson_reading(raw)
