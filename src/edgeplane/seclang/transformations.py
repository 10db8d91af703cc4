"""SecLang transformations (``t:name``): the functions a rule applies to a value before its operator sees it.

Each transformation maps bytes to bytes exactly as libmodsecurity 3.0.9 does, quirks included, because the Core Rule
Set's detection (and its regression suite) was tuned against that behaviour: ``sqlHexDecode`` never copies the last
byte of its input, ``cssDecode`` and ``base64Decode`` stop at the first NUL, ``removeComments`` keeps the byte after
a comment's end even when that byte is the C string terminator, ``utf8toUnicode`` drops NULs, ``removeWhitespace``
deletes 0xc2. No Python library implements these decoders, so they are written here by hand: a split on ``%`` or a
regular expression with a replacement function where the C code is a left-to-right scan that never looks back
(``urlDecodeUni``, ``jsDecode``, ``htmlEntityDecode``, ...), a port of the loop where it does (``normalizePath``,
``sqlHexDecode``, ``removeComments``), and a fast path that returns the value untouched when the bytes a decoder
reacts to are absent, since every request runs them on every argument.

``urlDecodeUni`` decodes ``%uXXXX`` through code page 20127 of ModSecurity's ``unicode.mapping``
(``unicode_map.toml`` beside this module), as ``modsecurity.conf-recommended`` configures it.

``transformation(name)`` gives the function for a name as SecLang writes it (case-insensitive);
``TRANSFORMATION_NAMES`` lists the names implemented, lower-case. ``word_form(name)`` says what a transformation
does to a *word*, a value of ASCII letters and digits only (``bytes.isalnum()``: hex data, numbers, block tags,
most of what a JSON-RPC request carries): leaves it as it is, lower-cases or upper-cases it, or something else (the
decoders of hex and base64, digests, the length). A pipeline of the first three kinds needs no transformation work
on a word (``edgeplane.seclang.pipeline``); the tests hold every word form to the transformation itself. ``none`` is
not a transformation: the engine resets the chain when it reads it.
"""

from __future__ import annotations

import binascii
import hashlib
import re
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Final, Literal

from edgeplane.seclang.errors import UnknownTransformation

Transformation = Callable[[bytes], bytes]

UNICODE_MAP_FILE: Final = Path(__file__).with_name("unicode_map.toml")

# C's isspace() in the "C" locale, which is what libmodsecurity's decoders test.
_C_SPACE: Final = b" \t\n\v\f\r"
_HEX_DIGITS: Final = frozenset(b"0123456789abcdefABCDEF")


def _x2c(high: int, low: int) -> int:
    """ModSecurity's ``x2c``: two hex digits to a byte. Called on non-digits too (``hexDecode`` does), where it
    gives the same arithmetic garbage the C code gives."""
    hi = ((high & 0xDF) - 0x41 + 10) if high >= 0x41 else high - 0x30
    lo = ((low & 0xDF) - 0x41 + 10) if low >= 0x41 else low - 0x30
    return (hi * 16 + lo) & 0xFF


def _load_unicode_map() -> dict[int, int]:
    data = tomllib.loads(UNICODE_MAP_FILE.read_text(encoding="ascii"))
    table: dict[int, int] = {}
    for entry in str(data["entries"]).split():
        code, _, byte = entry.partition(":")
        table[int(code, 16)] = int(byte, 16)
    return table


_UNICODE_MAP: Final = _load_unicode_map()


# --- case, whitespace, NULs -----------------------------------------------------------------------------------------


def _lowercase(value: bytes) -> bytes:
    return value.lower()  # ASCII letters only, like tolower() in the C locale


def _uppercase(value: bytes) -> bytes:
    return value.upper()


def _trim(value: bytes) -> bytes:
    return value.strip(_C_SPACE)


def _trim_left(value: bytes) -> bytes:
    return value.lstrip(_C_SPACE)


def _trim_right(value: bytes) -> bytes:
    return value.rstrip(_C_SPACE)


_SPACE_RUN: Final = re.compile(b"[" + re.escape(_C_SPACE) + b"]+")


def _compress_whitespace(value: bytes) -> bytes:
    # 3.0.9 tests isspace() only: a non-breaking space (0xa0) is left alone here, unlike removeWhitespace.
    return _SPACE_RUN.sub(b" ", value)


def _remove_whitespace(value: bytes) -> bytes:
    # 3.0.9 also deletes 0xc2, the first byte of a UTF-8 non-breaking space, wherever it appears.
    return value.translate(None, _C_SPACE + b"\xa0\xc2")


def _remove_nulls(value: bytes) -> bytes:
    return value.replace(b"\x00", b"")


def _replace_nulls(value: bytes) -> bytes:
    return value.replace(b"\x00", b" ")


# --- digests and encodings ------------------------------------------------------------------------------------------


def _length(value: bytes) -> bytes:
    return str(len(value)).encode("ascii")


def _md5(value: bytes) -> bytes:
    return hashlib.md5(value, usedforsecurity=False).digest()


def _sha1(value: bytes) -> bytes:
    return hashlib.sha1(value, usedforsecurity=False).digest()


def _hex_encode(value: bytes) -> bytes:
    return value.hex().encode("ascii")


_ALL_HEX: Final = re.compile(b"(?:[0-9a-fA-F]{2})*")


def _hex_decode(value: bytes) -> bytes:
    """Pairs of bytes to one byte each; a trailing odd byte is dropped; pairs that are not hex digits still decode,
    through ``x2c``'s arithmetic."""
    if _ALL_HEX.fullmatch(value):
        return bytes.fromhex(value.decode("ascii"))
    return bytes(_x2c(value[i], value[i + 1]) for i in range(0, len(value) - 1, 2))


_BASE64_ALPHABET: Final = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
_BASE64_VALUE: Final = {byte: index for index, byte in enumerate(_BASE64_ALPHABET)}


def _base64_decode(value: bytes) -> bytes:
    """mbed TLS's strict decoder, which libmodsecurity calls on the value up to its first NUL: any character outside
    the alphabet, a space inside a line, or data after ``=`` makes the whole result empty; line breaks and trailing
    spaces are allowed; an incomplete last quantum is dropped. A value of alphabet symbols only (every word, most
    argument values) is whole quanta of three bytes each, which ``binascii`` decodes; others take the scan."""
    text = value.split(b"\x00", 1)[0]
    if not text.translate(None, _BASE64_ALPHABET):
        return binascii.a2b_base64(text[: len(text) // 4 * 4], strict_mode=True)
    return _base64_decode_scan(text)


def _base64_decode_scan(text: bytes) -> bytes:
    """mbed TLS's decoding loop on ``text`` (no NUL), as ``_base64_decode`` describes it."""
    size = len(text)
    symbols = bytearray()
    padding = bytearray()
    equals = 0
    i = 0
    while i < size:
        spaces = 0
        while i < size and text[i] == 0x20:
            i += 1
            spaces += 1
        if i == size:
            break
        byte = text[i]
        if byte == 0x0D and i + 1 < size and text[i + 1] == 0x0A:
            i += 1
            continue
        if byte == 0x0A:
            i += 1
            continue
        if spaces:
            return b""
        if byte == 0x3D:  # '='
            equals += 1
            if equals > 2:
                return b""
            symbols.append(0)
            padding.append(1)
        else:
            digit = _BASE64_VALUE.get(byte)
            if digit is None or equals:
                return b""
            symbols.append(digit)
            padding.append(0)
        i += 1
    # The decoding pass: '=' (a zero symbol) lowers, from where it appears, how many bytes each complete quantum
    # yields; an incomplete last quantum yields nothing.
    out = bytearray()
    keep = 3
    for start in range(0, len(symbols) - 3, 4):
        keep -= padding[start : start + 4].count(1)
        word = (symbols[start] << 18) | (symbols[start + 1] << 12) | (symbols[start + 2] << 6) | symbols[start + 3]
        out += word.to_bytes(3, "big")[: max(keep, 0)]
    return bytes(out)


def _base64_decode_ext(value: bytes) -> bytes:
    """ModSecurity's forgiving decoder: bytes outside the standard alphabet (NULs, spaces, ``-``, ``_`` ...) are
    skipped, ``=`` is skipped except that one right after the first symbol of a quantum (and not before another
    ``=``) empties the result, and a trailing partial quantum yields the bytes it completes. The C code compares
    its last value with ``'='`` after the loop, where it holds a symbol's value: a value ending on a lone ``9``
    (61, the code of ``=``) in a new quantum is empty too."""
    out = bytearray()
    count = 0
    accumulator = 0
    last = -1
    size = len(value)
    for index, byte in enumerate(value):
        if byte == 0x3D:
            last = byte
            following = value[index + 1] if index + 1 < size else 0
            if following != 0x3D and count % 4 == 1:
                return b""
            continue
        digit = _BASE64_VALUE.get(byte)
        if digit is None:
            last = -1
            continue
        last = digit
        accumulator = (accumulator << 6) | digit
        position = count % 4
        if position == 1:
            out.append((accumulator >> 4) & 0xFF)
        elif position == 2:
            out.append((accumulator >> 2) & 0xFF)
        elif position == 3:
            out.append(accumulator & 0xFF)
            accumulator = 0
        count += 1
    if last == 0x3D and count % 4 == 1:
        return b""
    return bytes(out)


# --- URL, JavaScript, CSS, HTML, C escapes --------------------------------------------------------------------------

# Every "XX" of two hex digits, either case, to its byte.
_HEX_PAIRS: Final = {bytes([a, b]): bytes([int(bytes([a, b]), 16)]) for a in _HEX_DIGITS for b in _HEX_DIGITS}


def _url_decode(value: bytes) -> bytes:
    """``%XX`` to its byte and ``+`` to a space; a ``%`` not followed by two hex digits stays as it is. (Turning
    ``+`` into spaces first is safe: a decoded byte is never decoded again.)"""
    if b"+" in value:
        value = value.replace(b"+", b" ")
    if b"%" not in value:
        return value
    head, *escapes = value.split(b"%")
    out = bytearray(head)
    for escape in escapes:
        byte = _HEX_PAIRS.get(escape[:2])
        if byte is None:
            out += b"%"
            out += escape
        else:
            out += byte
            out += escape[2:]
    return bytes(out)


def _unicode_escape_byte(code: int) -> int:
    mapped = _UNICODE_MAP.get(code)
    if mapped is not None:
        return mapped
    low = code & 0xFF
    if code >> 8 == 0xFF and 0 < low < 0x5F:
        return low + 0x20  # full-width ASCII (U+FF01..U+FF5E) to ASCII
    return low


def _url_decode_uni(value: bytes) -> bytes:
    """``urlDecode`` plus IIS's ``%uXXXX``: one byte, through the code page 20127 map, else the low byte (full-width
    ASCII shifted back to ASCII). An invalid ``%u`` escape stays as it is."""
    if b"+" in value:
        value = value.replace(b"+", b" ")
    if b"%" not in value:
        return value
    head, *escapes = value.split(b"%")
    out = bytearray(head)
    for escape in escapes:
        if escape[:1] in (b"u", b"U"):
            digits = escape[1:5]
            if len(digits) == 4 and _HEX_DIGITS.issuperset(digits):
                out.append(_unicode_escape_byte(int(digits, 16)))
                out += escape[5:]
            else:
                out += b"%"
                out += escape
            continue
        byte = _HEX_PAIRS.get(escape[:2])
        if byte is None:
            out += b"%"
            out += escape
        else:
            out += byte
            out += escape[2:]
    return bytes(out)


_C_ESCAPES: Final = {ord("a"): 0x07, ord("b"): 0x08, ord("f"): 0x0C, ord("n"): 0x0A, ord("r"): 0x0D, ord("t"): 0x09}
_C_ESCAPES[ord("v")] = 0x0B

# Octal: three digits only while the value fits a byte (a first digit above 3 takes two).
_JS_ESCAPE: Final = re.compile(rb"\\(?:u([0-9a-fA-F]{4})|x([0-9a-fA-F]{2})|([0-3][0-7]{2}|[0-7]{1,2})|(.))", re.DOTALL)


def _js_escape_byte(match: re.Match[bytes]) -> bytes:
    unicode_digits, hex_digits, octal, other = match.groups()
    if unicode_digits is not None:
        low = int(unicode_digits[2:], 16)
        if unicode_digits[:2] in (b"ff", b"FF", b"fF", b"Ff") and 0 < low < 0x5F:
            low += 0x20
        return bytes([low])
    if hex_digits is not None:
        return bytes([int(hex_digits, 16)])
    if octal is not None:
        return bytes([int(octal, 8)])
    byte = other[0]
    return bytes([_C_ESCAPES.get(byte, byte)])


def _js_decode(value: bytes) -> bytes:
    """JavaScript escapes: ``\\uHHHH`` to its low byte (full-width ASCII shifted back), ``\\xHH``, octal up to
    ``\\377``, ``\\a\\b\\f\\n\\r\\t\\v``, and a backslash before any other byte dropped; a trailing backslash stays."""
    if b"\\" not in value:
        return value
    return _JS_ESCAPE.sub(_js_escape_byte, value)


_CSS_ESCAPE: Final = re.compile(rb"\\(?:([0-9a-fA-F]{1,6})[ \t\n\v\f\r]?|\n|(.)|\Z)", re.DOTALL)


def _css_escape_byte(match: re.Match[bytes]) -> bytes:
    digits, other = match.groups()
    if digits is not None:
        count = len(digits)
        if count == 1:
            return bytes([_x2c(0x30, digits[0])])
        byte = int(digits[-2:], 16)
        # A full-width check (U+FF01..U+FF5E) only where the escape can be U+FFxx: four digits, or five or six
        # with leading zeros.
        full_width = count == 4 or (count == 5 and digits[0] == 0x30) or (count == 6 and digits[:2] == b"00")
        if full_width and digits[-4:-2] in (b"ff", b"FF", b"fF", b"Ff") and 0 < byte < 0x5F:
            byte += 0x20
        return bytes([byte])
    if other is not None:
        return other
    return b""  # a backslash before a newline, or at the end


def _css_decode(value: bytes) -> bytes:
    """CSS 2 escapes: ``\\`` and 1 to 6 hex digits (one optional space after them eaten) to the byte of the last
    two digits, a backslash before a newline or at the end removed, before any other byte dropped. The result ends
    at its first NUL, as libmodsecurity 3.0.9 reads it back as a C string."""
    if b"\\" in value:
        value = _CSS_ESCAPE.sub(_css_escape_byte, value)
    return value.split(b"\x00", 1)[0]


_HTML_ENTITY: Final = re.compile(rb"&(?:#[xX]([0-9a-fA-F]+)|#([0-9]+)|([a-zA-Z0-9]+));?")
_HTML_NAMED: Final = {b"quot": b'"', b"amp": b"&", b"lt": b"<", b"gt": b">", b"nbsp": b"\xa0"}
_LONG_MAX: Final = (1 << 63) - 1  # strtol() saturates there


def _html_entity_byte(match: re.Match[bytes]) -> bytes:
    hex_digits, decimal_digits, name = match.groups()
    if name is not None:
        decoded = _HTML_NAMED.get(name.lower())
        if decoded is None:
            return match.group(0)
        return decoded
    number = int(hex_digits, 16) if hex_digits is not None else int(decimal_digits)
    return bytes([min(number, _LONG_MAX) & 0xFF])


def _html_entity_decode(value: bytes) -> bytes:
    """``&#NNN;``, ``&#xHH;`` (the ``;`` optional) to the low byte of the number, and the five named entities
    ``quot amp lt gt nbsp`` (case-insensitive, ``;`` optional); other entities stay as they are."""
    if b"&" not in value:
        return value
    return _HTML_ENTITY.sub(_html_entity_byte, value)


_ANSI_C_ESCAPE: Final = re.compile(rb"\\(?:[xX]([0-9a-fA-F]{2})|([0-7]{1,3})|(.))", re.DOTALL)
_ANSI_C_SIMPLE: Final = {**_C_ESCAPES, ord("\\"): 0x5C, ord("?"): 0x3F, ord("'"): 0x27, ord('"'): 0x22}


def _ansi_c_escape_byte(match: re.Match[bytes]) -> bytes:
    hex_digits, octal, other = match.groups()
    if hex_digits is not None:
        return bytes([int(hex_digits, 16)])
    if octal is not None:
        return bytes([int(octal, 8) & 0xFF])
    byte = other[0]
    return bytes([_ANSI_C_SIMPLE.get(byte, byte)])


def _escape_seq_decode(value: bytes) -> bytes:
    """ANSI C escapes: ``\\a\\b\\f\\n\\r\\t\\v\\\\\\?\\'\\"``, ``\\xHH``, octal of 1 to 3 digits (taken modulo
    256); a backslash before any other byte is dropped, a trailing one stays."""
    if b"\\" not in value:
        return value
    return _ANSI_C_ESCAPE.sub(_ansi_c_escape_byte, value)


def _sql_hex_decode(value: bytes) -> bytes:
    """``0xHHHH...`` to bytes (``0x`` without two hex digits after it stays). A port of the C loop, whose counter
    stops it one byte early (``abc`` gives ``ab``), and whose result ends at its first NUL."""
    size = len(value)
    if size == 0:
        return b""
    data = value + b"\x00\x00\x00"
    out = bytearray()
    here = 0
    count = 1
    while count < size and data[here] != 0:
        if data[here] == 0x30 and data[here + 1] in b"xX" and {data[here + 2], data[here + 3]} <= _HEX_DIGITS:
            here += 2
            count += 2
            while data[here] in _HEX_DIGITS and data[here + 1] in _HEX_DIGITS:
                out.append(_x2c(data[here], data[here + 1]))
                here += 2
                count += 2
        out.append(data[here])
        here += 1
        count += 1
    return bytes(out).split(b"\x00", 1)[0]


# --- comments -------------------------------------------------------------------------------------------------------


def _remove_comments(value: bytes) -> bytes:
    """Drops ``/* ... */`` and ``<!-- ... -->`` and ends the value at ``--`` or ``#``; an unterminated comment
    becomes one space. A port of the C loop, which copies the byte after a comment's end without looking at it
    (so a comment right after another is kept, and one at the very end leaves a NUL)."""
    if b"/*" not in value and b"<!--" not in value and b"--" not in value and b"#" not in value:
        return value
    size = len(value)
    data = value + b"\x00"
    out = bytearray()
    i = 0
    in_comment = False
    while i < size:
        if not in_comment:
            if data.startswith(b"/*", i):
                in_comment = True
                i += 2
            elif data.startswith(b"<!--", i):
                in_comment = True
                i += 4
            elif data.startswith(b"--", i) or data[i] == 0x23:  # '#'
                break
            else:
                out.append(data[i])
                i += 1
        elif data.startswith(b"*/", i) or data.startswith(b"-->", i):
            in_comment = False
            i += 2 if data[i] == 0x2A else 3
            out.append(data[i])
            i += 1
        else:
            i += 1
    if in_comment:
        out.append(0x20)
    return bytes(out)


_COMMENT_MARK: Final = re.compile(rb"/\*|\*/|<!--|-->|--|#")


def _remove_comments_char(value: bytes) -> bytes:
    """Deletes the comment marks ``/*``, ``*/``, ``<!--``, ``-->``, ``--`` and ``#`` themselves."""
    return _COMMENT_MARK.sub(b"", value)


_C_COMMENT: Final = re.compile(rb"/\*(?:.*?\*/|.*)", re.DOTALL)


def _replace_comments(value: bytes) -> bytes:
    """Each ``/* ... */`` comment, or an unterminated ``/*`` to the end, becomes one space."""
    if b"/*" not in value:
        return value
    return _C_COMMENT.sub(b" ", value)


# --- command lines and paths ----------------------------------------------------------------------------------------

_ASCII_LOWER: Final = bytes.maketrans(b"ABCDEFGHIJKLMNOPQRSTUVWXYZ", b"abcdefghijklmnopqrstuvwxyz")
_CMD_SEPARATORS: Final = re.compile(rb"[ ,;\t\r\n]+")
_CMD_SPACE_BEFORE: Final = re.compile(rb" (?=[/(])")


def _cmd_line(value: bytes) -> bytes:
    """Deletes ``\\ " ' ^``, turns each run of spaces, tabs, CR, LF, commas and semicolons into one space, drops
    a space before ``/`` or ``(``, and lower-cases ASCII letters."""
    value = value.translate(_ASCII_LOWER, b"\\\"'^")
    value = _CMD_SEPARATORS.sub(b" ", value)
    return _CMD_SPACE_BEFORE.sub(b"", value)


_SLASH: Final = 0x2F
_BACKSLASH: Final = 0x5C
_DOT: Final = 0x2E


def _normalize_path_bytes(value: bytes, windows: bool) -> bytes:
    """ModSecurity's path normaliser: collapses ``//``, removes ``./`` and resolves ``../`` against the previous
    segment, never above the root (a relative path keeps the ``../`` it cannot resolve); on Windows backslashes
    become slashes first. A port of the C pointer loop, whose corner cases CRS relies on."""
    if not value:
        return value
    buf = bytearray(value)
    end = len(buf) - 1
    relative = not (buf[0] == _SLASH or (windows and buf[0] == _BACKSLASH))
    trailing = buf[end] == _SLASH or (windows and buf[end] == _BACKSLASH)
    src = dst = 0
    hit_root = False
    done = False
    while not done and src <= end and dst <= end:
        if windows:
            if buf[src] == _BACKSLASH:
                buf[src] = _SLASH
            if src < end and buf[src + 1] == _BACKSLASH:
                buf[src + 1] = _SLASH
        normalise = True
        if src == end:
            done = True
        elif buf[src + 1] != _SLASH:
            normalise = False  # not the end of a segment
        if normalise:
            if src != end and buf[src] == _SLASH:
                pass  # an empty segment: the copy below skips repeated slashes
            elif buf[src] == _DOT:
                if dst > 0 and buf[dst - 1] == _DOT:  # a back-reference
                    if relative and (hit_root or dst - 2 <= 0):
                        hit_root = True  # nothing to go back to: keep the "../" as it is
                    else:
                        dst -= 3
                        while dst > 0 and buf[dst] != _SLASH:
                            dst -= 1
                        if dst <= 0:
                            hit_root = True
                            dst = 0
                            if not relative and src == end:
                                dst += 1
                        if done:
                            continue
                        src += 1
                elif dst == 0:  # a relative self-reference
                    if done:
                        continue
                    src += 1
                elif buf[dst - 1] == _SLASH:  # a self-reference
                    if done:
                        continue
                    dst -= 1
                    src += 1
            elif dst > 0:
                hit_root = False  # a regular segment
        if buf[src] == _SLASH:
            while src < end and (buf[src + 1] == _SLASH or (windows and buf[src + 1] == _BACKSLASH)):
                src += 1
            if relative and dst == 0:
                src += 1
                continue
        buf[dst] = buf[src]
        dst += 1
        src += 1
    if not trailing and dst > 0 and buf[dst - 1] == _SLASH:
        dst -= 1
    return bytes(buf[:dst])


def _is_normal_path(value: bytes) -> bool:
    # Nothing for the normaliser to do: no empty segment, no segment that starts with "." (after a slash, or at the
    # start) and none that ends with "..", which the C code also takes for a back-reference ("a../" goes up).
    return (
        b"//" not in value
        and b"/." not in value
        and b"../" not in value
        and not value.startswith(b".")
        and not value.endswith(b"..")
    )


def _normalize_path(value: bytes) -> bytes:
    if _is_normal_path(value):
        return value
    return _normalize_path_bytes(value, windows=False)


def _normalize_path_win(value: bytes) -> bytes:
    if b"\\" not in value and _is_normal_path(value):
        return value
    return _normalize_path_bytes(value, windows=True)


# --- UTF-8 ----------------------------------------------------------------------------------------------------------

_UTF8_UNIT: Final = re.compile(
    rb"[\xc0-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf7][\x80-\xbf]{3}|[\x80-\xff]|\x00"
)


def _utf8_unit(match: re.Match[bytes]) -> bytes:
    unit = match.group(0)
    lead = unit[0]
    if len(unit) == 1:
        if lead == 0:
            return b""  # the C code writes a NUL without advancing: the next byte overwrites it
        if 0xC0 <= lead <= 0xF4:
            return b""  # a lead byte without its continuation bytes is dropped
        return unit  # a continuation byte alone, 0xf5..0xf7 alone, or 0xf8..0xff
    if len(unit) == 2:
        code = ((lead & 0x1F) << 6) | (unit[1] & 0x3F)
        overlong = code < 0x80
    elif len(unit) == 3:
        code = ((lead & 0x0F) << 12) | ((unit[1] & 0x3F) << 6) | (unit[2] & 0x3F)
        overlong = code < 0x800
    else:
        code = ((lead & 0x07) << 18) | ((unit[1] & 0x3F) << 12) | ((unit[2] & 0x3F) << 6) | (unit[3] & 0x3F)
        overlong = code < 0x10000
    out = b"%u" + b"%04x" % code
    if lead >= 0xF5:
        out = unit[:1] + out  # beyond U+10FFFF: the lead byte is written before the escape
    # A surrogate, or an overlong form, is written with its lead byte after the escape.
    if 0xD800 <= code <= 0xDFFF:
        out += unit[:1]
    if overlong:
        out += unit[:1]
    return out


def _utf8_to_unicode(value: bytes) -> bytes:
    """Each UTF-8 sequence of 2 to 4 bytes to ``%uXXXX`` (lower-case hex, at least four digits); bytes that start
    no valid sequence are dropped when they are lead bytes and kept otherwise; NULs are dropped."""
    if value.isascii() and b"\x00" not in value:
        return value
    return _UTF8_UNIT.sub(_utf8_unit, value)


# --- the table ------------------------------------------------------------------------------------------------------

_TRANSFORMATIONS: Final[dict[str, Transformation]] = {
    "base64decode": _base64_decode,
    "base64decodeext": _base64_decode_ext,
    "cmdline": _cmd_line,
    "compresswhitespace": _compress_whitespace,
    "cssdecode": _css_decode,
    "escapeseqdecode": _escape_seq_decode,
    "hexdecode": _hex_decode,
    "hexencode": _hex_encode,
    "htmlentitydecode": _html_entity_decode,
    "jsdecode": _js_decode,
    "length": _length,
    "lowercase": _lowercase,
    "md5": _md5,
    "normalisepath": _normalize_path,
    "normalisepathwin": _normalize_path_win,
    "normalizepath": _normalize_path,
    "normalizepathwin": _normalize_path_win,
    "removecomments": _remove_comments,
    "removecommentschar": _remove_comments_char,
    "removenulls": _remove_nulls,
    "removewhitespace": _remove_whitespace,
    "replacecomments": _replace_comments,
    "replacenulls": _replace_nulls,
    "sha1": _sha1,
    "sqlhexdecode": _sql_hex_decode,
    "trim": _trim,
    "trimleft": _trim_left,
    "trimright": _trim_right,
    "uppercase": _uppercase,
    "urldecode": _url_decode,
    "urldecodeuni": _url_decode_uni,
    "utf8tounicode": _utf8_to_unicode,
}

TRANSFORMATION_NAMES: Final[frozenset[str]] = frozenset(_TRANSFORMATIONS)

WordForm = Literal["same", "lower", "upper"]

# What the transformations that act on a word at all do to it. Every other transformation leaves a word as it is:
# the bytes the decoders, the whitespace, NUL and comment handlers and the path normalisers react to are not letters
# or digits.
_WORD_FORMS: Final[dict[str, WordForm | None]] = {
    "base64decode": None,
    "base64decodeext": None,
    "cmdline": "lower",
    "hexdecode": None,
    "hexencode": None,
    "length": None,
    "lowercase": "lower",
    "md5": None,
    "sha1": None,
    "sqlhexdecode": None,
    "uppercase": "upper",
}


def word_form(name: str) -> WordForm | None:
    """What the transformation ``name`` does to a word (ASCII letters and digits only, see the module docstring):
    ``"same"``, ``"lower"``, ``"upper"``, or None when it does something else. Raises ``UnknownTransformation``
    for a name that is not implemented."""
    transformation(name)
    return _WORD_FORMS.get(name.lower(), "same")


def transformation(name: str) -> Transformation:
    """The transformation SecLang calls ``name`` (``t:name``, compared case-insensitively): a function from bytes to
    bytes that never raises. ``none`` is not one (the engine resets the chain on it). Raises
    ``UnknownTransformation`` for a name that is not implemented."""
    try:
        return _TRANSFORMATIONS[name.lower()]
    except KeyError:
        raise UnknownTransformation(f"unknown transformation t:{name}") from None
