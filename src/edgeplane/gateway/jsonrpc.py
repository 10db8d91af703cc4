"""The JSON-RPC 2.0 envelope: parsing and checking requests, and writing responses.

This is the one place where gateway errors become wire format. A request must carry ``jsonrpc: "2.0"``, a non-empty
string ``method``, an array ``params`` and an ``id`` that is a number or a string (seed 000 marks all four as
required). A batch is a non-empty array of such requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson

from edgeplane.gateway.errors import GatewayError, InvalidRequest, ParseError

RequestId = int | float | str | None

# The parsed forms below are never changed once made; they are not frozen dataclasses only because those cost twice as
# much to make, and every request makes two of them.


@dataclass(slots=True)
class RpcRequest:
    """One checked JSON-RPC request."""

    id: int | float | str
    method: str
    params: list[Any]


@dataclass(slots=True)
class RejectedItem:
    """A batch item (or the whole body) that failed the envelope checks, with the id to echo when it had one."""

    id: RequestId
    error: GatewayError


@dataclass(slots=True)
class RpcBody:
    """A parsed request body: one request, or the items of a batch in order."""

    is_batch: bool
    items: list[RpcRequest | RejectedItem]


def parse_body(body: bytes, *, max_batch_size: int) -> RpcBody:
    """Parses and checks a request body.

    Raises ``ParseError`` when the body is not JSON and ``InvalidRequest`` when it is neither an object nor a
    non-empty array, or when a batch holds more than ``max_batch_size`` items. Items of a batch that fail the
    checks are returned as ``RejectedItem`` so that the other items are still answered.
    """
    try:
        document = orjson.loads(body)
    except orjson.JSONDecodeError as exc:
        raise ParseError(f"parse error: the body is not valid JSON ({exc.msg})") from None
    if isinstance(document, dict):
        return RpcBody(is_batch=False, items=[check_request(document)])
    if isinstance(document, list):
        if not document:
            raise InvalidRequest("invalid request: an empty batch")
        if len(document) > max_batch_size:
            raise InvalidRequest(
                f"invalid request: a batch of {len(document)} requests exceeds the maximum of {max_batch_size}",
                data={"limit": max_batch_size, "value": len(document)},
            )
        return RpcBody(is_batch=True, items=[check_request(item) for item in document])
    raise InvalidRequest("invalid request: the body must be a JSON object or a non-empty array")


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or isinstance(value, str)


def check_request(item: Any) -> RpcRequest | RejectedItem:
    """Checks one request object against the envelope rules."""
    if not isinstance(item, dict):
        return RejectedItem(None, InvalidRequest("invalid request: a request must be a JSON object"))
    request_id = item.get("id")
    echo_id = request_id if _valid_id(request_id) else None
    problem = _envelope_problem(item)
    if problem is not None:
        return RejectedItem(echo_id, InvalidRequest(f"invalid request: {problem}"))
    assert echo_id is not None  # the envelope check ensured a valid id
    return RpcRequest(id=echo_id, method=item["method"], params=item["params"])


def _envelope_problem(item: dict[str, Any]) -> str | None:
    if "jsonrpc" not in item:
        return 'missing member "jsonrpc"'
    if item["jsonrpc"] != "2.0":
        return '"jsonrpc" must be the string "2.0"'
    if "method" not in item:
        return 'missing member "method"'
    method = item["method"]
    if not isinstance(method, str) or not method:
        return '"method" must be a non-empty string'
    if "params" not in item:
        return 'missing member "params"'
    if not isinstance(item["params"], list):
        return '"params" must be an array'
    if "id" not in item:
        return 'missing member "id"'
    if not _valid_id(item["id"]):
        return '"id" must be a number or a string'
    return None


def error_object(request_id: RequestId, error: GatewayError) -> dict[str, Any]:
    """The response object for a failed request."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}


def result_object(request_id: RequestId, result: Any) -> dict[str, Any]:
    """The response object for a successful request."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def encode(document: Any) -> bytes:
    """Serialises a response document."""
    return orjson.dumps(document)
