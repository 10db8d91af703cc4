"""A request body and its JSON document, parsed at most once: the one reading of a body that the edge's readers share.

The edge makes one ``BodyDocument`` per request and hands it to each part that reads the body as JSON: the firewall's
attack scores (the strings of a JSON body), the gateway (the JSON-RPC envelope) and the firewall's refusal (the id it
echoes). The body is parsed by orjson on the first ``document()`` and never again, so a request none of them reads
as JSON parses nothing, and one that several read is parsed once.

It sits below both the Rules language's request fields and the JSON-RPC envelope, which carry it without importing
each other. Not every reading of a body is this one: the SecLang engine reads a JSON body as ModSecurity does
(``edgeplane.seclang.request_body``), and the gateway reads a body again when its one reading may hide an ambiguity
(``edgeplane.jsonrpc.envelope``).
"""

from __future__ import annotations

from typing import Any, Final

import orjson

# What ``BodyDocument._document`` holds before the body is parsed, and after it failed to parse.
_UNREAD: Final = object()
_NOT_JSON: Final = object()


class NotJson(ValueError):
    """The body is not JSON; ``reason`` is the parser's account of why."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class BodyDocument:
    """A request body (``raw``, as read) and its JSON document, parsed on the first ``document()``. Belongs to one
    request; not for sharing between threads."""

    __slots__ = ("_document", "_reason", "raw")

    _reason: str  # the parser's, set when the body fails to parse

    def __init__(self, raw: bytes) -> None:
        self.raw = raw
        self._document: Any = _UNREAD

    def document(self) -> Any:
        """The body's JSON document (orjson's reading: the last of two equal member names wins), parsed on the first
        call and the same object on every later one; readers must not change it. Raises ``NotJson`` on every call
        when the body is not JSON."""
        document = self._document
        if document is _UNREAD:
            try:
                document = orjson.loads(self.raw)
            except orjson.JSONDecodeError as error:
                self._reason = error.msg
                document = _NOT_JSON
            self._document = document
        if document is _NOT_JSON:
            raise NotJson(self._reason)
        return document
