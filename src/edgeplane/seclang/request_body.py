"""Request body processors: urlencoded, JSON, multipart/form-data and XML, parsed as libmodsecurity 3.0.9 parses them.

ModSecurity does not hand a body to a generic parser: each processor has its own rules of what becomes an argument,
under which name, and which oddities only raise a flag (MULTIPART_STRICT_ERROR and its parts) instead of an error.
CRS reads those names and flags, so they are reproduced here by hand from ModSecurity v3's behaviour (checked against
the installed libmodsecurity 3.0.9); no library parses a body into ModSecurity's collections. Standard parsers still
do the parts that are standard: ``json`` (with a small fallback that keeps what came before a syntax error, as
ModSecurity's streaming parser does) and ``pyexpat`` for XML.

So a JSON body is read here a second time, not taken from the parse the edge shares (``edgeplane.body_document``):
that parse is orjson's view, this is ModSecurity's. orjson keeps only the last of two equal member names (ModSecurity
makes an argument of each, in order), turns numbers into values (``2.50`` becomes ``2.5``, ``1E400`` an error, where
ModSecurity keeps the text sent), and rejects a body that ModSecurity reads in part (up to a syntax error) or whole
(a document followed by an unterminated string).

Every function here is total: it takes any bytes and never raises. A body ModSecurity would reject comes back with
``error`` set (REQBODY_ERROR=1 and the message in REQBODY_ERROR_MSG) and whatever was parsed before the error.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from typing import Final
from xml.parsers import expat

URLENCODED: Final = "URLENCODED"
MULTIPART: Final = "MULTIPART"
XML: Final = "XML"
JSON: Final = "JSON"
BODY_PROCESSORS: Final = frozenset({URLENCODED, MULTIPART, XML, JSON})

JSON_DEPTH_LIMIT: Final = 1024
# Arguments read from one body at most (ModSecurity's SecArgumentsLimit, 1000 in its recommended configuration): each
# argument costs every rule that reads ARGS, so a body of many small arguments would cost a worker seconds.
ARGUMENTS_LIMIT: Final = 1000
"""Nesting deeper than this is a body error. ModSecurity 3.0.9 has no such limit (SecRequestBodyJsonDepthLimit came
later, 512 in its recommended configuration); this bound keeps a hostile body from costing quadratic work (each
argument name spells its whole path), far above any real document."""

Pairs = tuple[tuple[bytes, bytes], ...]

# --- urlencoded ---------------------------------------------------------------------------------------------------

_HEX_DIGITS: Final = b"0123456789abcdefABCDEF"
_HEX_PAIRS: Final = {bytes((a, b)): bytes((int(bytes((a, b)), 16),)) for a in _HEX_DIGITS for b in _HEX_DIGITS}
_PERCENT_ESCAPE: Final = re.compile(rb"%[0-9A-Fa-f]{2}")


def _unhex(match: re.Match[bytes]) -> bytes:
    return _HEX_PAIRS[match.group()[1:]]


def percent_decode(data: bytes, *, plus_as_space: bool) -> tuple[bytes, bool]:
    """Decode ``%XX`` escapes (and ``+`` as a space when asked), ModSecurity's non-strict way: an escape that is not
    two hex digits stays as it was. Returns the decoded bytes and whether such an invalid escape was seen."""
    if plus_as_space and b"+" in data:
        data = data.replace(b"+", b" ")
    if b"%" not in data:
        return data, False
    decoded, count = _PERCENT_ESCAPE.subn(_unhex, data)
    return decoded, data.count(b"%") != count


def split_arguments(data: bytes, separator: bytes = b"&") -> tuple[list[tuple[bytes, bytes]], bool]:
    """Split a query string or urlencoded body into ``(name, value)`` pairs as ModSecurity does.

    Pairs are separated by ``&``; an empty piece between two separators is an argument with an empty name and value,
    a trailing separator adds nothing; a piece without ``=`` is a name with an empty value. Names and values are
    ``+``- and %-decoded. Returns the pairs in order and whether an invalid %-escape was seen (URLENCODED_ERROR)."""
    pieces = data.split(separator)
    if pieces and not pieces[-1]:
        pieces.pop()  # ModSecurity's splitter drops one empty piece at the end only
    pairs: list[tuple[bytes, bytes]] = []
    invalid = False
    for piece in pieces:
        name, _, value = piece.partition(b"=")
        name, bad_name = percent_decode(name, plus_as_space=True)
        value, bad_value = percent_decode(value, plus_as_space=True)
        invalid = invalid or bad_name or bad_value
        pairs.append((name, value))
    return pairs, invalid


# --- JSON ---------------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JsonBody:
    """A JSON body flattened into arguments: ``json.a.b``, ``json.list.array_0``, ``json`` for a bare scalar."""

    arguments: Pairs
    error: bytes | None = None


class _Object:
    """A JSON object as its members in order, duplicates kept (the decoder's ``object_pairs_hook``)."""

    __slots__ = ("members",)

    def __init__(self, members: list[tuple[str, object]]) -> None:
        self.members = members


class _DepthExceeded(Exception):
    pass


class _JsonSyntaxError(Exception):
    pass


def _utf8(text: str) -> bytes:
    try:
        return text.encode()
    except UnicodeEncodeError:
        # An escaped lone surrogate (``\\ud800``) has no UTF-8 form; keep its code units as they are.
        return text.encode("utf-8", "surrogatepass")


def _scalar(value: object) -> bytes:
    if value is True:
        return b"true"
    if value is False:
        return b"false"
    if value is None:
        return b""
    return _utf8(str(value))


def _flatten(value: object, key: bytes, out: list[tuple[bytes, bytes]], depth: int, depth_limit: int) -> None:
    """Append the arguments under ``value`` in document order; raises _DepthExceeded (and RecursionError on a
    document deeper than the interpreter allows, which the caller hands to the iterative parser)."""
    if not isinstance(value, (_Object, list)):
        out.append((key, _scalar(value)))
        return
    if depth >= depth_limit:
        raise _DepthExceeded
    depth += 1
    if isinstance(value, _Object):
        for name, member in value.members:
            child = key + b"." + (_utf8(name) if name else b"empty-key")
            if isinstance(member, str):
                out.append((child, _utf8(member)))
            else:
                _flatten(member, child, out, depth, depth_limit)
    else:
        for index, member in enumerate(value):
            child = key + b".array_%d" % index
            if isinstance(member, str):
                out.append((child, _utf8(member)))
            else:
                _flatten(member, child, out, depth, depth_limit)


def _reject_constant(name: str) -> object:
    raise _JsonSyntaxError(f"invalid literal {name}")


_JSON_WHITESPACE: Final = re.compile(r"[ \t\n\r]*")
_JSON_STRING: Final = re.compile(r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*"')
_JSON_NUMBER: Final = re.compile(r"-?(?:0|[1-9][0-9]*)(?:\.[0-9]+)?(?:[eE][-+]?[0-9]+)?")
_JSON_LITERALS: Final[dict[str, bytes]] = {"true": b"true", "false": b"false", "null": b""}
# After a complete document, ModSecurity's parser (yajl) still waits for the end of a string left open at the end of
# the body, and then ends without an error: such a tail is no error here either.
_JSON_UNTERMINATED_STRING: Final = re.compile(
    r'"(?:[^"\\\x00-\x1f]|\\(?:["\\/bfnrt]|u[0-9a-fA-F]{4}))*(?:\\(?:u[0-9a-fA-F]{0,3})?)?'
)


# Numbers stay the text sent (2.50, 1E400); NaN and Infinity are syntax errors, as for ModSecurity's parser.
_JSON_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_Object, parse_float=str, parse_int=str, parse_constant=_reject_constant
)


def parse_json(body: bytes, *, depth_limit: int = JSON_DEPTH_LIMIT) -> JsonBody:
    """Flatten a JSON body as ModSecurity v3 does: each scalar becomes an argument named by its path from ``json``
    (object members ``.name``, an empty member name ``.empty-key``, array elements ``.array_<i>``), numbers as sent,
    ``true``/``false``, ``null`` as an empty value; empty objects and arrays add nothing. A syntax error, invalid
    UTF-8, a second top-level value or nesting deeper than ``depth_limit`` sets ``error``, keeping the arguments
    before it. An empty body is no error."""
    if not body:
        return JsonBody(())
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError as failure:
        valid = _parse_json_partially(body[: failure.start].decode("utf-8"), depth_limit)
        return JsonBody(valid.arguments, b"JSON parsing error: lexical error: invalid bytes in UTF8 string.")
    out: list[tuple[bytes, bytes]] = []
    try:
        document, end = _JSON_DECODER.raw_decode(text, _JSON_WHITESPACE.match(text).end())  # type: ignore[union-attr]
        rest = text[end:].lstrip(" \t\n\r")
        if rest and not _JSON_UNTERMINATED_STRING.fullmatch(rest):
            raise _JsonSyntaxError("trailing garbage")
        _flatten(document, b"json", out, 0, depth_limit)
    except _DepthExceeded:
        return JsonBody(tuple(out), b"JSON depth limit exceeded")
    except (ValueError, RecursionError, _JsonSyntaxError):
        return _parse_json_partially(text, depth_limit)
    return JsonBody(tuple(out))


def _parse_json_partially(text: str, depth_limit: int) -> JsonBody:
    """The slow path for a body ``json`` rejects: walk it token by token, emitting each scalar as it completes,
    and stop at the first error as ModSecurity's streaming parser does."""
    out: list[tuple[bytes, bytes]] = []
    # Each open container: [is_object, key prefix, next array index, current member key].
    stack: list[list[object]] = []
    position = _JSON_WHITESPACE.match(text, 0).end()  # type: ignore[union-attr]
    done = False

    def current_key() -> bytes:
        if not stack:
            return b"json"
        top = stack[-1]
        prefix = top[1]
        assert isinstance(prefix, bytes)
        if top[0]:
            member = top[3]
            assert isinstance(member, bytes)
            return prefix + b"." + member
        index = top[2]
        assert isinstance(index, int)
        top[2] = index + 1
        return prefix + b".array_%d" % index

    def error(message: str) -> JsonBody:
        return JsonBody(tuple(out), b"JSON parsing error: " + message.encode())

    expect_value = True
    while position < len(text):
        if len(out) >= ARGUMENTS_LIMIT:
            return JsonBody(tuple(out[:ARGUMENTS_LIMIT]), b"JSON parsing error: arguments limit exceeded")
        if done:
            if _JSON_UNTERMINATED_STRING.fullmatch(text, position):
                return JsonBody(tuple(out))
            return error("trailing garbage")
        char = text[position]
        if expect_value:
            if char in "{[":
                if len(stack) >= depth_limit:
                    return JsonBody(tuple(out), b"JSON depth limit exceeded")
                key = current_key()
                stack.append([char == "{", key, 0, b""])
                position = _JSON_WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
                closing = "}" if char == "{" else "]"
                if position < len(text) and text[position] == closing:
                    stack.pop()
                    position += 1
                    expect_value = False
                    done = not stack
                elif char == "{":
                    match = _JSON_STRING.match(text, position)
                    if match is None:
                        return error("object key expected")
                    stack[-1][3] = _utf8(json.loads(match.group())) or b"empty-key"
                    position = _JSON_WHITESPACE.match(text, match.end()).end()  # type: ignore[union-attr]
                    if position >= len(text) or text[position] != ":":
                        return error("':' expected")
                    position += 1
                position = _JSON_WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
                continue
            if char == '"':
                match = _JSON_STRING.match(text, position)
                if match is None:
                    return error("invalid string")
                out.append((current_key(), _utf8(json.loads(match.group()))))
                position = match.end()
            else:
                number = _JSON_NUMBER.match(text, position)
                if number is not None and number.end() > position:
                    out.append((current_key(), _utf8(number.group())))
                    position = number.end()
                else:
                    for literal, value in _JSON_LITERALS.items():
                        if text.startswith(literal, position):
                            out.append((current_key(), value))
                            position += len(literal)
                            break
                    else:
                        return error("invalid char in json text")
            expect_value = False
            done = not stack
        else:
            if not stack:
                return error("trailing garbage")
            top = stack[-1]
            closing = "}" if top[0] else "]"
            if char == closing:
                stack.pop()
                position += 1
                done = not stack
            elif char == ",":
                position = _JSON_WHITESPACE.match(text, position + 1).end()  # type: ignore[union-attr]
                if top[0]:
                    match = _JSON_STRING.match(text, position)
                    if match is None:
                        return error("object key expected")
                    top[3] = _utf8(json.loads(match.group())) or b"empty-key"
                    position = _JSON_WHITESPACE.match(text, match.end()).end()  # type: ignore[union-attr]
                    if position >= len(text) or text[position] != ":":
                        return error("':' expected")
                    position += 1
                expect_value = True
            else:
                return error("',' or closing bracket expected")
        position = _JSON_WHITESPACE.match(text, position).end()  # type: ignore[union-attr]
    if not done:
        return error("premature EOF")
    return JsonBody(tuple(out))  # a valid document too deep for the fast path


# --- multipart/form-data ------------------------------------------------------------------------------------------

_MULTIPART_LINE: Final = 4096
"""ModSecurity's MULTIPART_BUF_SIZE: a body is read in lines of at most this many bytes (longer lines are split)."""

_C_SPACE: Final = b" \t\n\v\f\r"
_TOKEN_SEPARATORS: Final = frozenset(b'()<>@,;:\\"/[]?=')
_BOUNDARY_CHARACTERS: Final = frozenset(b"0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz'()+_,-./:=? ")

MULTIPART_FLAGS: Final = (
    "MULTIPART_BOUNDARY_QUOTED",
    "MULTIPART_BOUNDARY_WHITESPACE",
    "MULTIPART_DATA_AFTER",
    "MULTIPART_DATA_BEFORE",
    "MULTIPART_FILE_LIMIT_EXCEEDED",
    "MULTIPART_HEADER_FOLDING",
    "MULTIPART_INVALID_HEADER_FOLDING",
    "MULTIPART_INVALID_PART",
    "MULTIPART_INVALID_QUOTING",
    "MULTIPART_LF_LINE",
    "MULTIPART_CRLF_LF_LINES",
    "MULTIPART_MISSING_SEMICOLON",
    "MULTIPART_UNMATCHED_BOUNDARY",
    "MULTIPART_STRICT_ERROR",
)
"""The flag variables a multipart body sets, each to ``0``/``1`` (MULTIPART_UNMATCHED_BOUNDARY also ``2``)."""


@dataclass(frozen=True, slots=True)
class FilePart:
    """A part with a non-empty ``filename``: FILES (filename), FILES_NAMES (name), FILES_SIZES (size)."""

    name: bytes
    filename: bytes
    size: int


@dataclass(frozen=True, slots=True)
class MultipartBody:
    """What a multipart/form-data body gives: form fields (ARGS_POST), files, each part's header lines
    (MULTIPART_PART_HEADERS, keyed by part name), the names and filenames seen (MULTIPART_NAME, MULTIPART_FILENAME),
    the flag variables and the error, if any."""

    arguments: Pairs = ()
    files: tuple[FilePart, ...] = ()
    part_headers: Pairs = ()
    names: tuple[bytes, ...] = ()
    filenames: tuple[bytes, ...] = ()
    flags: dict[str, bytes] = field(default_factory=dict)
    error: bytes | None = None


class _MultipartError(Exception):
    def __init__(self, message: str | bytes) -> None:
        super().__init__(message)
        self.message = message.encode("latin-1") if isinstance(message, str) else message


class _Part:
    __slots__ = (
        "data",
        "filename",
        "header_index",
        "header_lines",
        "headers",
        "is_file",
        "last_header",
        "name",
        "size",
    )

    def __init__(self) -> None:
        self.name = b""
        self.filename = b""
        self.is_file = False
        self.headers: dict[bytes, list[bytes]] = {}  # lower-case name -> [name as sent, value]
        self.header_lines: list[bytes] = []
        self.header_index: dict[bytes, int] = {}
        self.last_header = b""
        self.data: list[bytes] = []
        self.size = 0


def _line_end(body: bytes, position: int) -> tuple[int, bool] | None:
    """Where the line at ``position`` ends as ModSecurity's line buffer cuts it: after its LF, or after 4096 bytes
    (a CR never ends a full buffer; it starts the next one), and whether it filled the buffer. None for a last
    piece that has no LF and does not fill the buffer: ModSecurity never processes it."""
    newline = body.find(b"\n", position, position + _MULTIPART_LINE)
    if newline != -1:
        return newline + 1, False
    end = position + _MULTIPART_LINE
    if end > len(body):
        return None
    if body[end - 1] == 0x0D:
        end -= 1
    return end, True


_LINE_ENDING: Final = re.compile(rb"\r?\n")


class _MultipartParser:
    """One multipart body, parsed line by line with ModSecurity's states: before the first boundary, a part's
    headers, a part's data, after the final boundary."""

    def __init__(self, boundary: bytes, flags: dict[str, int]) -> None:
        self.boundary = boundary
        self.flags = flags
        self.part: _Part | None = None
        self.in_data = False
        self.parts: list[_Part] = []
        self.part_headers: list[tuple[bytes, bytes]] = []
        self.names: list[bytes] = []
        self.filenames: list[bytes] = []
        self.boundaries = 0
        self.complete = False
        self.pending_line_end = b""
        self.previous_line_end = b""
        self.message: bytes | None = None  # the last error message; a part header error does not stop parsing
        self.tail: bytes | None = None  # the unterminated last line, if the line before it ended

    def feed(self, body: bytes) -> None:
        """Parse every complete line of ``body``; raises _MultipartError on an error that stops parsing."""
        contains_line = True
        position = 0
        length = len(body)
        marker = b"--" + self.boundary
        while position < length:
            if contains_line and (self.in_data or self.part is None) and not body.startswith(b"--", position):
                # A run of lines none of which starts with "--" nor holds the boundary cannot change state: it is
                # read at once, with the same result as line by line.
                next_dashes = body.find(b"\n--", position)
                end = next_dashes + 1 if next_dashes != -1 else body.rfind(b"\n", position) + 1
                if end > position and body.find(marker, position, end) == -1:
                    self._data_lines(body[position:end])
                    position = end
                    continue
            found = _line_end(body, position)
            if found is None:
                break
            end, filled = found
            line = body[position:end]
            self._line(line, filled, contains_line)
            contains_line = line.endswith(b"\n")
            position = end
            if self.complete and position < length:
                self.flags["MULTIPART_DATA_AFTER"] = 1
                return
        self.tail = body[position:] if contains_line else None

    def finish(self) -> None:
        """End of the body: the final boundary may end it without a line ending; without one the body is
        incomplete (an error, and no part is reported)."""
        if self.complete:
            return
        if self.boundaries and self.tail == b"--" + self.boundary + b"--":
            self._finish_part()
            self.complete = True
        elif self.boundaries:
            self.message = b"Multipart: Final boundary missing."
        else:
            self.message = b"Multipart: No boundaries found in payload."

    def _line(self, line: bytes, filled: bool, contains_line: bool) -> None:
        try:
            self._read_line(line, filled, contains_line)
        finally:
            self.previous_line_end = b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""

    def _read_line(self, line: bytes, filled: bool, contains_line: bool) -> None:
        text = line.split(b"\0", 1)[0]  # boundary tests read the line as a C string
        boundary = self.boundary
        if contains_line and len(text) > 3 and text.startswith(b"--"):
            if text.startswith(boundary, 2) and self.part is not None and not self.in_data:
                # ModSecurity 3.0.9: a boundary while a part's headers are still open does not end the part; the
                # line is read as one more header line.
                self.flags["MULTIPART_INVALID_PART"] = 1
            elif text.startswith(boundary, 2):
                if self.boundaries:
                    self.flags["MULTIPART_UNMATCHED_BOUNDARY"] = 2
                if self.previous_line_end:
                    # The ending of the line before a boundary counts too (it belongs to the boundary delimiter).
                    self.flags["MULTIPART_LF_LINE" if self.previous_line_end == b"\n" else "_CRLF_LINE"] = 1
                end = text[2 + len(boundary) :]
                final = end.startswith(b"--")
                if final:
                    end = end[2:]
                    if self.complete:
                        raise _MultipartError("Multipart: Invalid boundary (final duplicate).")
                if end not in (b"\r\n", b"\n"):
                    raise _MultipartError(b"Multipart: Invalid boundary: " + text)
                self.flags["MULTIPART_LF_LINE" if end == b"\n" else "_CRLF_LINE"] = 1
                self._finish_part()
                if final:
                    self.complete = True
                else:
                    self.part = _Part()
                    self.in_data = False
                    self.pending_line_end = b""
                self.boundaries += 1
                return
            else:
                if self.flags["MULTIPART_BOUNDARY_QUOTED"] and text.startswith(b'"' + boundary, 2):
                    raise _MultipartError("Multipart: Invalid boundary (quotes).")
                stripped = text[2:].lstrip(_C_SPACE)
                if len(stripped) != len(text) - 2 and stripped.startswith(boundary):
                    raise _MultipartError("Multipart: Invalid boundary (whitespace).")
                self.flags["MULTIPART_UNMATCHED_BOUNDARY"] = 1
        elif contains_line and b"--" + boundary in line:
            self.flags["MULTIPART_UNMATCHED_BOUNDARY"] = 1
        if self.part is None:
            self.flags["MULTIPART_DATA_BEFORE"] = 1
        elif not self.in_data:
            if filled:
                raise _MultipartError("Multipart: Part header line over 4096 bytes long")
            self._header_line(self.part, line)
        else:
            self._data_line(self.part, line)

    def _soft_error(self, message: str | bytes) -> None:
        self.message = message.encode("latin-1") if isinstance(message, str) else message

    def _header_line(self, part: _Part, line: bytes) -> None:
        """One line of a part's headers. Its errors are soft, as in ModSecurity 3.0.9: they set the error message
        (REQBODY_ERROR) but parsing goes on with the next line, still in the part's headers."""
        if b"\0" in line:
            self._soft_error("Multipart: Nul byte in part headers.")
            return
        if len(line) > 1 and line[-2] == 0x0D:
            self.flags["_CRLF_LINE"] = 1
        else:
            self.flags["MULTIPART_LF_LINE"] = 1
        if line in (b"\r\n", b"\n"):
            disposition = part.headers.get(b"content-disposition")
            if disposition is None:
                self._soft_error("Multipart: Part missing Content-Disposition header.")
                return
            code = self._content_disposition(part, disposition[1])
            if code < 0:
                self._soft_error(b"Multipart: Invalid Content-Disposition header (%d): %s" % (code, disposition[1]))
                return
            if not part.name:
                self._soft_error("Multipart: Content-Disposition header missing name field.")
                return
            if part.filename:
                if b"filename=" not in disposition[1]:
                    self._soft_error("Multipart: Invalid Content-Disposition header (filename).")
                    return
                part.is_file = True
            self.in_data = True
            part.last_header = b""
            return
        if line[0] in _C_SPACE:
            self.flags["MULTIPART_HEADER_FOLDING"] = 1
            prefix_length = len(line) - len(line.lstrip(_C_SPACE))
            if line[:prefix_length].strip(b" \t"):
                self.flags["MULTIPART_INVALID_HEADER_FOLDING"] = 1
            if not part.last_header:
                self._soft_error("Multipart: Invalid part header (folding error).")
                return
            header = part.headers[part.last_header]
            header[1] = header[1] + b" " + line[prefix_length:].rstrip(b"\r\n")
            # The part's header line becomes the unfolded header, without a line ending.
            part.header_lines[part.header_index[part.last_header]] = header[0] + b": " + header[1]
            if len(header[1]) > _MULTIPART_LINE:
                self._soft_error("Multipart: Part header too long.")
                return
            return
        name, colon, value = line.partition(b":")
        if not colon:
            self._soft_error(b"Multipart: Invalid part header (colon missing): " + line)
            return
        if not name:
            self._soft_error("Multipart: Invalid part header (header name missing).")
            return
        key = name.lower()
        if key in part.headers:
            return  # ModSecurity ignores the line without an error message
        part.headers[key] = [name, value.lstrip(b" \t").rstrip(b"\r\n")]
        part.last_header = key
        part.header_index[key] = len(part.header_lines)
        part.header_lines.append(line)

    def _content_disposition(self, part: _Part, value: bytes) -> int:
        """Read ``form-data; name="..."; filename="..."`` with ModSecurity's grammar: a negative code on error."""
        if not value.startswith(b"form-data"):
            return -1
        position = 9
        length = len(value)

        def skip_blanks(at: int) -> int:
            while at < length and value[at] in b" \t":
                at += 1
            return at

        position = skip_blanks(position)
        if position == length:
            return 1
        if value[position] != 0x3B:  # ';'
            return -2
        position += 1
        while position < length:
            position = skip_blanks(position)
            if position == length:
                return -3
            start = position
            while position < length and value[position] not in b"= \t":
                position += 1
            if position == length:
                return -4
            parameter = value[start:position]
            position = skip_blanks(position)
            if position == length:
                return -5
            if value[position] != 0x3D:  # '='
                return -13
            position = skip_blanks(position + 1)
            if position == length:
                return -6
            quote = value[position]
            if quote in b"\"'":
                if quote == 0x27:
                    self.flags["MULTIPART_INVALID_QUOTING"] = 1
                position += 1
                if position == length:
                    return -7
                collected = bytearray()
                while position < length:
                    char = value[position]
                    if char == 0x5C:  # backslash: only the quote and backslash are escaped
                        if position + 1 == length:
                            return -8
                        if value[position + 1] in (quote, 0x5C):
                            position += 1
                    elif char == quote:
                        break
                    collected.append(value[position])
                    position += 1
                position += 1
                parsed = bytes(collected)
            else:
                start = position
                while position < length and 32 < value[position] < 127 and value[position] not in _TOKEN_SEPARATORS:
                    position += 1
                parsed = value[start:position]
            if parameter == b"name":
                if b"'" in parsed:
                    self.flags["MULTIPART_INVALID_QUOTING"] = 1
                self.names.append(parsed)
                if part.name:
                    return -14
                part.name = parsed
            elif parameter == b"filename":
                if b"'" in parsed:
                    self.flags["MULTIPART_INVALID_QUOTING"] = 1
                self.filenames.append(parsed)
                if part.filename:
                    return -15
                part.filename = parsed
            else:
                return -11
            if position < length:
                position = skip_blanks(position)
                if position == length:
                    return 1
                if value[position] != 0x3B:
                    if value[position - 1] in b"'\"":
                        self.flags["MULTIPART_INVALID_QUOTING"] = 1
                    return -12
                position += 1
        return 1

    def _data_line(self, part: _Part, line: bytes) -> None:
        # A line's ending is held back until the next line shows it was not the one before a boundary. ModSecurity
        # 3.0.9 then drops it for form fields (a field's lines are joined without their line endings) and keeps it
        # for files, whose size counts it.
        ending = b"\r\n" if line.endswith(b"\r\n") else b"\n" if line.endswith(b"\n") else b""
        content = line[: len(line) - len(ending)]
        part.size += len(self.pending_line_end) + len(content)
        if not part.is_file:
            part.data.append(content)
        self.pending_line_end = ending

    def _data_lines(self, block: bytes) -> None:
        """Lines ending in LF, before the first boundary or in a part's data, none of them a boundary."""
        ending = b"\r\n" if block.endswith(b"\r\n") else b"\n"
        part = self.part
        if part is None:
            self.flags["MULTIPART_DATA_BEFORE"] = 1
        else:
            part.size += len(self.pending_line_end) + len(block) - len(ending)
            if not part.is_file:
                part.data.append(_LINE_ENDING.sub(b"", block))
            self.pending_line_end = ending
        self.previous_line_end = ending

    def _finish_part(self) -> None:
        part = self.part
        self.part = None
        if part is None:
            return
        # Every finished part's header lines are kept, under its name even when it has none (as 3.0.9 does).
        self.part_headers.extend((part.name, line) for line in part.header_lines)
        if part.name:
            self.parts.append(part)
        else:
            self.flags["MULTIPART_INVALID_PART"] = 1


def _multipart_boundary(content_type: bytes, flags: dict[str, int]) -> bytes:
    """The boundary of a multipart Content-Type, with ModSecurity's checks; raises _MultipartError."""
    if not content_type:
        raise _MultipartError("Multipart: Content-Type header not available.")
    if len(content_type) > 1024:
        raise _MultipartError("Multipart: Invalid boundary in C-T (length).")
    if content_type[:19].lower() != b"multipart/form-data":
        raise _MultipartError("Multipart: Invalid MIME type.")
    if _boundary_parameters(content_type) > 1:
        raise _MultipartError("Multipart: Multiple boundary parameters in C-T.")
    start = content_type.find(b"boundary")
    if start == -1:
        if _boundary_parameters(content_type) > 0:
            raise _MultipartError("Multipart: Invalid boundary in C-T (case sensitivity).")
        raise _MultipartError("Multipart: Boundary not found in C-T.")
    between = content_type[19:start]
    if between.translate(None, _C_SPACE) not in (b"", b";"):
        raise _MultipartError("Multipart: Invalid boundary in C-T (malformed).")
    if b";" not in between:
        flags["MULTIPART_MISSING_SEMICOLON"] = 1
    equals = content_type.find(b"=", start + 8)
    if equals == -1:
        raise _MultipartError("Multipart: Invalid boundary in C-T (malformed).")
    name_tail = content_type[start + 8 : equals]
    if name_tail:
        if name_tail.strip(_C_SPACE):
            raise _MultipartError("Multipart: Invalid boundary in C-T (parameter name).")
        flags["MULTIPART_BOUNDARY_WHITESPACE"] = 1
    value = content_type[equals + 1 :]
    if value[:1] and value[0] in _C_SPACE:
        flags["MULTIPART_BOUNDARY_WHITESPACE"] = 1
    if len(value) >= 2 and value[0] == 0x22 and value[-1] == 0x22:
        boundary = value[1:-1]
        flags["MULTIPART_BOUNDARY_QUOTED"] = 1
    else:
        if value[:1] == b'"' or (len(value) >= 2 and value[-1] == 0x22):
            raise _MultipartError("Multipart: Invalid boundary in C-T (quote).")
        boundary = value
    if not boundary:
        raise _MultipartError("Multipart: Invalid boundary in C-T (empty).")
    if _boundary_parameters(boundary):
        raise _MultipartError("Multipart: Invalid boundary in C-T (content).")
    if any(char not in _BOUNDARY_CHARACTERS for char in boundary) or boundary.endswith(b" "):
        raise _MultipartError("Multipart: Invalid boundary in C-T (characters).")
    return boundary


def _boundary_parameters(text: bytes) -> int:
    """How many times ``boundary`` followed (somewhere later) by ``=`` appears, case-insensitively."""
    lower = text.lower()
    count = 0
    position = lower.find(b"boundary")
    while position != -1:
        position += 8
        if b"=" in lower[position:]:
            count += 1
        position = lower.find(b"boundary", position)
    return count


def parse_multipart(content_type: bytes, body: bytes) -> MultipartBody:
    """Parse a multipart/form-data body with the boundary of ``content_type`` (the request's Content-Type).

    Parts without a filename are form fields (ARGS_POST), parts with one are files; every header line of each
    complete part is kept (with its line ending; a folded header as one unfolded line) under the part's name.
    Oddities ModSecurity tolerates raise a flag (data before the first or after the last boundary, LF line endings,
    quoted boundary, header folding, ...); MULTIPART_STRICT_ERROR is 1 when a flag is or parsing had to stop.

    Errors follow libmodsecurity 3.0.9. A bad part header sets ``error`` but parsing goes on (still in that part's
    headers, where even a boundary line is read as a header: MULTIPART_INVALID_PART); a bad boundary line or
    Content-Type stops it. A body that never reaches its final boundary reports no field and no file."""
    flags = dict.fromkeys(MULTIPART_FLAGS, 0)
    flags["_CRLF_LINE"] = 0
    hard_error = False
    parser: _MultipartParser | None = None
    message: bytes | None = None
    try:
        boundary = _multipart_boundary(content_type, flags)
        parser = _MultipartParser(boundary, flags)
        if body:
            parser.feed(body)
    except _MultipartError as failure:
        hard_error = True
        message = failure.message
        if parser is not None:
            parser.message = message
    if parser is not None and body:
        parser.finish()
        message = parser.message
    flags["MULTIPART_CRLF_LF_LINES"] = int(bool(flags["_CRLF_LINE"] and flags["MULTIPART_LF_LINE"]))
    strict = hard_error or any(
        flags[name]
        for name in MULTIPART_FLAGS
        if name not in ("MULTIPART_UNMATCHED_BOUNDARY", "MULTIPART_CRLF_LF_LINES", "MULTIPART_STRICT_ERROR")
    )
    flags["MULTIPART_STRICT_ERROR"] = int(strict)
    del flags["_CRLF_LINE"]
    variables = {name: str(value).encode() for name, value in flags.items()}
    if parser is None:
        return MultipartBody(flags=variables, error=message)
    part_headers = tuple(parser.part_headers)
    names, filenames = tuple(parser.names), tuple(parser.filenames)
    if not parser.complete:
        return MultipartBody(
            part_headers=part_headers, names=names, filenames=filenames, flags=variables, error=message
        )
    return MultipartBody(
        arguments=tuple((part.name, b"".join(part.data)) for part in parser.parts if not part.is_file),
        files=tuple(FilePart(part.name, part.filename, part.size) for part in parser.parts if part.is_file),
        part_headers=part_headers,
        names=names,
        filenames=filenames,
        flags=variables,
        error=message,
    )


# --- XML ----------------------------------------------------------------------------------------------------------


class XmlElement:
    """An element of a parsed XML body: its name, attributes in order and children (elements and text)."""

    __slots__ = ("attributes", "children", "name")

    def __init__(self, name: bytes, attributes: list[tuple[bytes, bytes]]) -> None:
        self.name = name
        self.attributes = attributes
        self.children: list[XmlElement | bytes] = []

    def text_content(self) -> bytes:
        """All text below this element in document order (text and CDATA; not comments or processing
        instructions), as libxml2's ``xmlNodeGetContent`` gives it."""
        pieces: list[bytes] = []
        stack: list[XmlElement | bytes] = [self]
        while stack:
            node = stack.pop()
            if isinstance(node, bytes):
                pieces.append(node)
            else:
                stack.extend(reversed(node.children))
        return b"".join(pieces)

    def iter(self) -> Iterator[XmlElement]:
        """This element and every element below it, in document order."""
        stack: list[XmlElement] = [self]
        while stack:
            element = stack.pop()
            yield element
            stack.extend(reversed([child for child in element.children if isinstance(child, XmlElement)]))


@dataclass(frozen=True, slots=True)
class XmlBody:
    """A parsed XML body: the root element (None when no element was read) and the error, if any. After an error the
    tree holds what was read before it, as libxml2 leaves it."""

    root: XmlElement | None
    error: bytes | None = None


class _EntityDeclared(Exception):
    pass


def parse_xml(body: bytes) -> XmlBody:
    """Parse an XML body safely: no DTD is loaded and no entity is expanded (a document declaring entities is a body
    error, where libxml2 would expand them; a reference to an undeclared entity stays as written). After an error
    the tree read so far is kept, as libxml2 keeps it, except a start tag cut off by the end of the body, which libxml2
    keeps or drops depending on where it was cut. Never raises."""
    parser = expat.ParserCreate()
    parser.SetParamEntityParsing(expat.XML_PARAM_ENTITY_PARSING_NEVER)
    root: list[XmlElement] = []
    open_elements: list[XmlElement] = []

    def start(name: str, attributes: list[str]) -> None:
        # Namespace declarations are not attributes in libxml2's tree (XML://@* does not list them).
        pairs = [
            (_utf8(attributes[i]), _utf8(attributes[i + 1]))
            for i in range(0, len(attributes), 2)
            if attributes[i] != "xmlns" and not attributes[i].startswith("xmlns:")
        ]
        element = XmlElement(_utf8(name), pairs)
        if open_elements:
            open_elements[-1].children.append(element)
        elif not root:
            root.append(element)
        open_elements.append(element)

    def end(name: str) -> None:
        if open_elements:
            open_elements.pop()

    def text(data: str) -> None:
        if open_elements:
            open_elements[-1].children.append(_utf8(data))

    def default(data: str) -> None:
        # With a default handler expat leaves entity references unexpanded and hands them here.
        if open_elements and data.startswith("&") and data.endswith(";"):
            open_elements[-1].children.append(_utf8(data))

    def entity_declared(*_: object) -> None:
        raise _EntityDeclared

    parser.ordered_attributes = True
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    parser.CharacterDataHandler = text
    parser.DefaultHandler = default
    parser.EntityDeclHandler = entity_declared
    parser.UnparsedEntityDeclHandler = entity_declared
    parser.ExternalEntityRefHandler = lambda *_: 1
    error: bytes | None = None
    try:
        parser.Parse(body, True)
    except expat.ExpatError as failure:
        error = b"XML parsing error: XML: Failed parsing document. " + str(failure).encode()
    except _EntityDeclared:
        error = b"XML parsing error: XML: entity declarations are not processed."
    except (ValueError, RecursionError) as failure:
        error = b"XML parsing error: " + str(failure).encode()
    return XmlBody(root[0] if root else None, error)


_XPATH_STEP: Final = re.compile(rb"(//?)(@?)(\*|[^/@\[\]]+|text\(\))")


def select_xpath(root: XmlElement | None, xpath: bytes) -> Pairs:
    """Evaluate the small XPath subset CRS uses on a parsed body: absolute paths of ``/`` and ``//`` steps naming
    elements (``*`` for any), ending optionally in an attribute step (``@*``, ``@name``) or ``text()``. An element
    gives its text content, an attribute its value; each value comes keyed by ``xpath``. Anything else gives ()."""
    if root is None:
        return ()
    steps = _XPATH_STEP.findall(xpath)
    if not steps or b"".join(b"".join(step) for step in steps) != xpath:
        return ()
    document = XmlElement(b"", [])
    document.children.append(root)
    nodes: list[XmlElement] = [document]
    for index, (axis, attribute, test) in enumerate(steps):
        last = index == len(steps) - 1
        if attribute or test == b"text()":
            if not last:
                return ()
            values: list[bytes] = []
            for node in nodes:
                owners: Sequence[XmlElement] = list(node.iter()) if axis == b"//" else [node]
                for owner in owners:
                    if test == b"text()":
                        values.extend(child for child in owner.children if isinstance(child, bytes))
                    else:
                        values.extend(value for name, value in owner.attributes if test in (b"*", name))
            return tuple((xpath, value) for value in values)
        selected: list[XmlElement] = []
        seen: set[int] = set()
        for node in nodes:
            candidates = (
                [element for element in node.iter() if element is not node]
                if axis == b"//"
                else [child for child in node.children if isinstance(child, XmlElement)]
            )
            for candidate in candidates:
                if test in (b"*", candidate.name) and id(candidate) not in seen:
                    seen.add(id(candidate))
                    selected.append(candidate)
        nodes = selected
    return tuple((xpath, node.text_content()) for node in nodes)
