"""SecLang operators (``@rx``, ``@pm``, ``@detectSQLi``, ``@eq``...) with ModSecurity v3.0.9's semantics on bytes.

Each operator is compiled once from its name and argument into a plain function of the (transformed) value, which
returns the captures a ``capture`` action would store (TX:0, then TX:1..9) or ``None`` when it does not match.
Negation belongs to the engine. The behaviour follows ModSecurity v3's ``src/operators/*.cc`` (the reference the
Core Rule Set was tested against) rather than the Reference Manual, including its corner cases: how ``@pm`` reads its
argument, which bytes ``@validateUtf8Encoding`` accepts, that ``@eq`` parses with ``std::stoi`` and ``@gt`` with
``atoll``. It is written by hand because no library implements SecLang's operators for Python; patterns go to RE2
through :mod:`edgeplane.seclang.pcre`, phrase lists to one RE2 alternation (then to a copy of ModSecurity's own
automaton, whose misses CRS was tested with), SQL and XSS detection to libinjection.

``@rbl`` and ``@geoLookup`` never match: the first would send a DNS query per request to a block list (CRS enables it
only with an API key set), the second needs a GeoIP database ModSecurity is not given by default; without one
ModSecurity's ``@geoLookup`` fails too, and CRS uses it only to fill GEO for its country block list, which is empty.
"""

from __future__ import annotations

import ctypes
import ipaddress
import re
from collections.abc import Callable, Iterable, Sequence
from pathlib import Path
from typing import Final

import libinjection  # type: ignore[import-not-found]
import re2

from edgeplane.seclang.errors import OperatorArgumentError, UnsupportedOperator
from edgeplane.seclang.pcre import Translation, translate

Captures = tuple[bytes, ...]
Operator = Callable[[bytes], Captures | None]

_UNANCHORED: Final = re2._Anchor.UNANCHORED
_ANCHOR_BOTH: Final = re2._Anchor.ANCHOR_BOTH
_MAX_CAPTURES: Final = 9  # TX:1..TX:9


def _re2_options(case_sensitive: bool = True) -> re2.Options:
    options = re2.Options()
    options.encoding = re2.Options.Encoding.LATIN1  # bytes in, bytes matched: PCRE without UTF mode
    options.log_errors = False
    options.case_sensitive = case_sensitive
    options.max_mem = 64 << 20  # CRS's largest patterns and phrase lists exceed RE2's default 8 MiB
    return options


_Match = Callable[[object, bytes, int, int], Sequence[tuple[int, int]]]


def _re2_compile(pattern: bytes, options: re2.Options) -> _Match:
    """The RE2 object's ``Match(anchor, text, start, end)``, which gives every group's byte span ((-1, -1) for none)
    without the ``re2`` module's per-call work (mapping offsets back to characters, building match objects)."""
    try:
        match: _Match = re2.compile(pattern, options)._regexp.Match
        return match
    except re2.error as error:
        detail = error.args[0] if error.args else error
        reason = detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
        raise OperatorArgumentError(f"RE2 rejected the translated pattern: {reason}") from None


# @rx


def compile_regex(pattern: bytes) -> Operator:
    """A search for the PCRE ``pattern`` as ModSecurity runs it (bytes, DOTALL and MULTILINE). Captures: the whole
    match, then groups 1..9 (a group that took no part gives ``b""``). Raises ``OperatorArgumentError`` when the
    pattern is not valid PCRE or uses what :func:`edgeplane.seclang.pcre.translate` does not support."""
    if not pattern:  # ModSecurity compiles an empty pattern as ".*"
        return _always
    translation = translate(pattern)
    options = _re2_options()
    test = _re2_compile(translation.re2_test, options)
    groups = min(translation.groups, _MAX_CAPTURES) + 1
    if translation.exact and groups == 1:

        def search_whole(value: bytes) -> Captures | None:
            start, end = test(_UNANCHORED, value, 0, len(value))[0]
            return None if start < 0 else (value[start:end],)

        return search_whole
    full = _re2_compile(translation.re2, options) if groups > 1 else test
    confirm = None if translation.exact else _python_regex(translation)
    # Python's re decides every RE2 match of an inexact translation, or those on a text ending in a newline.
    always_confirm = not translation.exact and not translation.exact_unless_final_newline

    def search(value: bytes) -> Captures | None:
        # Most values do not match: the groupless form answers that, the one with groups runs on a match only.
        if test(_UNANCHORED, value, 0, len(value))[0][0] < 0:
            return None
        if confirm is not None and (always_confirm or value.endswith(b"\n")):
            found = confirm(value)
            if found is None:
                return None
            return (found.group(0), *(b"" if text is None else text for text in found.groups()[: groups - 1]))
        spans = full(_UNANCHORED, value, 0, len(value))
        return tuple(b"" if start < 0 else value[start:end] for start, end in spans[:groups])

    return search


def _python_regex(translation: Translation) -> Callable[[bytes], re.Match[bytes] | None]:
    try:
        return re.compile(translation.python).search
    except re.error as error:
        needs = ", ".join(translation.approximations) or "a line start at the end"
        raise OperatorArgumentError(f"pattern needs {needs}: {error}") from None


# @pm, @pmFromFile


def pm_phrases(argument: bytes) -> list[bytes]:
    """The phrases of a ``@pm`` argument as ModSecurity reads them: surrounding quotes dropped, ``|41 42|`` hex
    bytes and ``\\:``-style escapes decoded (with the same quirks), then split at whitespace."""
    content = _pm_content(argument)
    return (argument if content is None else content).split()


def _pm_content(argument: bytes) -> bytes | None:
    """ModSecurity's ``parse_pm_content``, quirks included: inside ``|...|`` only the letters a-f count as hex digits
    (it compares with the numbers 0-9, not the digits), and the decoded text is written over the original without
    being cut short, so the original's tail stays after it. ``None`` where ModSecurity gives up (empty content, an
    unsupported escape) and uses the argument as written."""
    offset = 0
    while offset < len(argument) and argument[offset] in b" \t":
        offset += 1
    if len(argument) - offset >= 2 and argument[offset : offset + 1] == b'"' and argument.endswith(b'"'):
        parm = bytearray(argument[offset + 1 : -1])
    else:
        parm = bytearray(argument[offset:])
    if not parm:
        return None
    written = 0
    in_hex = escaped = False
    hex_digits = bytearray()
    for byte in bytes(parm):
        if byte == 0x7C:  # |
            in_hex = not in_hex
        elif not escaped and byte == 0x5C:  # backslash
            escaped = True
        elif in_hex:
            if byte in b"ABCDEFabcdef" or byte < 10:
                hex_digits.append(byte)
                if len(hex_digits) == 2:
                    parm[written] = _strtol_hex(bytes(hex_digits))
                    written += 1
                    hex_digits.clear()
        elif escaped:
            if byte not in b':;\\"':
                return None
            parm[written] = byte
            written += 1
            escaped = False
        else:
            parm[written] = byte
            written += 1
    # strdup stops at the first NUL a |00|-style byte wrote
    return bytes(parm).split(b"\0", 1)[0]


def _strtol_hex(digits: bytes) -> int:
    """``strtol(digits, NULL, 16) & 0xFF``: leading whitespace skipped, then the hex digits up to the first other."""
    text = digits.lstrip(b" \t\n\v\f\r")
    end = 0
    while end < len(text) and text[end] in b"0123456789abcdefABCDEF":
        end += 1
    return int(text[:end], 16) & 0xFF if end else 0


def pm_file_phrases(path: Path) -> list[bytes]:
    """The phrases of a ``@pmFromFile`` data file: one per line, as written (leading spaces kept); empty lines and
    lines whose first non-space character is ``#`` skipped. Raises ``OperatorArgumentError`` if unreadable."""
    try:
        data = path.read_bytes()
    except OSError as error:
        raise OperatorArgumentError(f"cannot read data file {path}: {error.strerror}") from None
    phrases = []
    for line in data.split(b"\n"):
        if not line or line.lstrip(b" \t\n\v\f\r").startswith(b"#"):
            continue
        phrases.append(line)
    return phrases


def compile_phrases(phrases: Iterable[bytes]) -> Operator:
    """A search for any of ``phrases``, ASCII letters compared case-insensitively, as ModSecurity's ``@pm`` does it,
    including what its Aho-Corasick automaton misses: its failure links stop one step short (a node fails to its
    parent's failure node's child, or to the root, never further down the chain), so a phrase that begins inside the
    partial match of a longer one can go unseen. Captures: the text ModSecurity stores in TX:0 (the automaton's node
    where it first sees a match, which need not be a whole phrase).

    One RE2 alternation of the phrases answers first: it matches whenever the automaton can, so only values holding
    a phrase are run through the automaton itself, byte by byte."""
    phrases = list(phrases)
    searched = {phrase.lower() for phrase in phrases if phrase}
    if not searched:
        return _never
    alternation = b"|".join(_literal(phrase) for phrase in sorted(searched))
    match = _re2_compile(alternation, _re2_options(case_sensitive=False))
    find = PhraseAutomaton(phrases).find

    def search(value: bytes) -> Captures | None:
        if match(_UNANCHORED, value, 0, len(value))[0][0] < 0:
            return None
        found = find(value)
        return None if found is None else (found,)

    return search


_MOVES_CACHED: Final = 1 << 16


class PhraseAutomaton:
    """ModSecurity's Aho-Corasick automaton (``src/utils/acmp.cc``) as it builds it, run byte by byte.

    Nodes are numbered, 0 the root; a node's letter is its byte, ASCII letters lower-cased (``tolower`` in the C
    locale). ``find`` reports, as ModSecurity does, the text of the node where it first detects a match."""

    def __init__(self, phrases: Iterable[bytes]) -> None:
        self.children: list[dict[int, int]] = [{}]
        self.text: list[bytes] = [b""]
        self.last = [False]
        parents, letters = [0], [0]
        for phrase in phrases:
            node = 0
            for index, byte in enumerate(phrase):
                letter = byte | 0x20 if 0x41 <= byte <= 0x5A else byte
                child = self.children[node].get(letter)
                if child is None:
                    child = len(self.children)
                    self.children.append({})
                    self.text.append(phrase[: index + 1])
                    self.last.append(False)
                    parents.append(node)
                    letters.append(letter)
                    self.children[node][letter] = child
                node = child
            if phrase:
                self.last[node] = True
        # Breadth first, so that a parent's links exist before its children's.
        order: list[int] = []
        level = list(self.children[0].values())
        while level:
            order.extend(level)
            level = [child for node in level for child in self.children[node].values()]
        # ModSecurity's failure link: the parent's failure node's child for the same letter, else the root (the
        # textbook automaton would go on down the parent's failure chain).
        self.fail = [0] * len(self.children)
        for node in order:
            if parents[node] != 0:
                self.fail[node] = self.children[self.fail[parents[node]]].get(letters[node], 0)
        self.reports = [self._reports(node) for node in range(len(self.children))]
        self._moves: dict[int, int] = {}

    def _reports(self, node: int) -> bool:
        # A node reports when it ends a phrase or one ends on its chain of failure links (ModSecurity's o_match).
        while node != 0:
            if self.last[node]:
                return True
            node = self.fail[node]
        return False

    def _step(self, node: int, letter: int) -> int:
        while True:
            child = self.children[node].get(letter)
            if child is not None:
                return child
            if node == 0:
                return 0
            node = self.fail[node]

    def find(self, value: bytes) -> bytes | None:
        """The text ModSecurity's automaton reports for ``value``, or None where it sees no phrase."""
        moves, reports = self._moves, self.reports
        node = 0
        for letter in value.lower():
            key = node << 8 | letter
            target = moves.get(key)
            if target is None:
                target = self._step(node, letter)
                if len(moves) < _MOVES_CACHED:  # values come from requests: the cache must not grow without end
                    moves[key] = target
            node = target
            if reports[node]:
                return self.text[node]
        return None


def _literal(phrase: bytes) -> bytes:
    # Bytes above 0x7F are kept out of RE2's case folding, which would pair Latin-1 letters (0xC9 with 0xE9).
    return b"".join(
        bytes([byte])
        if byte < 0x80 and chr(byte).isalnum()
        else (b"\\x%02x" if byte < 0x80 else b"(?-i:\\x%02x)") % byte
        for byte in phrase
    )


def _data_files(argument: bytes, data_dir: Path) -> list[Path]:
    names = argument.split()
    if not names:
        raise OperatorArgumentError("no data file named")
    paths = []
    for name in names:
        if name.startswith((b"https://", b"http://")):
            raise OperatorArgumentError("data files are read from disk only, not downloaded")
        path = Path(name.decode("utf-8", "surrogateescape"))
        paths.append(path if path.is_absolute() else data_dir / path)
    return paths


# @detectSQLi, @detectXSS


class _Payload:
    """Hands bytes to libinjection-python, which encodes what it is given: ``encode`` returns the bytes unchanged."""

    __slots__ = ("data",)

    def __init__(self, data: bytes) -> None:
        self.data = data

    def encode(self, *args: object) -> bytes:
        return self.data


def _sqli_detector() -> Callable[[bytes], bytes | None]:
    """``libinjection_sqli(input, length, fingerprint)``, the call ModSecurity makes, from the C library that
    libinjection-python's extension carries and exports. Its ``is_sql_injection`` gives the same answer but builds a
    list of token dictionaries per call, which costs three times as much; the binding is used where the symbol is
    missing. ``PyDLL`` keeps the GIL during the call, so one fingerprint buffer serves every thread."""
    try:
        function = ctypes.PyDLL(libinjection.__file__).libinjection_sqli
    except (OSError, AttributeError):
        return _sqli_by_binding
    function.argtypes = (ctypes.c_char_p, ctypes.c_size_t, ctypes.c_char_p)
    function.restype = ctypes.c_int
    fingerprint = ctypes.create_string_buffer(8)

    def detect(value: bytes) -> bytes | None:
        return fingerprint.value if function(value, len(value), fingerprint) else None

    return detect


def _sqli_by_binding(value: bytes) -> bytes | None:
    result = libinjection.is_sql_injection(_Payload(value))
    return str(result["fingerprint"]).encode("latin-1") if result["is_sqli"] else None


_sqli: Final = _sqli_detector()


def _detect_sqli(value: bytes) -> Captures | None:
    fingerprint = _sqli(value)
    return None if fingerprint is None else (fingerprint,)


def _detect_xss(value: bytes) -> Captures | None:
    return (value,) if libinjection.is_xss(_Payload(value))["is_xss"] else None


# @validateByteRange, @validateUrlEncoding, @validateUtf8Encoding


def byte_range(argument: bytes) -> bytes:
    """The bytes a ``@validateByteRange`` argument allows (``10, 13, 32-126``). As in ModSecurity, a part that is
    not a number or a valid range is skipped without error, a number is read the way ``std::stoi`` reads it."""
    allowed = bytearray()
    for part in argument.split(b","):
        low_text, dash, high_text = part.partition(b"-")
        low = _stoi(low_text)
        if not dash:
            if low is not None and 0 <= low <= 255:
                allowed.append(low)
            continue
        high = _stoi(high_text)
        if low is None or high is None or not (0 <= low <= high <= 255):
            continue
        allowed.extend(range(low, high + 1))
    return bytes(sorted(set(allowed)))


def _validate_byte_range(argument: bytes) -> Operator:
    allowed = byte_range(argument)

    def validate(value: bytes) -> Captures | None:
        return (value,) if value.translate(None, allowed) else None

    return validate


# A '%' not followed by two hex digits. ModSecurity scans left to right and skips the two digits of a valid escape,
# which are never '%', so every '%' of the value is examined.
_BAD_URL_ENCODING: Final = _re2_compile(rb"%(?:[^0-9A-Fa-f]|[0-9A-Fa-f][^0-9A-Fa-f]|[0-9A-Fa-f]?\z)", _re2_options())


def _validate_url_encoding(value: bytes) -> Captures | None:
    if b"%" not in value:
        return None
    return (value,) if _BAD_URL_ENCODING(_UNANCHORED, value, 0, len(value))[0][0] >= 0 else None


# What ModSecurity's validator accepts: RFC 3629 UTF-8 (no overlong forms, no surrogates, no lead byte above 0xF4),
# except that it does not check the F4 sequences against U+10FFFF (F4 90..BF xx xx passes).
_UTF8: Final = _re2_compile(
    rb"(?:[\x00-\x7f]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}"
    rb"|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf4][\x80-\xbf]{3})*",
    _re2_options(),
)


def _validate_utf8_encoding(value: bytes) -> Captures | None:
    if value.isascii():
        return None
    return None if _UTF8(_ANCHOR_BOTH, value, 0, len(value))[0][0] >= 0 else (value,)


# Numbers


_STOI: Final = re.compile(rb"[ \t\n\v\f\r]*([+-]?[0-9]+)")
_INT_MIN: Final = -(2**31)
_INT_MAX: Final = 2**31 - 1
_LLONG_MIN: Final = -(2**63)
_LLONG_MAX: Final = 2**63 - 1


def _stoi(text: bytes) -> int | None:
    """``std::stoi``: leading whitespace, a sign, decimal digits; ``None`` where it throws (no digits, out of
    ``int`` range)."""
    if text.isdigit():  # the common case: no regex needed
        number = int(text)
    else:
        found = _STOI.match(text)
        if found is None:
            return None
        number = int(found.group(1))
    return number if _INT_MIN <= number <= _INT_MAX else None


def _atoll(text: bytes) -> int:
    """``atoll``: like ``strtoll`` in base 10, 0 without digits, clamped to ``long long`` on overflow."""
    if text.isdigit():
        number = int(text)
    else:
        found = _STOI.match(text)
        if found is None:
            return 0
        number = int(found.group(1))
    return max(_LLONG_MIN, min(_LLONG_MAX, number))


def _eq(argument: bytes) -> Operator:
    # std::stoi on both sides, 0 where it throws
    expected = _stoi(argument) or 0

    def eq(value: bytes) -> Captures | None:
        return (value,) if (_stoi(value) or 0) == expected else None

    return eq


def _comparison(test: Callable[[int, int], bool]) -> Callable[[bytes], Operator]:
    def compile_comparison(argument: bytes) -> Operator:
        bound = _atoll(argument)

        def compare(value: bytes) -> Captures | None:
            return (value,) if test(_atoll(value), bound) else None

        return compare

    return compile_comparison


# Strings


def _streq(argument: bytes) -> Operator:
    return lambda value: (value,) if value == argument else None


def _begins_with(argument: bytes) -> Operator:
    return lambda value: (argument,) if value.startswith(argument) else None


def _ends_with(argument: bytes) -> Operator:
    return lambda value: (argument,) if value.endswith(argument) else None


def _contains(argument: bytes) -> Operator:
    return lambda value: (argument,) if argument in value else None


def _within(argument: bytes) -> Operator:
    # An empty value is within anything, as in ModSecurity.
    return lambda value: (value,) if not value or value in argument else None


def _contains_word(argument: bytes) -> Operator:
    def contains_word(value: bytes) -> Captures | None:
        return (argument,) if contains_word_at(value, argument) else None

    return contains_word


def contains_word_at(value: bytes, word: bytes) -> bool:
    """ModSecurity's ``@containsWord``: ``word`` occurs with no ASCII letter right before or after it (digits and
    ``_`` count as boundaries). An empty word is always found, and never in an empty value."""
    if not word:
        return True
    if not value:
        return False
    if value == word:
        return True
    size = len(word)
    position = value.find(word)
    while position >= 0:
        before = _boundary(value, position - 1)
        after = _boundary(value, position + size)
        if (position == 0 and after) or (position + size == len(value) and before) or (before and after):
            return True
        position = value.find(word, position + 1)
    return False


def _boundary(value: bytes, index: int) -> bool:
    # Outside the value is no boundary: ModSecurity's check fails there (it only tests the other side at an edge).
    if index < 0 or index >= len(value):
        return False
    byte = value[index]
    return not (0x41 <= byte <= 0x5A or 0x61 <= byte <= 0x7A)


# Addresses


_Network = ipaddress.IPv4Network | ipaddress.IPv6Network


def ip_networks(entries: Iterable[bytes]) -> list[_Network]:
    """Networks from ``@ipMatch`` entries (``192.168.0.0/16``, ``::1``, ``10.0.0.1``). Raises
    ``OperatorArgumentError`` for an entry that is not an address or network."""
    networks = []
    for entry in entries:
        text = entry.strip().decode("ascii", "replace")
        try:
            networks.append(ipaddress.ip_network(text, strict=False))
        except ValueError:
            raise OperatorArgumentError(f"not an IP address or network: {text!r}") from None
    return networks


def _ip_matcher(networks: list[_Network]) -> Operator:
    v4 = [network for network in networks if network.version == 4]
    v6 = [network for network in networks if network.version == 6]

    def ip_match(value: bytes) -> Captures | None:
        # inet_pton's grammar: no zone index, no surrounding space
        if not value or b"%" in value or value != value.strip():
            return None
        try:
            address = ipaddress.ip_address(value.decode("ascii"))
        except (UnicodeDecodeError, ValueError):
            return None
        candidates = v6 if address.version == 6 else v4
        return (value,) if any(address in network for network in candidates) else None

    return ip_match


def _ip_match(argument: bytes) -> Operator:
    return _ip_matcher(ip_networks(part for part in argument.split(b",") if part.strip()))


def _ip_match_from_file(argument: bytes, data_dir: Path) -> Operator:
    entries: list[bytes] = []
    for path in _data_files(argument, data_dir):
        try:
            lines = path.read_bytes().splitlines()
        except OSError as error:
            raise OperatorArgumentError(f"cannot read data file {path}: {error.strerror}") from None
        entries.extend(line for line in lines if line.strip() and not line.strip().startswith(b"#"))
    return _ip_matcher(ip_networks(entries))


# The table


def _never(value: bytes) -> Captures | None:
    return None


def _always(value: bytes) -> Captures | None:
    return (value,)


def _pm_from_file(argument: bytes, data_dir: Path) -> Operator:
    phrases: list[bytes] = []
    for path in _data_files(argument, data_dir):
        phrases.extend(pm_file_phrases(path))
    return compile_phrases(phrases)


_SIMPLE: Final[dict[str, Callable[[bytes], Operator]]] = {
    "rx": compile_regex,
    "pm": lambda argument: compile_phrases(pm_phrases(argument)),
    "detectsqli": lambda argument: _detect_sqli,
    "detectxss": lambda argument: _detect_xss,
    "validatebyterange": _validate_byte_range,
    "validateurlencoding": lambda argument: _validate_url_encoding,
    "validateutf8encoding": lambda argument: _validate_utf8_encoding,
    "within": _within,
    "streq": _streq,
    "beginswith": _begins_with,
    "endswith": _ends_with,
    "contains": _contains,
    "containsword": _contains_word,
    "eq": _eq,
    "ge": _comparison(lambda value, bound: value >= bound),
    "gt": _comparison(lambda value, bound: value > bound),
    "lt": _comparison(lambda value, bound: value < bound),
    "le": _comparison(lambda value, bound: value <= bound),
    "ipmatch": _ip_match,
    "unconditionalmatch": lambda argument: _always,
    "nomatch": lambda argument: _never,
    "rbl": lambda argument: _never,
    "geolookup": lambda argument: _never,
}
_FROM_FILES: Final[dict[str, Callable[[bytes, Path], Operator]]] = {
    "pmfromfile": _pm_from_file,
    "pmf": _pm_from_file,
    "ipmatchfromfile": _ip_match_from_file,
    "ipmatchf": _ip_match_from_file,
}
OPERATOR_NAMES: Final = frozenset(_SIMPLE) | frozenset(_FROM_FILES)


def compile_operator(name: str, argument: str, *, data_dir: Path) -> Operator:
    """The operator ``name`` (without ``@`` or ``!``, any case) compiled with ``argument`` (macros already expanded;
    read as UTF-8, other bytes carried by ``surrogateescape``). ``data_dir`` resolves relative data file names.
    Raises ``UnsupportedOperator`` for a name not in ``OPERATOR_NAMES`` and ``OperatorArgumentError`` for an
    argument that cannot be compiled (a bad pattern, an unreadable data file, a bad network)."""
    key = name.lower()
    data = argument.encode("utf-8", "surrogateescape")
    simple = _SIMPLE.get(key)
    if simple is not None:
        return simple(data)
    from_files = _FROM_FILES.get(key)
    if from_files is not None:
        return from_files(data, data_dir)
    raise UnsupportedOperator(f"unsupported operator @{name}")
