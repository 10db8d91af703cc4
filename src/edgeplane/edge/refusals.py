"""The edge's refusals in JSON-RPC's words: the answer to each ``Refusal`` of the HTTP server, and the shape of
every refusal the router makes itself.

Why here and not in the server: ``HttpServer`` and ``HttpConnection`` know HTTP only (what they refuse and its
status); what a refusal says is the application's, and this edge speaks JSON-RPC, so each refusal is a JSON-RPC error
object with ``id: null`` (code -32600, or -32603 for the 500 that replaces a handler's exception) whose message says
what to send instead. ``EdgeRouter.refusal_answer`` gives these answers to the server; tests that run the server with
a handler of their own borrow them to see the bytes a client sees.
"""

from __future__ import annotations

from edgeplane.edge.http_connection import MAX_PIPELINED, HttpLimits, Refusal
from edgeplane.edge.http_messages import EdgeRequest, EdgeResponse
from edgeplane.jsonrpc.envelope import encode
from edgeplane.jsonrpc.errors import INTERNAL_ERROR, INVALID_REQUEST

__all__ = ["jsonrpc_error", "refusal_answer"]


def jsonrpc_error(
    status: int, code: int, message: str, *, headers: tuple[tuple[bytes, bytes], ...] = ()
) -> EdgeResponse:
    """An HTTP answer whose body is a JSON-RPC error object with ``id: null``."""
    body = encode({"jsonrpc": "2.0", "id": None, "error": {"code": code, "message": message}})
    return EdgeResponse(status, body, headers=headers)


# The answers that do not depend on the server's limits or on the request, made once.
_FIXED: dict[Refusal, EdgeResponse] = {
    Refusal.MALFORMED: jsonrpc_error(400, INVALID_REQUEST, "malformed HTTP request"),
    Refusal.BAD_TARGET: jsonrpc_error(
        400,
        INVALID_REQUEST,
        "malformed request target; send a path (/v1/<network>) or an http:// URL, without a fragment",
    ),
    Refusal.NO_HOST: jsonrpc_error(400, INVALID_REQUEST, "an HTTP/1.1 request needs one Host header"),
    Refusal.VERSION_NOT_SUPPORTED: jsonrpc_error(505, INVALID_REQUEST, "HTTP version not supported; use HTTP/1.1"),
    Refusal.UPGRADE: jsonrpc_error(501, INVALID_REQUEST, "CONNECT and protocol upgrades are not implemented"),
    Refusal.CHUNKED: jsonrpc_error(
        411, INVALID_REQUEST, "chunked request bodies are not accepted; send the body with Content-Length"
    ),
    Refusal.TRANSFER_CODING: jsonrpc_error(
        501, INVALID_REQUEST, "transfer coding not implemented; send the body with Content-Length"
    ),
    Refusal.TOO_MANY_PIPELINED: jsonrpc_error(
        429, INVALID_REQUEST, f"more than {MAX_PIPELINED} pipelined requests; wait for answers before sending more"
    ),
    Refusal.TIMED_OUT: jsonrpc_error(408, INVALID_REQUEST, "the request did not arrive in time"),
    Refusal.TOO_MANY_CONNECTIONS: jsonrpc_error(503, INVALID_REQUEST, "too many connections; try again later"),
    Refusal.HANDLER_FAILED: jsonrpc_error(500, INTERNAL_ERROR, "internal error"),
}


def refusal_answer(refusal: Refusal, request: EdgeRequest | None, limits: HttpLimits) -> EdgeResponse:
    """The answer to what the server refuses (``request``, when its head was read), with the status the refusal
    calls for; the sizes in the 413 and 431 messages are the server's ``limits``."""
    fixed = _FIXED.get(refusal)
    if fixed is not None:
        return fixed
    if refusal is Refusal.BODY_TOO_LARGE:
        return jsonrpc_error(413, INVALID_REQUEST, f"request body larger than {limits.max_body_bytes} bytes")
    if refusal is Refusal.HEAD_TOO_LARGE:
        return jsonrpc_error(
            431,
            INVALID_REQUEST,
            f"request head larger than {limits.max_head_bytes} bytes or {limits.max_headers} headers",
        )
    repeated = None if request is None else request.repeated  # Refusal.REPEATED_HEADER: the header it has twice
    assert repeated is not None
    return jsonrpc_error(400, INVALID_REQUEST, f"more than one {repeated.decode('latin-1')} header")
