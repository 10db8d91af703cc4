"""ModSecurity's variables of an HTTP request: ARGS, REQUEST_HEADERS, REQUEST_COOKIES, REQUEST_URI, FILES, XML, ...

:class:`RequestVariables` derives from one :class:`~edgeplane.seclang.request.HttpRequest` the collections and
scalar variables a SecLang rule names, with the meaning libmodsecurity 3.0.9 gives them (checked against the installed
library). Nothing here is a general HTTP parser: which parts are decoded, which keep the query or the host, how a
Cookie header splits, which arguments a body adds, are ModSecurity's own rules, written out by hand. Every value is
computed the first time a rule asks for it and then kept: most requests meet only a few collections.

What a rule reads, as ModSecurity 3.0.9 gives it:

- ``REQUEST_URI_RAW`` and ``REQUEST_LINE`` hold the target as sent (fragment included). ``REQUEST_URI`` is the
  target without its ``#fragment``, %-decoded (not ``+``), query included, and for an absolute-form target
  (``http://host/p``) from the path on. ``REQUEST_FILENAME`` is the decoded target cut at the first ``?`` of the
  decoded text (so ``%3F`` cuts it too), the scheme and host of an absolute-form target kept; ``REQUEST_BASENAME`` is
  what follows its last ``/`` or ``\\``. ``QUERY_STRING`` is the raw text after the first ``?``, fragment removed.
- ARGS names and values are ``+``- and %-decoded; query arguments come first, then the body's, repeated names kept.
  A JSON body adds to ARGS (names ``json.…``) but not to ARGS_POST; a multipart body adds its fields to both.
- ``REQUEST_BODY`` holds the raw body whatever the processor, as ModSecurity v3 sets it (v2 set it for urlencoded
  bodies only; the engine hides it after a structured processor, as CRS's regression suite expects).
- ``ARGS_COMBINED_SIZE`` counts query, urlencoded and JSON arguments (names and values), not multipart fields, as
  3.0.9 does. Sizes are plain decimals (ModSecurity prints ``12.000000`` for ARGS_COMBINED_SIZE and leaves the sizes
  empty when there is nothing to count; every numeric operator reads these the same).
- A body longer than ``body_limit`` is cut there and processed as cut (SecRequestBodyLimitAction ProcessPartial),
  with INBOUND_DATA_ERROR=1.
- Argument collections (ARGS and its kin, cookies, files, multipart part headers) hold their first 1,000 members
  (``request_body.ARGUMENTS_LIMIT``, ModSecurity's recommended SecArgumentsLimit); the rest is not inspected. The
  JSON processor's slow path (a body that is not valid JSON) also stops there, with a body error.
- A known scalar always gives one value, empty when ModSecurity leaves it unset (``QUERY_STRING`` of a request
  without a query is ``b""``, as in ModSecurity, where ``&QUERY_STRING`` is 1).
"""

from __future__ import annotations

import re
import secrets
import time
from collections.abc import Callable, Sequence
from typing import Final

from edgeplane.bounded_memo import BoundedMemo
from edgeplane.seclang import request_body
from edgeplane.seclang.request import HttpRequest
from edgeplane.seclang.request_body import JsonBody, MultipartBody, Pairs, XmlBody

_C_SPACE: Final = b" \t\n\v\f\r"
# Collections read up to ``request_body.ARGUMENTS_LIMIT`` members (the first ones, in request order).
_LIMITED: Final = frozenset(
    {
        "ARGS",
        "ARGS_GET",
        "ARGS_POST",
        "ARGS_NAMES",
        "ARGS_GET_NAMES",
        "ARGS_POST_NAMES",
        "REQUEST_COOKIES",
        "REQUEST_COOKIES_NAMES",
        "FILES",
        "FILES_NAMES",
        "MULTIPART_PART_HEADERS",
    }
)
_XML_CONTENT_TYPE: Final = re.compile(rb"(?:application(?:/soap\+|/)|text/)xml")

_BODY_DEPENDENT: Final = frozenset(
    {
        "ARGS",
        "ARGS_POST",
        "ARGS_NAMES",
        "ARGS_POST_NAMES",
        "ARGS_COMBINED_SIZE",
        "FILES",
        "FILES_NAMES",
        "FILES_SIZES",
        "FILES_COMBINED_SIZE",
        "MULTIPART_PART_HEADERS",
        "MULTIPART_NAME",
        "MULTIPART_FILENAME",
        "REQBODY_PROCESSOR",
        "REQBODY_ERROR",
        "REQBODY_ERROR_MSG",
        "REQBODY_PROCESSOR_ERROR",
        "REQBODY_PROCESSOR_ERROR_MSG",
        "URLENCODED_ERROR",
        "XML",
        *request_body.MULTIPART_FLAGS,
    }
)

_EMPTY: Final[Pairs] = ()


def _scalar(value: bytes) -> Pairs:
    return ((b"", value),)


def _names(pairs: Sequence[tuple[bytes, bytes]]) -> Pairs:
    return tuple((name, name) for name, _ in pairs)


def _decimal(number: int) -> bytes:
    return b"%d" % number


class RequestVariables:
    """The variables of one request, each computed on first use and cached. Never raises on request content."""

    __slots__ = ("_body_limit", "_parsed", "_processor", "_query", "_started", "_uri", "_values", "_xpaths", "request")

    def __init__(self, request: HttpRequest, *, body_limit: int = 131072) -> None:
        """``body_limit``: bytes of body inspected (SecRequestBodyLimit); 0 or less inspects the whole body."""
        self.request = request
        self._started = time.monotonic()
        self._body_limit = body_limit
        self._processor: str | None = None  # set by ctl:requestBodyProcessor, else chosen from Content-Type
        self._values: dict[str, Pairs] = {}
        self._xpaths: dict[bytes, Pairs] = {}
        self._uri: tuple[bytes, bytes, bytes, bytes] | None = None
        self._query: tuple[tuple[tuple[bytes, bytes], ...], bool] | None = None
        self._parsed: JsonBody | MultipartBody | XmlBody | tuple[Pairs, bool] | None = None

    # --- the interface the engine uses ---------------------------------------------------------------------------

    def collection(self, name: str) -> Sequence[tuple[bytes, bytes]]:
        """The ``(key, value)`` pairs of the variable ``name`` (upper case) in request order: a collection gives one
        pair per member (for ``*_NAMES`` the name twice), a scalar one pair ``(b"", value)``; an unknown name ().
        ``DURATION`` is the milliseconds since this object was made, read anew at each call."""
        if name == "DURATION":
            return _scalar(b"%.6f" % ((time.monotonic() - self._started) * 1000))
        values = self._values.get(name)
        if values is None:
            computer = _COMPUTERS.get(name)
            if computer is None:
                return _EMPTY
            values = computer(self)
            if len(values) > request_body.ARGUMENTS_LIMIT and name in _LIMITED:
                values = values[: request_body.ARGUMENTS_LIMIT]
            self._values[name] = values
        return values

    def xml(self, xpath: bytes) -> Sequence[tuple[bytes, bytes]]:
        """``XML:<xpath>``: with the XML body processor, the text content of each element the path selects
        (``/*``: all text of the document) or each attribute value (``//@*``: every attribute), keyed by the path.
        Without an XML body, or for a path outside the supported subset, ()."""
        values = self._xpaths.get(xpath)
        if values is None:
            body = self._xml_body()
            values = () if body is None else request_body.select_xpath(body.root, xpath)
            self._xpaths[xpath] = values
        return values

    def set_body_processor(self, name: str) -> None:
        """``ctl:requestBodyProcessor=<name>`` (URLENCODED, MULTIPART, XML or JSON, any case): the body is parsed
        with that processor the next time a variable needs it. Other names change nothing (the engine refuses them
        when it compiles the rule)."""
        processor = name.upper()
        if processor not in request_body.BODY_PROCESSORS or processor == self._body_processor():
            return
        self._processor = processor
        self._parsed = None
        self._xpaths.clear()
        for key in self._values.keys() & _BODY_DEPENDENT:
            del self._values[key]

    # --- request line ---------------------------------------------------------------------------------------------

    def _uri_parts(self) -> tuple[bytes, bytes, bytes, bytes]:
        """REQUEST_URI, REQUEST_FILENAME, REQUEST_BASENAME and QUERY_STRING, computed together."""
        if self._uri is None:
            self._uri = _URI_PARTS(self.request.target)
        return self._uri

    def _query_arguments(self) -> tuple[Pairs, bool]:
        if self._query is None:
            query = self._uri_parts()[3]
            pairs, invalid = request_body.split_arguments(query) if query else ([], False)
            self._query = (tuple(pairs), invalid)
        return self._query

    # --- headers --------------------------------------------------------------------------------------------------

    def _header(self, lower_name: bytes) -> bytes:
        """The first header of that name, or b""."""
        for name, value in self.request.headers:
            if name.lower() == lower_name:
                return value
        return b""

    def _cookies(self) -> Pairs:
        # ModSecurity 3.0.9: split every Cookie header at ";", trim the end of the last piece and the start of each
        # name, skip empty pieces and empty names; a piece without "=" is a name with an empty value; values stay
        # as sent (not decoded, not trimmed).
        cookies: list[tuple[bytes, bytes]] = []
        for header, value in self.request.headers:
            if header.lower() != b"cookie":
                continue
            pieces = value.split(b";")
            if pieces and not pieces[-1]:
                pieces.pop()
            if pieces:
                pieces[-1] = pieces[-1].rstrip(_C_SPACE)
            for piece in pieces:
                name, _, cookie = piece.partition(b"=")
                name = name.lstrip(_C_SPACE)
                if name:
                    cookies.append((name, cookie))
        return tuple(cookies)

    # --- body -----------------------------------------------------------------------------------------------------

    def _body(self) -> bytes:
        body = self.request.body
        return body[: self._body_limit] if self._body_limit > 0 else body

    def _body_cut(self) -> bool:
        return 0 < self._body_limit < len(self.request.body)

    def _content_types(self) -> list[bytes]:
        return [value for name, value in self.request.headers if name.lower() == b"content-type"]

    def _body_processor(self) -> str:
        """The processor ModSecurity's recommended configuration chooses, unless a ctl action chose another:
        multipart/form-data and application/x-www-form-urlencoded by the engine itself, then XML (rule 200000) and
        JSON (rule 200001) by Content-Type rules that run later and so win."""
        if self._processor is not None:
            return self._processor
        chosen = ""
        lowered = [value.lower() for value in self._content_types()]
        for value in lowered:
            if value.startswith(b"multipart/form-data"):
                chosen = request_body.MULTIPART
            if value.startswith(b"application/x-www-form-urlencoded"):
                chosen = request_body.URLENCODED
        if any(_XML_CONTENT_TYPE.match(value) for value in lowered):
            chosen = request_body.XML
        if any(value.startswith(b"application/json") for value in lowered):
            chosen = request_body.JSON
        self._processor = chosen
        return chosen

    def _parsed_body(self) -> JsonBody | MultipartBody | XmlBody | tuple[Pairs, bool] | None:
        if self._parsed is None:
            processor = self._body_processor()
            body = self._body()
            if processor == request_body.URLENCODED:
                pairs, invalid = request_body.split_arguments(body)
                self._parsed = (tuple(pairs), invalid)
            elif processor == request_body.JSON:
                self._parsed = request_body.parse_json(body)
            elif processor == request_body.XML:
                self._parsed = request_body.parse_xml(body)
            elif processor == request_body.MULTIPART:
                # With several Content-Type headers libmodsecurity 3.0.9 reads the boundary from the last one.
                content_types = self._content_types()
                self._parsed = request_body.parse_multipart(content_types[-1] if content_types else b"", body)
        return self._parsed

    def _body_error(self) -> bytes | None:
        parsed = self._parsed_body()
        if parsed is None or isinstance(parsed, tuple):
            return None
        if isinstance(parsed, JsonBody) and parsed.error is not None:
            return parsed.error if parsed.error.startswith(b"JSON") else b"JSON parsing error: " + parsed.error
        if isinstance(parsed, MultipartBody) and parsed.error is not None:
            return b"Multipart parsing error: " + parsed.error
        return parsed.error

    def _body_error_flag(self) -> Pairs:
        if isinstance(self._parsed_body(), tuple):
            return _scalar(b"")  # ModSecurity's urlencoded processor leaves the flag unset
        return _scalar(b"0" if self._body_error() is None else b"1")

    def _multipart(self) -> MultipartBody:
        parsed = self._parsed_body()
        return parsed if isinstance(parsed, MultipartBody) else _NO_MULTIPART

    def _xml_body(self) -> XmlBody | None:
        parsed = self._parsed_body()
        return parsed if isinstance(parsed, XmlBody) else None

    def _body_arguments(self) -> Pairs:
        parsed = self._parsed_body()
        if isinstance(parsed, tuple):
            return parsed[0]
        if isinstance(parsed, (JsonBody, MultipartBody)):
            return parsed.arguments
        return ()

    def _args(self) -> Pairs:
        return self._query_arguments()[0] + self._body_arguments()

    def _args_post(self) -> Pairs:
        return () if isinstance(self._parsed_body(), JsonBody) else self._body_arguments()

    def _args_combined_size(self) -> Pairs:
        counted = self._query_arguments()[0]
        if not isinstance(self._parsed_body(), MultipartBody):
            counted += self._body_arguments()
        return _scalar(_decimal(sum(len(name) + len(value) for name, value in counted)))

    def _urlencoded_error(self) -> Pairs:
        parsed = self._parsed_body()
        invalid = self._query_arguments()[1] or (isinstance(parsed, tuple) and parsed[1])
        return _scalar(b"1" if invalid else b"0")

    def _xml_document(self) -> Pairs:
        body = self._xml_body()
        return () if body is None or body.root is None else _scalar(b"[XML document tree]")


_NO_MULTIPART: Final = MultipartBody()


def _multipart_flag(flag: str) -> Callable[[RequestVariables], Pairs]:
    return lambda v: _scalar(v._multipart().flags.get(flag, b""))


# How each variable is computed, the first time a rule asks for it (the class keeps the result).
_COMPUTERS: Final[dict[str, Callable[[RequestVariables], Pairs]]] = {
    "ARGS": RequestVariables._args,
    "ARGS_GET": lambda v: v._query_arguments()[0],
    "ARGS_POST": RequestVariables._args_post,
    "ARGS_NAMES": lambda v: _names(v.collection("ARGS")),
    "ARGS_GET_NAMES": lambda v: _names(v.collection("ARGS_GET")),
    "ARGS_POST_NAMES": lambda v: _names(v.collection("ARGS_POST")),
    "ARGS_COMBINED_SIZE": RequestVariables._args_combined_size,
    "REQUEST_HEADERS": lambda v: v.request.headers,
    "REQUEST_HEADERS_NAMES": lambda v: _names(v.request.headers),
    "REQUEST_COOKIES": RequestVariables._cookies,
    "REQUEST_COOKIES_NAMES": lambda v: _names(v.collection("REQUEST_COOKIES")),
    "FILES": lambda v: tuple((file.name, file.filename) for file in v._multipart().files),
    "FILES_NAMES": lambda v: tuple((file.name, file.name) for file in v._multipart().files),
    "FILES_SIZES": lambda v: tuple((file.name, _decimal(file.size)) for file in v._multipart().files),
    "FILES_COMBINED_SIZE": lambda v: _scalar(_decimal(sum(file.size for file in v._multipart().files))),
    "MULTIPART_PART_HEADERS": lambda v: v._multipart().part_headers,
    "MULTIPART_NAME": lambda v: tuple((name, name) for name in v._multipart().names),
    "MULTIPART_FILENAME": lambda v: tuple((name, name) for name in v._multipart().filenames),
    "XML": RequestVariables._xml_document,
    "REQUEST_METHOD": lambda v: _scalar(v.request.method),
    "REQUEST_PROTOCOL": lambda v: _scalar(v.request.protocol),
    "REQUEST_LINE": lambda v: _scalar(v.request.method + b" " + v.request.target + b" " + v.request.protocol),
    "REQUEST_URI_RAW": lambda v: _scalar(v.request.target),
    "REQUEST_URI": lambda v: _scalar(v._uri_parts()[0]),
    "REQUEST_FILENAME": lambda v: _scalar(v._uri_parts()[1]),
    "PATH_INFO": lambda v: _scalar(v._uri_parts()[1]),
    "REQUEST_BASENAME": lambda v: _scalar(v._uri_parts()[2]),
    "QUERY_STRING": lambda v: _scalar(v._uri_parts()[3]),
    "REQUEST_BODY": lambda v: _scalar(v._body()),
    "REQUEST_BODY_LENGTH": lambda v: _scalar(_decimal(len(v._body()))),
    "INBOUND_DATA_ERROR": lambda v: _scalar(b"1" if v._body_cut() else b"0"),
    "REQBODY_PROCESSOR": lambda v: _scalar(v._body_processor().encode()),
    "REQBODY_ERROR": RequestVariables._body_error_flag,
    "REQBODY_PROCESSOR_ERROR": RequestVariables._body_error_flag,
    "REQBODY_ERROR_MSG": lambda v: _scalar(v._body_error() or b""),
    "REQBODY_PROCESSOR_ERROR_MSG": lambda v: _scalar(v._body_error() or b""),
    "URLENCODED_ERROR": RequestVariables._urlencoded_error,
    "REMOTE_ADDR": lambda v: _scalar(v.request.remote_addr.encode()),
    "REMOTE_HOST": lambda v: _scalar(v.request.remote_addr.encode()),
    "SERVER_NAME": lambda v: _scalar(v._header(b"host").split(b":", 1)[0]),
    "AUTH_TYPE": lambda v: _scalar(v._header(b"authorization").split(b" ", 1)[0]),
    "UNIQUE_ID": lambda v: _scalar(secrets.token_hex(12).encode()),
    **{flag: _multipart_flag(flag) for flag in request_body.MULTIPART_FLAGS},
}


def _split_target(target: bytes) -> tuple[bytes, bytes, bytes, bytes]:
    """REQUEST_URI, REQUEST_FILENAME, REQUEST_BASENAME and QUERY_STRING of a request target (see the module
    docstring)."""
    target = target.split(b"#", 1)[0]
    decoded = request_body.percent_decode(target, plus_as_space=False)[0]
    _, question, query = target.partition(b"?")
    path = decoded.split(b"?", 1)[0]
    separator = max(path.rfind(b"/"), path.rfind(b"\\"))
    basename = path[separator + 1 :] if separator != -1 else b""
    uri = decoded
    if decoded[:1] != b"/":
        colon = decoded.find(b":")
        if colon != -1 and decoded.startswith(b"//", colon + 1):
            slash = decoded.find(b"/", colon + 3)
            if slash != -1:
                uri = decoded[slash:]
    return (uri, path, basename, query if question else b"")


# Targets recur (a gateway's few paths): their parts are remembered, bounded.
_URI_PARTS: Final[BoundedMemo[bytes, tuple[bytes, bytes, bytes, bytes]]] = BoundedMemo(
    _split_target, max_entries=4096, max_length=2048
)
