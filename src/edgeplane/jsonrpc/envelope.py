"""The JSON-RPC 2.0 envelope: parsing and checking requests, writing the requests the gateway sends to nodes, and
writing responses.

This is the one place where JSON-RPC errors (``RpcError``, the gateway's among them) become wire format. A request
must carry ``jsonrpc: "2.0"``, a non-empty string ``method`` and an ``id`` that is a number or a string; ``params``
is an array and may be omitted, as JSON-RPC 2.0 allows (geth and anvil answer ``eth_chainId`` without it), which
reads as ``[]``: the node receives ``"params":[]``, the same request to every node. A batch is a non-empty array of
such requests. ``parse_body`` checks the request's one JSON reading (``edgeplane.body_document``), which the edge's
firewall may have parsed already.

A request must mean one thing to every JSON reader, because the gateway checks it with one and the node runs it with
another. Go's ``encoding/json`` (geth, erigon) matches object keys to struct fields ignoring case, the last match
winning, while Python's readers keep ``method`` and ``METHOD`` apart and keep the last of two equal keys. So a request
in which one object holds two member names that are equal ignoring case (``method`` and ``METHOD``, ``to`` and
``TO``, ``id`` twice), at any depth, is refused (-32600), and so is one nested deeper than ``MAX_DEPTH`` levels or a
body of more than ``MAX_CONTAINERS`` objects and arrays (bounds on what checking a body costs). And a node never
receives the caller's bytes: ``encode_request`` writes the checked request again, with exactly the four envelope
members (other members of the caller's envelope are dropped).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import orjson

from edgeplane.body_document import BodyDocument, NotJson
from edgeplane.jsonrpc.errors import InvalidRequest, ParseError, RpcError

RequestId = int | float | str | None

# How deep a request may nest (the request object is level 1): far beyond any Ethereum method's params, and within
# what orjson writes back (it refuses about 250 levels).
MAX_DEPTH = 64
# How many objects and arrays one body may hold, a batch's items included: a bound on the cost of the checks below.
MAX_CONTAINERS = 10_000
# Each object or array takes at least two bytes, so only a body longer than this can hold too many.
_LONG_BODY = 2 * MAX_CONTAINERS

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
    error: RpcError


@dataclass(slots=True)
class RpcBody:
    """A parsed request body: one request, or the items of a batch in order."""

    is_batch: bool
    items: list[RpcRequest | RejectedItem]


def parse_body(request_body: BodyDocument, *, max_batch_size: int) -> RpcBody:
    """Checks a request body, reading the document ``request_body`` holds (parsed now if no one parsed it before).

    Raises ``ParseError`` when the body is not JSON and ``InvalidRequest`` when it is neither an object nor a
    non-empty array, or when a batch holds more than ``max_batch_size`` items. Items of a batch that fail the
    checks (the envelope, or a member name repeated ignoring case, or nesting) are returned as ``RejectedItem`` so
    that the other items are still answered.
    """
    try:
        document = request_body.document()
    except NotJson as exc:
        raise ParseError(f"parse error: the body is not valid JSON ({exc.reason})") from None
    body = request_body.raw
    if len(body) > _LONG_BODY and _holds_too_many_containers(body, document):
        raise InvalidRequest(f"invalid request: the body holds more than {MAX_CONTAINERS} objects and arrays")
    if isinstance(document, dict):
        item = check_request(document)
        if isinstance(item, RpcRequest) and not _plainly_unambiguous(body, document, item.params):
            item = _recheck(body, [item])[0]
        return RpcBody(is_batch=False, items=[item])
    if isinstance(document, list):
        if not document:
            raise InvalidRequest("invalid request: an empty batch")
        if len(document) > max_batch_size:
            raise InvalidRequest(
                f"invalid request: a batch of {len(document)} requests exceeds the maximum of {max_batch_size}",
                data={"limit": max_batch_size, "value": len(document)},
            )
        items = [check_request(item) for item in document]
        members = _members(document, 0)
        if members < 0 or members != body.count(b":"):
            items = _recheck(body, items)
        return RpcBody(is_batch=True, items=items)
    raise InvalidRequest("invalid request: the body must be a JSON object or a non-empty array")


def _valid_id(value: Any) -> bool:
    return (isinstance(value, int | float) and not isinstance(value, bool)) or isinstance(value, str)


def check_request(item: Any) -> RpcRequest | RejectedItem:
    """Checks one request object against the envelope rules (not for repeated member names: ``parse_body`` checks
    those, on the body's text)."""
    if not isinstance(item, dict):
        return RejectedItem(None, InvalidRequest("invalid request: a request must be a JSON object"))
    request_id = item.get("id")
    echo_id = request_id if _valid_id(request_id) else None
    problem = _envelope_problem(item)
    if problem is not None:
        return RejectedItem(echo_id, InvalidRequest(f"invalid request: {problem}"))
    assert echo_id is not None  # the envelope check ensured a valid id
    return RpcRequest(id=echo_id, method=item["method"], params=item.get("params", []))


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
        if any(name.casefold() == "params" for name in item):
            # A Go node would read "Params" as the params; the gateway would read none: one meaning only.
            return '"params" spelt in another case'
    elif not isinstance(item["params"], list):
        return '"params" must be an array'
    if "id" not in item:
        return 'missing member "id"'
    if not _valid_id(item["id"]):
        return '"id" must be a number or a string'
    return None


# -- member names repeated ignoring case --------------------------------------------------------------------------
#
# The parsed document cannot show two equal names (the parser kept the last), so the body's text is counted: every
# member name is followed by a colon, so when the body holds no more colons than the parsed objects hold members, no
# name was repeated. The parsed objects show names equal ignoring case. When either check fails (a colon inside a
# string, say), the body is read again by a parser that shows every object's names (``_recheck``): slower, but rare.
# Names are compared by ``str.casefold``, which folds all that Go's ``encoding/json`` folds (the long s, U+017F, to
# "s" and the Kelvin sign to "k" among them), and a little more.


# Member names of the objects Ethereum's methods take (call and transaction objects, access lists, filters, state
# and block overrides, authorizations, tracer options): distinct ignoring case, so an object whose names are all
# among them needs no folding. A shortcut only: any other name is folded.
_COMMON_NAMES = [
    "jsonrpc",
    "id",
    "method",
    "params",
    "type",
    "nonce",
    "to",
    "from",
    "gas",
    "value",
    "input",
    "data",
    "gasPrice",
    "maxPriorityFeePerGas",
    "maxFeePerGas",
    "maxFeePerBlobGas",
    "accessList",
    "blobVersionedHashes",
    "blobs",
    "chainId",
    "authorizationList",
    "address",
    "storageKeys",
    "yParity",
    "r",
    "s",
    "v",
    "fromBlock",
    "toBlock",
    "topics",
    "blockHash",
    "fromAddress",
    "toAddress",
    "after",
    "count",
    "mode",
    "balance",
    "code",
    "state",
    "stateDiff",
    "movePrecompileToAddress",
    "number",
    "difficulty",
    "time",
    "gasLimit",
    "feeRecipient",
    "prevRandao",
    "baseFeePerGas",
    "blobBaseFee",
    "tracer",
    "tracerConfig",
    "timeout",
    "onlyTopCall",
    "withLog",
]


def _distinct_ignoring_case(names: list[str]) -> frozenset[str]:
    if len({name.casefold() for name in names}) != len(names):
        raise ValueError("names that are equal ignoring case")
    return frozenset(names)


_PLAIN_NAMES = _distinct_ignoring_case(_COMMON_NAMES)


def _plainly_unambiguous(body: bytes, request: dict[str, Any], params: list[Any]) -> bool:
    """True when the cheap checks show that no object of a single request repeats a name ignoring case and that it
    nests within ``MAX_DEPTH``; False when ``_recheck`` must tell."""
    if len(request) != 4:
        members = _members(request, 1)
        return members >= 0 and members == body.count(b":")
    members = 4  # the four envelope members, whose names differ: only the params need a walk
    for child in params:
        kind = type(child)
        if kind is dict or kind is list:
            inner = _members(child, 3)
            if inner < 0:
                return False
            members += inner
    return members == body.count(b":")


def _holds_too_many_containers(body: bytes, document: Any) -> bool:
    if body.count(b"{") + body.count(b"[") <= MAX_CONTAINERS or not isinstance(document, dict | list):
        return False
    pending: list[Any] = [document]
    counted = 0
    while pending:
        value = pending.pop()
        counted += 1
        if counted > MAX_CONTAINERS:
            return True
        children = value.values() if type(value) is dict else value
        pending.extend(child for child in children if type(child) is dict or type(child) is list)
    return False


def _members(value: list[Any] | dict[str, Any], depth: int) -> int:
    """How many members the objects in ``value`` hold, at every depth; -1 when one holds two names that are equal
    ignoring case, or when ``value`` (at ``depth``) nests deeper than ``MAX_DEPTH``."""
    if depth > MAX_DEPTH:
        return -1
    if type(value) is dict:
        count = len(value)
        if count > 1 and not _PLAIN_NAMES.issuperset(value) and len(set(map(str.casefold, value))) != count:
            return -1
        children: Any = value.values()
    else:
        count = 0
        children = value
    for child in children:
        kind = type(child)
        if kind is dict or kind is list:
            inner = _members(child, depth + 1)
            if inner < 0:
                return -1
            count += inner
    return count


class _Repeated(dict[str, Any]):
    """An object in which two member names are equal ignoring case (``names``: the first two such)."""

    __slots__ = ("names", "pairs")

    def __init__(self, pairs: list[tuple[str, Any]], names: tuple[str, str]) -> None:
        super().__init__(pairs)
        self.pairs = pairs
        self.names = names


def _object(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    seen: dict[str, str] = {}
    for name, _ in pairs:
        folded = name.casefold()
        first = seen.get(folded)
        if first is not None:
            return _Repeated(pairs, (first, name))
        seen[folded] = name
    return dict(pairs)


def _recheck(body: bytes, items: list[RpcRequest | RejectedItem]) -> list[RpcRequest | RejectedItem]:
    """``items`` with each request that holds an object with two names equal ignoring case, or nests too deep,
    refused. Reads the body with a parser that shows every object's names. Raises ``InvalidRequest`` when the body
    nests too deep for that parser."""
    try:
        document = json.loads(body.decode(), object_pairs_hook=_object)
    except RecursionError:
        raise InvalidRequest(f"invalid request: nested deeper than {MAX_DEPTH} levels") from None
    except ValueError:  # not reached: the body parsed once already
        raise ParseError("parse error: the body is not valid JSON") from None
    documents = document if isinstance(document, list) else [document]
    if len(documents) != len(items):
        raise InvalidRequest("invalid request: the body reads differently to different JSON parsers")
    checked: list[RpcRequest | RejectedItem] = []
    for item, read in zip(items, documents, strict=True):
        problem = _problem(read, 1) if isinstance(item, RpcRequest) else None
        if problem is None:
            checked.append(item)
        else:
            checked.append(RejectedItem(item.id if _id_is_plain(read) else None, InvalidRequest(problem)))
    return checked


def _problem(value: Any, depth: int) -> str | None:
    """What makes ``value`` (read by ``_recheck``, at ``depth``) ambiguous, or None."""
    if depth > MAX_DEPTH:
        return f"invalid request: nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, _Repeated):
        first, second = (_quote(name) for name in value.names)
        if first == second:
            return f"invalid request: the member name {first} appears twice in one object"
        return f"invalid request: the member names {first} and {second} of one object are equal ignoring case"
    children = value.values() if isinstance(value, dict) else value if isinstance(value, list) else ()
    for child in children:
        problem = _problem(child, depth + 1)
        if problem is not None:
            return problem
    return None


def _id_is_plain(request: Any) -> bool:
    """Whether the request object names its id once (so that a refusal may echo it)."""
    if not isinstance(request, _Repeated):
        return True
    return sum(1 for name, _ in request.pairs if name.casefold() == "id") == 1


def _quote(name: str) -> str:
    shown = name if len(name) <= 40 else name[:37] + "..."
    return orjson.dumps(shown).decode()


def encode_request(request: RpcRequest, params: bytes | None = None) -> bytes:
    """The request as the gateway sends it to a node: the four envelope members, written from the checked request
    (never the caller's bytes), with the caller's id so that the node's answer echoes it. ``params``: the params
    already encoded (the response cache's key holds them)."""
    return (
        b'{"jsonrpc":"2.0","id":'
        + orjson.dumps(request.id)
        + b',"method":'
        + orjson.dumps(request.method)
        + b',"params":'
        + (orjson.dumps(request.params) if params is None else params)
        + b"}"
    )


def error_object(request_id: RequestId, error: RpcError) -> dict[str, Any]:
    """The response object for a failed request."""
    return {"jsonrpc": "2.0", "id": request_id, "error": error.to_error_object()}


def result_object(request_id: RequestId, result: Any) -> dict[str, Any]:
    """The response object for a successful request."""
    return {"jsonrpc": "2.0", "id": request_id, "result": result}


def encode(document: Any) -> bytes:
    """Serialises a response document."""
    return orjson.dumps(document)
