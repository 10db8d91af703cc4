"""An Ethereum node stand-in that reads JSON-RPC requests the way Go nodes (geth, erigon) do, and records them.

Go's ``encoding/json`` fills a struct from a JSON object by matching each key to a field name ignoring case (Unicode
simple case folding: ``METHOD``, ``Method`` and ``method`` are one field, and so is ``params`` spelt with a long s,
U+017F), the last matching key winning, and it lets a key repeat. anvil refuses such bodies, so a test against anvil
cannot show what a Go node would run; this stand-in can. It decodes the envelope (``jsonrpc``, ``id``, ``method``,
``params``) and the objects of the params it reads (an ``eth_getLogs`` filter, an ``eth_call`` call object) by
those rules, and strings as Go does (invalid UTF-8 and unpaired surrogate escapes become U+FFFD).

It answers plausibly: ``eth_chainId``, ``eth_blockNumber``, ``eth_getBlockByNumber``, ``eth_getBalance`` (a balance
of its own for every address: ``balance_of``), ``eth_getLogs`` (one log at each end of the range it decoded),
``eth_call`` (the 32-byte ``to`` address it decoded), ``web3_clientVersion`` and a few more; and
``admin_addPeer`` (with ``true``: a request no gateway should ever let through). Every request it decoded is kept in
``received`` (until ``taken``) and ``history``, with the raw body it came in.
"""

from __future__ import annotations

import functools
import hashlib
import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

HEAD = 0x200000  # the block number the stand-in reports as its head
CLIENT_VERSION = "Geth/v1.14.11-stable-f3c696fa/linux-amd64/go1.23.2"

# The struct fields of what the stand-in reads, as geth declares them (json tags).
ENVELOPE_FIELDS = ("jsonrpc", "id", "method", "params", "error", "result")
FILTER_FIELDS = ("blockHash", "fromBlock", "toBlock", "address", "topics")
CALL_FIELDS = (
    "from",
    "to",
    "gas",
    "gasPrice",
    "maxFeePerGas",
    "maxPriorityFeePerGas",
    "value",
    "nonce",
    "data",
    "input",
    "accessList",
    "chainId",
)


class GoObject:
    """A JSON object as Go's decoder meets it: every member in order, repeated names included."""

    __slots__ = ("members",)

    def __init__(self, members: list[tuple[str, Any]]) -> None:
        self.members = members

    def __repr__(self) -> str:
        return f"GoObject({self.members!r})"


# -- Go's reading of JSON ------------------------------------------------------------------------------------------


def go_fold(name: str) -> str:
    """Go's ``foldName``: ASCII letters to upper case, any other character to the smallest character of its simple
    case-folding orbit. Two keys name one struct field exactly when their folds are equal."""
    return "".join(_fold_character(character) for character in name)


@functools.cache
def _fold_character(character: str) -> str:
    if character < "\x80":
        return character.upper()
    return min(_orbits().get(character, {character}))


@functools.cache
def _orbits() -> dict[str, frozenset[str]]:
    """Simple case-folding orbits, approximated by joining every character with its one-character upper and lower
    case (Unicode's data, from which Go's tables are made too). The dotted and dotless i of Turkish fold only to
    themselves in Go, as in Unicode's simple folding."""
    parent: dict[str, str] = {}

    def root(character: str) -> str:
        while parent.get(character, character) != character:
            character = parent[character]
        return character

    special = "\u0130\u0131"
    for code in range(0x20000):
        if 0xD800 <= code <= 0xDFFF:
            continue
        character = chr(code)
        if character in special:
            continue
        for other in (character.upper(), character.lower()):
            if len(other) == 1 and other != character and other not in special:
                first, second = root(character), root(other)
                if first != second:
                    parent[max(first, second)] = min(first, second)
    orbits: dict[str, set[str]] = {}
    for character in parent:
        orbits.setdefault(root(character), {root(character)}).add(character)
    return {member: frozenset(orbit) for orbit in orbits.values() for member in orbit}


def go_loads(raw: bytes | str) -> Any:
    """A JSON document as Go reads it: objects as ``GoObject`` (every member, in order), strings with invalid UTF-8
    and unpaired surrogates replaced by U+FFFD. Raises ``ValueError`` for what Go refuses to read (not JSON, NaN)."""
    text = raw.decode("utf-8", errors="replace") if isinstance(raw, bytes) else raw

    def refuse(constant: str) -> Any:
        raise ValueError(f"not JSON: {constant}")

    return _go_strings(json.loads(text, object_pairs_hook=GoObject, parse_constant=refuse))


def _go_strings(value: Any) -> Any:
    if isinstance(value, str):
        # Paired surrogate escapes were joined by the parser: what is left is unpaired.
        return "".join("\ufffd" if "\ud800" <= character <= "\udfff" else character for character in value)
    if isinstance(value, GoObject):
        return GoObject([(_go_strings(name), _go_strings(member)) for name, member in value.members])
    if isinstance(value, list):
        return [_go_strings(item) for item in value]
    return value


def go_struct(value: Any, fields: tuple[str, ...]) -> dict[str, Any] | None:
    """What a Go struct with these fields holds after decoding ``value``: each key goes to the field whose name it
    equals, else to the one it equals ignoring case; the last key for a field wins; other keys are ignored. None when
    ``value`` is not an object."""
    if not isinstance(value, GoObject):
        return None
    folded = {go_fold(name): name for name in fields}
    decoded: dict[str, Any] = {}
    for key, member in value.members:
        target = key if key in fields else folded.get(go_fold(key))
        if target is not None:
            decoded[target] = member
    return decoded


def go_view(value: Any) -> Any:
    """``value`` as any Go struct reads it: every object as its members by folded name, the last one winning."""
    if isinstance(value, GoObject):
        view: dict[str, Any] = {}
        for key, member in value.members:
            view[go_fold(key)] = go_view(member)
        return view
    if isinstance(value, list):
        return [go_view(item) for item in value]
    return value


def python_view(value: Any) -> Any:
    """``go_view`` of a value Python parsed (plain dicts): equal to ``go_view`` of the same text exactly when no
    object holds two names that Go folds together."""
    if isinstance(value, dict):
        return {go_fold(key): python_view(member) for key, member in value.items()}
    if isinstance(value, list):
        return [python_view(item) for item in value]
    return value


@dataclass(frozen=True, slots=True)
class GoRequest:
    """One request as a Go node decoded it (``params`` and ``id`` as ``go_loads`` reads them)."""

    id: Any
    method: Any
    params: Any
    batch: bool = False


def decode_requests(raw: bytes) -> list[GoRequest]:
    """The requests of a body as geth decodes them: one object, or the items of an array. Raises ``ValueError``
    when the body is not JSON."""
    document = go_loads(raw)
    items = document if isinstance(document, list) else [document]
    requests = []
    for item in items:
        envelope = go_struct(item, ENVELOPE_FIELDS) or {}
        requests.append(
            GoRequest(envelope.get("id"), envelope.get("method"), envelope.get("params"), isinstance(document, list))
        )
    return requests


# -- the node ------------------------------------------------------------------------------------------------------


def balance_of(address: str) -> str:
    """The balance the stand-in reports for ``address`` (one of its own for each address)."""
    digest = hashlib.sha256(address.lower().encode()).digest()
    return hex(int.from_bytes(digest[:8], "big"))


def block_number(value: Any) -> int | None:
    """A block parameter as geth reads it: a tag or a 0x hex number; None when it reads none."""
    if value is None or value in ("latest", "pending", "safe", "finalized"):
        return HEAD
    if value == "earliest":
        return 0
    if isinstance(value, str) and value.startswith("0x") and len(value) > 2:
        try:
            return int(value, 16)
        except ValueError:
            return None
    return None


@dataclass(slots=True)
class Received:
    """A request the stand-in decoded, with the body it came in and what it read from the params."""

    body: bytes
    request: GoRequest
    read: dict[str, Any] = field(default_factory=dict)


# The stand-in's own errors for arguments it cannot read use -32000, as many of geth's do, so that a test can tell
# them from the gateway's -32602.
_BAD_ARGUMENT = -32000


class _Failure(Exception):
    def __init__(self, code: int, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


class GoStyleNode:
    """The stand-in on a loopback port (``url``), in a thread of this process; ``received`` holds what it decoded."""

    def __init__(self) -> None:
        self.received: list[Received] = []
        self.history: list[Received] = []  # everything decoded since the start, never forgotten
        self._lock = threading.Lock()
        node = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def do_POST(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                answer = node.answer(self.rfile.read(length))
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(answer)))
                self.end_headers()
                self.wfile.write(answer)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread: threading.Thread | None = None

    @property
    def url(self) -> str:
        host, port = self._server.server_address[:2]
        return f"http://{host!s}:{port}"

    def start(self) -> GoStyleNode:
        self._thread = threading.Thread(target=self._server.serve_forever, name="go-style-node", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        if self._thread is not None:
            self._thread.join(timeout=5)

    def __enter__(self) -> GoStyleNode:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, traceback: TracebackType | None
    ) -> None:
        self.stop()

    def methods(self) -> list[Any]:
        """The methods of every request decoded since the start, in order."""
        with self._lock:
            return [received.request.method for received in self.history]

    def taken(self) -> list[Received]:
        """Everything decoded so far; forgets it."""
        with self._lock:
            taken, self.received = self.received, []
        return taken

    def answer(self, body: bytes) -> bytes:
        """The node's answer to one HTTP body."""
        try:
            requests = decode_requests(body)
        except ValueError:
            return json.dumps(
                {"jsonrpc": "2.0", "id": None, "error": {"code": -32700, "message": "parse error"}}
            ).encode()
        answers = [self._answer(body, request) for request in requests]
        document: Any = answers if requests and requests[0].batch else answers[0]
        return json.dumps(document).encode()

    def _answer(self, body: bytes, request: GoRequest) -> dict[str, Any]:
        received = Received(body, request)
        with self._lock:
            self.received.append(received)
            self.history.append(received)
        try:
            result = self._result(request, received.read)
        except _Failure as failure:
            return {"jsonrpc": "2.0", "id": request.id, "error": {"code": failure.code, "message": failure.message}}
        return {"jsonrpc": "2.0", "id": request.id, "result": result}

    def _result(self, request: GoRequest, read: dict[str, Any]) -> Any:
        method, params = request.method, request.params
        if not isinstance(method, str) or not method:
            raise _Failure(-32600, "invalid request")
        if params is None:
            params = []
        if not isinstance(params, list):
            raise _Failure(_BAD_ARGUMENT, "non-array args")
        if method == "eth_chainId":
            return "0x1"
        if method == "net_version":
            return "1"
        if method == "web3_clientVersion":
            return CLIENT_VERSION
        if method == "eth_blockNumber":
            return hex(HEAD)
        if method == "eth_getBlockByNumber":
            number = block_number(params[0] if params else None)
            if number is None:
                raise _Failure(_BAD_ARGUMENT, "invalid argument 0: hex string without 0x prefix")
            read["block"] = number
            return {
                "number": hex(number),
                "hash": "0x" + hashlib.sha256(b"%d" % number).hexdigest(),
                "transactions": [],
            }
        if method in ("eth_getBalance", "eth_getTransactionCount", "eth_getCode"):
            address = params[0] if params else None
            if not isinstance(address, str):
                raise _Failure(_BAD_ARGUMENT, "invalid argument 0: not an address")
            read["address"] = address
            return balance_of(address) if method == "eth_getBalance" else "0x0"
        if method == "eth_getLogs":
            query = go_struct(params[0] if params else None, FILTER_FIELDS)
            if query is None:
                raise _Failure(_BAD_ARGUMENT, "invalid argument 0: not a filter object")
            first = block_number(query.get("fromBlock"))
            last = block_number(query.get("toBlock"))
            if first is None or last is None:
                raise _Failure(_BAD_ARGUMENT, "invalid argument 0: invalid block number")
            read.update(query=query, range=(first, last))
            return [{"blockNumber": hex(number), "logIndex": "0x0", "data": "0x"} for number in sorted({first, last})]
        if method in ("eth_call", "eth_estimateGas"):
            call = go_struct(params[0] if params else None, CALL_FIELDS)
            if call is None:
                raise _Failure(_BAD_ARGUMENT, "invalid argument 0: not a call object")
            read["call"] = call
            to = call.get("to")
            return "0x" + (to[2:].lower().rjust(64, "0") if isinstance(to, str) else "0" * 64)
        if method == "admin_addPeer":
            return True
        raise _Failure(-32601, f"the method {method} does not exist/is not available")
