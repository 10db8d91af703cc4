"""The lexer: expression text to tokens, each with its 0-based position.

Literals are recognised by their shape, as wirefilter reads them: ``"..."`` strings (escapes ``\\"``, ``\\\\``,
``\\xHH`` and octal ``\\OOO``), raw strings ``r"..."`` and ``r#"..."#`` (any number of ``#``), integers (decimal,
``0x`` hex, optional ``-``), IPv4 and IPv6 addresses and CIDRs (an IPv6 literal is told from a name by its colon),
list references ``$name``. Names may contain dots (``http.request.uri.path``); keywords are names the parser knows.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from enum import Enum

from edgeplane.rules.errors import RulesError


class Kind(Enum):
    """What a token is."""

    NAME = "name"
    STRING = "string"
    INT = "integer"
    IP = "IP address"
    LIST = "list"
    PUNCT = "punctuation"
    END = "end of expression"


@dataclass(frozen=True, slots=True)
class Token:
    """One token: ``text`` as written (punctuation, names, IP and list literals), ``value`` the decoded literal
    (``str`` for strings, ``int`` for integers)."""

    kind: Kind
    text: str
    position: int
    value: str | int | None = None


_SPACE = re.compile(r"\s+")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(?:\.[A-Za-z0-9_]+)*")
_IPV6 = re.compile(r"[0-9A-Fa-f]*:(?:[0-9A-Fa-f:]|\.(?!\.))*(?:/[0-9]+)?")  # stops before a range's ".."
_IPV4 = re.compile(r"[0-9]+(?:\.[0-9]+){1,3}(?:/[0-9]+)?")  # 1.2 and 1.2.3 are network shorthands
_INT = re.compile(r"-?(?:0x[0-9A-Fa-f]+|[0-9]+)")
_WORD_TAIL = re.compile(r"[A-Za-z0-9_]")
_LIST = re.compile(r"\$[A-Za-z0-9_]+")
_RAW_START = re.compile(r"r(#*)\"")
_PUNCTUATION = ("==", "!=", "<=", ">=", "&&", "||", "^^", "..", "<", ">", "!", "~", "&", "(", ")", "{", "}", "[",
                "]", ",", "*")  # fmt: skip
_HEX_DIGITS = frozenset("0123456789abcdefABCDEF")
_OCTAL_DIGITS = frozenset("01234567")
INT_MIN, INT_MAX = -(1 << 63), (1 << 63) - 1


def tokenize(text: str) -> list[Token]:
    """The tokens of ``text``, ending with an ``END`` token. Raises ``RulesError`` for an unterminated string, a
    bad escape, an integer out of the 64-bit range or a character that starts no token."""
    tokens: list[Token] = []
    position, length = 0, len(text)
    while True:
        space = _SPACE.match(text, position)
        if space:
            position = space.end()
        if position >= length:
            tokens.append(Token(Kind.END, "", length))
            return tokens
        token = _token(text, position)
        tokens.append(token)
        position = token.position + len(token.text)


def _token(text: str, position: int) -> Token:
    char = text[position]
    if char == '"':
        return _string(text, position)
    raw = _RAW_START.match(text, position)
    if raw:
        return _raw_string(text, position, len(raw.group(1)))
    if char == "$":
        listed = _LIST.match(text, position)
        if listed:
            return Token(Kind.LIST, listed.group(), position)
    ipv6 = _IPV6.match(text, position)
    if ipv6 and (char in _HEX_DIGITS or char == ":") and not _word_continues(text, ipv6.end()):
        return Token(Kind.IP, ipv6.group(), position)
    if char.isdigit() or (char == "-" and text[position + 1 : position + 2].isdigit()):
        ipv4 = _IPV4.match(text, position)
        if ipv4 and not _word_continues(text, ipv4.end()):
            return Token(Kind.IP, ipv4.group(), position)
        number = _INT.match(text, position)
        if number and not _word_continues(text, number.end()):
            return _integer(number.group(), position)
        raise RulesError("invalid number", position)
    name = _NAME.match(text, position)
    if name:
        return Token(Kind.NAME, name.group(), position)
    for punctuation in _PUNCTUATION:
        if text.startswith(punctuation, position):
            return Token(Kind.PUNCT, punctuation, position)
    raise RulesError(f"unexpected character {char!r}", position)


def _word_continues(text: str, end: int) -> bool:
    return end < len(text) and _WORD_TAIL.match(text, end) is not None


def _integer(text: str, position: int) -> Token:
    negative = text.startswith("-")
    digits = text[1:] if negative else text
    value = int(digits[2:], 16) if digits.startswith("0x") else int(digits, 10)
    value = -value if negative else value
    if not INT_MIN <= value <= INT_MAX:
        raise RulesError("number too large to fit in a 64-bit integer", position)
    return Token(Kind.INT, text, position, value)


def _string(text: str, start: int) -> Token:
    """A quoted string; its bytes (escapes may write any byte) decoded as UTF-8 with ``surrogateescape``."""
    out = bytearray()
    position = start + 1
    while position < len(text):
        char = text[position]
        if char == '"':
            return Token(Kind.STRING, text[start : position + 1], start, out.decode("utf-8", "surrogateescape"))
        if char != "\\":
            out += char.encode("utf-8", "surrogateescape")
            position += 1
            continue
        escape = text[position + 1 : position + 2]
        if escape in ('"', "\\"):
            out += escape.encode()
            position += 2
        elif escape == "x":
            digits = text[position + 2 : position + 4]
            if len(digits) != 2 or not set(digits) <= _HEX_DIGITS:
                raise RulesError("invalid \\x escape: expected two hex digits", position + 2)
            out.append(int(digits, 16))
            position += 4
        elif escape in _OCTAL_DIGITS:
            digits = text[position + 1 : position + 4]
            if len(digits) != 3 or not set(digits) <= _OCTAL_DIGITS or int(digits, 8) > 255:
                raise RulesError("invalid octal escape: expected three octal digits", position + 1)
            out.append(int(digits, 8))
            position += 4
        else:
            raise RulesError('invalid escape: expected \\", \\\\, \\xHH or \\OOO', position + 1)
    raise RulesError("unterminated string", start)


def _raw_string(text: str, start: int, hashes: int) -> Token:
    opening = start + 2 + hashes
    end = text.find('"' + "#" * hashes, opening)
    if end < 0:
        raise RulesError("unterminated raw string", start)
    return Token(Kind.STRING, text[start : end + 1 + hashes], start, text[opening:end])
