"""PCRE patterns, as ModSecurity compiles them, translated for RE2 (and for Python's ``re`` where RE2 cannot follow).

ModSecurity v3 (Debian's 3.0.9 is built with PCRE2) hands every ``@rx`` pattern to PCRE without UTF mode, with
``DOTALL`` and ``MULTILINE`` set: the
pattern and the subject are bytes, ``.`` matches any byte, ``^`` and ``$`` match at line boundaries, and ``\\w``,
``\\d``, ``\\s``, ``\\b`` and caseless matching know ASCII only. No library converts PCRE's dialect into RE2's, and
the two differ in small ways that change what matches (PCRE's ``\\s`` includes VT and ``\\v`` is a class; RE2 folds
Latin-1 letters under ``(?i)``; ``\\Z`` and possessive quantifiers do not exist in RE2), so this module parses the
pattern into a small tree and writes it back out with every such meaning spelt explicitly: characters as byte
classes with case already folded, anchors in scoped flag groups, no inline flags left.

What RE2 cannot express (lookarounds, backreferences, atomic groups, possessive quantifiers where dropping the
possessiveness could change the result) is written as a *superset* for RE2, the assertion dropped, the backreference
replaced by its group's pattern. Such a translation is not exact: a match of the RE2 form is then confirmed by Python's
``re`` (which has all of these) on the same tree written for Python, so requests that do not match at all, nearly all
of them, never reach the backtracking engine. One case is exact except on texts ending in a newline: PCRE's
multiline ``^`` does not match after that final newline, RE2's does, which matters where the rest of the pattern can
match empty there (``^$``); such matches are confirmed the same way.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from edgeplane.seclang.errors import OperatorArgumentError

ALL_BYTES = (1 << 256) - 1

# A character class is a 256-bit integer: bit b set when byte b belongs to it.


def _bits(chars: bytes | str) -> int:
    value = 0
    for char in chars.encode("latin-1") if isinstance(chars, str) else chars:
        value |= 1 << char
    return value


def _range(low: int, high: int) -> int:
    return ((1 << (high + 1)) - 1) ^ ((1 << low) - 1)


_DIGIT = _range(0x30, 0x39)
_UPPER = _range(0x41, 0x5A)
_LOWER = _range(0x61, 0x7A)
_WORD = _DIGIT | _UPPER | _LOWER | _bits("_")
_SPACE = _bits(" \t\n\x0b\x0c\r")  # PCRE's \s includes VT (since 8.34, and in PCRE2)
_HORIZONTAL = _bits("\t \xa0")  # \h without UTF mode
_VERTICAL = _range(0x0A, 0x0D) | _bits("\x85")  # \v without UTF mode: a class, not the VT character
_NEWLINE = _bits("\n")

_POSIX = {
    "alnum": _DIGIT | _UPPER | _LOWER,
    "alpha": _UPPER | _LOWER,
    "ascii": _range(0, 0x7F),
    "blank": _bits(" \t"),
    "cntrl": _range(0, 0x1F) | _bits("\x7f"),
    "digit": _DIGIT,
    "graph": _range(0x21, 0x7E),
    "lower": _LOWER,
    "print": _range(0x20, 0x7E),
    "punct": _range(0x21, 0x7E) & ~(_DIGIT | _UPPER | _LOWER),
    "space": _SPACE,
    "upper": _UPPER,
    "word": _WORD,
    "xdigit": _DIGIT | _bits("abcdefABCDEF"),
}

_ESCAPE_CLASSES = {
    "d": _DIGIT,
    "D": ALL_BYTES & ~_DIGIT,
    "w": _WORD,
    "W": ALL_BYTES & ~_WORD,
    "s": _SPACE,
    "S": ALL_BYTES & ~_SPACE,
    "h": _HORIZONTAL,
    "H": ALL_BYTES & ~_HORIZONTAL,
    "v": _VERTICAL,
    "V": ALL_BYTES & ~_VERTICAL,
}
_ESCAPE_CHARS = {"n": 0x0A, "r": 0x0D, "t": 0x09, "f": 0x0C, "e": 0x1B, "a": 0x07}


def _fold(chars: int) -> int:
    """``chars`` with the other case of each ASCII letter added: PCRE's caseless matching without UTF mode."""
    return chars | ((chars & _UPPER) << 32) | ((chars & _LOWER) >> 32)


# The tree. Nodes are small frozen records; a sequence is a tuple of nodes, an alternation a tuple of sequences.


@dataclass(frozen=True, slots=True)
class Chars:
    """One byte out of a set (a literal, a class, ``.``, ``\\w``...), case already folded."""

    bits: int


@dataclass(frozen=True, slots=True)
class Assertion:
    """A zero-width test: ``start`` (\\A), ``end`` (\\z), ``end_or_final_newline`` (\\Z, ``$`` without multiline),
    ``line_start`` and ``line_end`` (multiline ``^`` and ``$``), ``word_boundary``, ``not_word_boundary``."""

    kind: str


@dataclass(frozen=True, slots=True)
class Group:
    """Alternatives in parentheses. ``kind``: ``capture`` (``number`` set), ``plain``, ``atomic``, ``lookahead``,
    ``negative_lookahead``, ``lookbehind``, ``negative_lookbehind``."""

    alternatives: tuple[tuple[Node, ...], ...]
    kind: str
    number: int = 0


@dataclass(frozen=True, slots=True)
class Repeat:
    """``item`` repeated ``low`` to ``high`` times (``None``: unbounded); ``mode`` greedy, lazy or possessive."""

    item: Node
    low: int
    high: int | None
    mode: str


@dataclass(frozen=True, slots=True)
class Backreference:
    """``\\N``: the text group ``number`` captured, compared caselessly when ``caseless``."""

    number: int
    caseless: bool


Node = Chars | Assertion | Group | Repeat | Backreference


@dataclass(slots=True)
class _Flags:
    caseless: bool = False
    dotall: bool = True  # ModSecurity compiles with PCRE_DOTALL | PCRE_MULTILINE
    multiline: bool = True
    extended: bool = False

    def copy(self) -> _Flags:
        return _Flags(self.caseless, self.dotall, self.multiline, self.extended)


class _Parser:
    """A recursive-descent reader of PCRE syntax (the part of it rule sets use) into the tree above."""

    def __init__(self, pattern: str) -> None:
        self.text = pattern  # each character is one byte of the pattern (Latin-1)
        self.index = 0
        self.groups = 0
        self.group_names: dict[str, int] = {}
        self.group_bodies: dict[int, Group] = {}
        self.references: list[int] = []

    def fail(self, problem: str) -> OperatorArgumentError:
        return OperatorArgumentError(f"invalid regular expression at offset {self.index}: {problem}")

    def parse(self) -> Group:
        alternatives = self.alternatives(_Flags())
        if self.index < len(self.text):
            raise self.fail("unmatched )")
        if any(number > self.groups or number == 0 for number in self.references):
            raise self.fail("reference to a group that does not exist")
        return Group(alternatives, "plain")

    def alternatives(self, flags: _Flags) -> tuple[tuple[Node, ...], ...]:
        # An option setting such as (?i) lasts to the end of the group, across later alternatives too.
        result: list[tuple[Node, ...]] = []
        sequence: list[Node] = []
        while self.index < len(self.text):
            char = self.text[self.index]
            if char == ")":
                break
            if char == "|":
                self.index += 1
                result.append(tuple(sequence))
                sequence = []
                continue
            node = self.atom(flags)
            if node is None:
                continue
            sequence.append(self.quantified(node, flags))
        result.append(tuple(sequence))
        return tuple(result)

    def skip_extended(self, flags: _Flags) -> None:
        while flags.extended and self.index < len(self.text):
            char = self.text[self.index]
            if char in " \t\n\r\x0b\x0c":
                self.index += 1
            elif char == "#":
                end = self.text.find("\n", self.index)
                self.index = len(self.text) if end < 0 else end + 1
            else:
                return

    def quantified(self, node: Node, flags: _Flags) -> Node:
        while True:
            self.skip_extended(flags)
            if self.index >= len(self.text):
                return node
            char = self.text[self.index]
            bounds: tuple[int, int | None] | None = None
            if char == "*":
                bounds, self.index = (0, None), self.index + 1
            elif char == "+":
                bounds, self.index = (1, None), self.index + 1
            elif char == "?":
                bounds, self.index = (0, 1), self.index + 1
            elif char == "{":
                bounds = self.braces()
            if bounds is None:
                return node
            mode = "greedy"
            if self.index < len(self.text) and self.text[self.index] in "?+":
                mode = "lazy" if self.text[self.index] == "?" else "possessive"
                self.index += 1
            if isinstance(node, Repeat):
                raise self.fail("quantifier does not follow a repeatable item")  # a**, a{2}{3}
            low, high = bounds
            if high is not None and high < low:
                raise self.fail("numbers out of order in {} quantifier")
            node = Repeat(node, low, high, mode)

    def braces(self) -> tuple[int, int | None] | None:
        # {n}, {n,}, {n,m}; anything else (including {,m}) is literal text in PCRE.
        end = self.text.find("}", self.index)
        if end < 0:
            return None
        body = self.text[self.index + 1 : end]
        low, comma, high = body.partition(",")
        if not low.isdigit() or not (high.isdigit() or high == ""):
            return None
        if not (low.isascii() and high.isascii()):
            return None
        self.index = end + 1
        if not comma:
            return int(low), int(low)
        return int(low), (int(high) if high else None)

    def atom(self, flags: _Flags) -> Node | None:
        self.skip_extended(flags)
        if self.index >= len(self.text):
            return None
        char = self.text[self.index]
        if char in "|)":
            return None
        self.index += 1
        if char == "(":
            return self.group(flags)
        if char == "[":
            return Chars(self.char_class(flags))
        if char == ".":
            return Chars(ALL_BYTES if flags.dotall else ALL_BYTES & ~_NEWLINE)
        if char == "^":
            return Assertion("line_start" if flags.multiline else "start")
        if char == "$":
            return Assertion("line_end" if flags.multiline else "end_or_final_newline")
        if char in "*+?":
            raise self.fail("nothing to repeat")
        if char == "\\":
            return self.escape(flags)
        return self.literal(ord(char), flags)

    def literal(self, byte: int, flags: _Flags) -> Chars:
        bits = 1 << byte
        return Chars(_fold(bits) if flags.caseless else bits)

    def group(self, flags: _Flags) -> Node | None:
        text = self.text
        kind = "capture"
        name = ""
        inner = flags.copy()
        if text.startswith("?", self.index):
            self.index += 1
            head = text[self.index : self.index + 2]
            if head.startswith(":"):
                kind, self.index = "plain", self.index + 1
            elif head.startswith(">"):
                kind, self.index = "atomic", self.index + 1
            elif head.startswith("="):
                kind, self.index = "lookahead", self.index + 1
            elif head.startswith("!"):
                kind, self.index = "negative_lookahead", self.index + 1
            elif head == "<=":
                kind, self.index = "lookbehind", self.index + 2
            elif head == "<!":
                kind, self.index = "negative_lookbehind", self.index + 2
            elif head.startswith("#"):
                end = text.find(")", self.index)
                if end < 0:
                    raise self.fail("missing ) after comment")
                self.index = end + 1
                return None
            elif head.startswith(("<", "'")) or head == "P<":
                self.index += 2 if head == "P<" else 1
                close = "'" if head.startswith("'") else ">"
                end = text.find(close, self.index)
                if end < 0:
                    raise self.fail("unterminated group name")
                name, self.index = text[self.index : end], end + 1
            else:
                return self.option_setting(flags, inner)
        number = 0
        if kind == "capture":
            self.groups += 1
            number = self.groups
            if name:
                self.group_names[name] = number
        alternatives = self.alternatives(inner)
        if self.index >= len(text) or text[self.index] != ")":
            raise self.fail("missing )")
        self.index += 1
        group = Group(alternatives, kind, number)
        if number:
            self.group_bodies[number] = group
        return group

    def option_setting(self, flags: _Flags, inner: _Flags) -> Node | None:
        """``(?i)`` changes ``flags`` for the rest of the enclosing group; ``(?i:...)`` is a group with them."""
        on = True
        while self.index < len(self.text):
            char = self.text[self.index]
            self.index += 1
            if char == "-":
                on = False
            elif char == "i":
                inner.caseless = on
            elif char == "s":
                inner.dotall = on
            elif char == "m":
                inner.multiline = on
            elif char == "x":
                inner.extended = on
            elif char == ")":
                flags.caseless, flags.dotall = inner.caseless, inner.dotall
                flags.multiline, flags.extended = inner.multiline, inner.extended
                return None
            elif char == ":":
                alternatives = self.alternatives(inner)
                if self.index >= len(self.text) or self.text[self.index] != ")":
                    raise self.fail("missing )")
                self.index += 1
                return Group(alternatives, "plain")
            else:
                raise self.fail(f"unsupported group or option (?{char}")
        raise self.fail("missing )")

    def number_escape(self, flags: _Flags) -> Node:
        # PCRE2's rule: \1..\9, a number starting with 8 or 9, or one no larger than the count of groups opened so
        # far is a backreference; otherwise up to three octal digits give a byte.
        start = self.index - 1
        end = start
        while end < len(self.text) and self.text[end] in "0123456789":
            end += 1
        number = int(self.text[start:end])
        if number < 10 or self.text[start] in "89" or number <= self.groups:
            self.index = end
            self.references.append(number)
            return Backreference(number, flags.caseless)
        end = start
        while end < len(self.text) and end - start < 3 and self.text[end] in "01234567":
            end += 1
        self.index = end
        return self.literal(int(self.text[start:end], 8) & 0xFF, flags)

    def escape(self, flags: _Flags) -> Node | None:
        if self.index >= len(self.text):
            raise self.fail("\\ at end of pattern")
        char = self.text[self.index]
        self.index += 1
        if char in _ESCAPE_CLASSES:
            bits = _ESCAPE_CLASSES[char]
            return Chars(bits)
        assertions = {"b": "word_boundary", "B": "not_word_boundary", "A": "start", "G": "start", "z": "end"}
        if char in assertions:
            return Assertion(assertions[char])
        if char == "Z":
            return Assertion("end_or_final_newline")
        if char in "123456789":
            return self.number_escape(flags)
        if char == "g" or char == "k":
            return self.named_backreference(char, flags)
        if char == "Q":
            return self.quoted(flags)
        if char == "E":
            return None
        byte = self.char_escape(char)
        return self.literal(byte, flags)

    def named_backreference(self, char: str, flags: _Flags) -> Node:
        text = self.text
        pairs = {"{": "}", "<": ">", "'": "'"}
        opening = text[self.index : self.index + 1]
        if opening in pairs:
            end = text.find(pairs[opening], self.index + 1)
            if end < 0:
                raise self.fail(f"unterminated \\{char} reference")
            reference, self.index = text[self.index + 1 : end], end + 1
        elif char == "g":
            end = self.index
            while end < len(text) and (text[end].isdigit() or (end == self.index and text[end] in "+-")):
                end += 1
            reference, self.index = text[self.index : end], end
        else:
            raise self.fail("\\k must be followed by a name in <>, '' or {}")
        if reference.lstrip("-+").isdigit():
            number = int(reference)
            if reference.startswith(("-", "+")):
                number = self.groups + 1 + number if number < 0 else self.groups + number
        elif reference in self.group_names:
            number = self.group_names[reference]
        else:
            raise self.fail(f"reference to unknown group {reference!r}")
        self.references.append(number)
        return Backreference(number, flags.caseless)

    def quoted(self, flags: _Flags) -> Node:
        end = self.text.find("\\E", self.index)
        end = len(self.text) if end < 0 else end
        literal = self.text[self.index : end]
        self.index = min(len(self.text), end + 2)
        return Group(((*(self.literal(ord(char), flags) for char in literal),),), "plain")

    def char_escape(self, char: str) -> int:
        """The byte an escape stands for, after the backslash and ``char`` (``\\n``, ``\\x41``, ``\\101``...)."""
        text = self.text
        if char in _ESCAPE_CHARS:
            return _ESCAPE_CHARS[char]
        if char == "x":
            if text.startswith("{", self.index):
                end = text.find("}", self.index)
                digits = text[self.index + 1 : end] if end > 0 else ""
                if not digits or any(d not in "0123456789abcdefABCDEF" for d in digits):
                    raise self.fail("bad \\x{} escape")
                self.index = end + 1
                value = int(digits, 16)
                if value > 0xFF:
                    raise self.fail("character value in \\x{} is too large without UTF mode")
                return value
            digits = ""
            while len(digits) < 2 and self.index < len(text) and text[self.index] in "0123456789abcdefABCDEF":
                digits += text[self.index]
                self.index += 1
            return int(digits, 16) if digits else 0
        if char == "0":
            digits = ""
            while len(digits) < 2 and self.index < len(text) and text[self.index] in "01234567":
                digits += text[self.index]
                self.index += 1
            return int(digits, 8) if digits else 0
        if char == "o" and text.startswith("{", self.index):
            end = text.find("}", self.index)
            digits = text[self.index + 1 : end] if end > 0 else ""
            if not digits or any(d not in "01234567" for d in digits) or int(digits, 8) > 0xFF:
                raise self.fail("bad \\o{} escape")
            self.index = end + 1
            return int(digits, 8)
        if char == "c":
            if self.index >= len(text) or not text[self.index].isascii():
                raise self.fail("\\c at end of pattern")
            control = text[self.index].upper()
            self.index += 1
            return ord(control) ^ 0x40
        if char.isascii() and char.isalnum():
            raise self.fail(f"unsupported escape \\{char}")
        return ord(char)

    def char_class(self, flags: _Flags) -> int:
        text = self.text
        negated = text.startswith("^", self.index)
        if negated:
            self.index += 1
        bits = 0
        first = True
        while True:
            if self.index >= len(text):
                raise self.fail("missing terminating ] for character class")
            char = text[self.index]
            if char == "]" and not first:
                self.index += 1
                break
            first = False
            if char == "[" and text.startswith(("[:", "[=", "[."), self.index):
                end = self.posix_end()
                if end > 0 and text[self.index + 1] == ":":
                    name = text[self.index + 2 : end]
                    posix_negated = name.startswith("^")
                    posix = _POSIX.get(name.lstrip("^"))
                    if posix is None:
                        raise self.fail(f"unknown POSIX class name {name!r}")
                    bits |= (ALL_BYTES & ~posix) if posix_negated else posix
                    self.index = end + 2
                    continue
                if end > 0:
                    raise self.fail("POSIX collating elements are not supported")
            single: int | None
            self.index += 1
            if char == "\\":
                single, escaped_class = self.class_escape()
                if escaped_class is not None:
                    if text.startswith("-", self.index) and text[self.index + 1 : self.index + 2] not in ("]", ""):
                        raise self.fail("invalid range in character class")  # [\d-z], as PCRE2 decides
                    bits |= escaped_class
                    continue
                if single is None:
                    continue
            else:
                single = ord(char)
            if (
                single is not None
                and text.startswith("-", self.index)
                and self.index + 1 < len(text)
                and text[self.index + 1] != "]"
            ):
                self.index += 1
                high_char = text[self.index]
                self.index += 1
                high: int | None = ord(high_char)
                if high_char == "\\":
                    high, high_class = self.class_escape()
                    if high_class is not None or high is None:
                        raise self.fail("invalid range in character class")  # [a-\d]
                elif high_char == "[" and text.startswith(":", self.index):
                    raise self.fail("invalid range in character class")  # [a-[:digit:]]
                if high is not None:
                    if high < single:
                        raise self.fail("range out of order in character class")
                    bits |= _range(single, high)
                    continue
            bits |= 1 << single
        if flags.caseless:
            bits = _fold(bits)
        return (ALL_BYTES & ~bits) if negated else bits

    def posix_end(self) -> int:
        """Where the ``:]`` (or ``=]``, ``.]``) closing a POSIX item that starts at ``self.index`` is, or -1: as PCRE
        decides it, an item that meets a ``]`` first is no POSIX item, and its ``[`` a plain character."""
        text = self.text
        terminator = text[self.index + 1]
        index = self.index + 2
        while index < len(text):
            char = text[index]
            if char == "\\" and text[index + 1 : index + 2] in ("]", "\\"):
                index += 2
                continue
            if (char == "[" and text[index + 1 : index + 2] == terminator) or char == "]":
                return -1
            if char == terminator and text[index + 1 : index + 2] == "]":
                return index
            index += 1
        return -1

    def class_escape(self) -> tuple[int | None, int | None]:
        """An escape inside ``[...]``: (byte, None), or (None, class bits) for ``\\d`` and the like."""
        if self.index >= len(self.text):
            raise self.fail("\\ at end of pattern")
        char = self.text[self.index]
        self.index += 1
        if char in _ESCAPE_CLASSES:
            return None, _ESCAPE_CLASSES[char]
        if char == "b":
            return 0x08, None
        if char == "E" or char == "Q":
            if char == "Q":
                end = self.text.find("\\E", self.index)
                end = len(self.text) if end < 0 else end
                literal = self.text[self.index : end]
                self.index = min(len(self.text), end + 2)
                return None, _bits(literal)
            return None, 0
        if char in "1234567":
            digits = char
            while len(digits) < 3 and self.index < len(self.text) and self.text[self.index] in "01234567":
                digits += self.text[self.index]
                self.index += 1
            return int(digits, 8) & 0xFF, None
        return self.char_escape(char), None


def parse(pattern: bytes) -> Group:
    """``pattern`` (bytes, as PCRE reads it without UTF mode) as a tree. Raises ``OperatorArgumentError``."""
    return _Parser(pattern.decode("latin-1")).parse()


# Writing the tree back out.


def _class_text(bits: int) -> str:
    """A byte class as regex text that RE2 (Latin-1) and Python (bytes) read the same way."""
    if bits == ALL_BYTES:
        return "[\\x00-\\xff]"
    ranges: list[tuple[int, int]] = []
    byte = 0
    while byte < 256:
        if bits >> byte & 1:
            start = byte
            while byte < 255 and bits >> (byte + 1) & 1:
                byte += 1
            ranges.append((start, byte))
        byte += 1
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char_text(ranges[0][0])
    if not ranges:
        return "[^\\x00-\\xff]"
    parts = []
    for low, high in ranges:
        if low == high:
            parts.append(_char_text(low))
        elif high == low + 1:
            parts.append(_char_text(low) + _char_text(high))
        else:
            parts.append(f"{_char_text(low)}-{_char_text(high)}")
    return "[" + "".join(parts) + "]"


def _char_text(byte: int) -> str:
    char = chr(byte)
    if char.isascii() and char.isalnum():
        return char
    return f"\\x{byte:02x}"


@dataclass(slots=True)
class _Writer:
    """Writes a tree as RE2 text (``dialect`` ``re2``, inexact constructs as supersets) or Python ``re`` text."""

    dialect: str
    bodies: dict[int, Group]
    capturing: bool = True
    inexact: list[str] = field(default_factory=list)
    # Whether what follows the node being written can match empty (true at the pattern's end), and whether a
    # multiline ^ was written with such a continuation: RE2's ^ also matches after a newline that ends the text,
    # PCRE's does not, which only shows when the rest of the match is empty there.
    follow_nullable: bool = True
    line_start_at_end: bool = False

    def sequence(self, nodes: Sequence[Node], in_copy: bool = False) -> str:
        parts = []
        remaining = tuple(nodes)
        while remaining:
            node, rest = remaining[0], remaining[1:]
            if (
                self.dialect == "re2"
                and isinstance(node, Repeat)
                and node.mode == "possessive"
                and isinstance(node.item, Chars)
                and node.high is None
                and not _possessive_is_greedy(node, rest)
            ):
                # X*+ Y is X* Y' where Y' is Y unable to begin with a byte of X: the possessive run ends where a
                # byte outside X stands, and Y' cannot start anywhere inside the run.
                restricted = _restrict_first(rest, node.item.bits)
                if restricted is not None:
                    parts.append(self.node(Repeat(node.item, node.low, None, "greedy"), (), in_copy))
                    remaining = restricted
                    continue
            outer = self.follow_nullable
            self.follow_nullable = outer and _first(rest)[1]
            parts.append(self.node(node, rest, in_copy))
            self.follow_nullable = outer
            remaining = rest
        return "".join(parts)

    def alternatives(self, alternatives: Sequence[Sequence[Node]], in_copy: bool) -> str:
        return "|".join(self.sequence(sequence, in_copy) for sequence in alternatives)

    def node(self, node: Node, rest: Sequence[Node], in_copy: bool) -> str:
        if isinstance(node, Chars):
            return _class_text(node.bits)
        if isinstance(node, Assertion):
            return self.assertion(node, in_copy)
        if isinstance(node, Group):
            return self.group(node, in_copy)
        if isinstance(node, Repeat):
            return self.repeat(node, rest, in_copy)
        return self.backreference(node, in_copy)

    def assertion(self, node: Assertion, in_copy: bool) -> str:
        if in_copy and self.dialect == "re2":
            return ""
        kind = node.kind
        if kind == "start":
            return "\\A"
        if kind == "end":
            return "\\z" if self.dialect == "re2" else "\\Z"
        if kind == "end_or_final_newline":
            # RE2 has no zero-width form: the final newline is consumed, which moves the match's end by one.
            return "(?:\\n?\\z)" if self.dialect == "re2" else "(?=\\n?\\Z)"
        if kind == "line_start":
            if self.dialect == "python":
                return "(?:\\A|(?<=\\n)(?=[\\x00-\\xff]))"
            self.line_start_at_end = self.line_start_at_end or self.follow_nullable
            return "(?m:^)"
        if kind == "line_end":
            return "(?m:$)"
        return "\\b" if kind == "word_boundary" else "\\B"

    def group(self, node: Group, in_copy: bool) -> str:
        kind = node.kind
        if self.dialect == "python":
            if kind in ("lookbehind", "negative_lookbehind") and len(node.alternatives) > 1:
                # PCRE lets each alternative of a lookbehind have its own length; Python wants one length.
                opening = "(?<=" if kind == "lookbehind" else "(?<!"
                each = [opening + self.sequence(sequence) + ")" for sequence in node.alternatives]
                return "(?:" + "|".join(each) + ")" if kind == "lookbehind" else "".join(each)
            opening = {
                "capture": "(",
                "plain": "(?:",
                "atomic": "(?>",
                "lookahead": "(?=",
                "negative_lookahead": "(?!",
                "lookbehind": "(?<=",
                "negative_lookbehind": "(?<!",
            }[kind]
            if kind not in ("capture", "plain", "atomic"):
                outer, self.follow_nullable = self.follow_nullable, True
                text = opening + self.alternatives(node.alternatives, False) + ")"
                self.follow_nullable = outer
                return text
            return opening + self.alternatives(node.alternatives, False) + ")"
        if kind in ("lookahead", "negative_lookahead", "lookbehind", "negative_lookbehind"):
            self.inexact.append(kind.replace("_", " "))
            return ""
        if kind == "atomic":
            self.inexact.append("atomic group")
        opening = "(" if kind == "capture" and self.capturing and not in_copy else "(?:"
        return opening + self.alternatives(node.alternatives, in_copy) + ")"

    def repeat(self, node: Repeat, rest: Sequence[Node], in_copy: bool) -> str:
        item = self.node(node.item, (), in_copy)
        if not isinstance(node.item, Chars):
            item = f"(?:{item})"
        low, high = node.low, node.high
        if self.dialect == "re2" and max(low, high or 0) > 1000:
            self.inexact.append("repetition count above 1000")
            return item + "*"
        if (low, high) == (0, None):
            text = item + "*"
        elif (low, high) == (1, None):
            text = item + "+"
        elif (low, high) == (0, 1):
            text = item + "?"
        elif high is None:
            text = f"{item}{{{low},}}"
        elif low == high:
            text = f"{item}{{{low}}}"
        else:
            text = f"{item}{{{low},{high}}}"
        if node.mode == "lazy":
            return text + "?"
        if node.mode == "possessive":
            if self.dialect == "python":
                return text + "+"
            if not _possessive_is_greedy(node, rest):
                self.inexact.append("possessive quantifier")
        return text

    def backreference(self, node: Backreference, in_copy: bool) -> str:
        if self.dialect == "python":
            return f"(?{'i' if node.caseless else ''}:\\{node.number})"
        self.inexact.append("backreference")
        body = self.bodies.get(node.number)
        if body is None or in_copy:
            return "[\\x00-\\xff]*"
        # Any text the group captured matches the group's pattern with its assertions dropped; caselessly when the
        # reference compares caselessly.
        copy = _Writer("re2", self.bodies)
        text = copy.alternatives(body.alternatives, True)
        if node.caseless:
            text = _fold_text(body, copy)
        return f"(?:{text})"


def _fold_text(body: Group, writer: _Writer) -> str:
    return writer.alternatives(tuple(tuple(_folded(node) for node in seq) for seq in body.alternatives), True)


def _folded(node: Node) -> Node:
    if isinstance(node, Chars):
        return Chars(_fold(node.bits))
    if isinstance(node, Group):
        return Group(tuple(tuple(_folded(n) for n in seq) for seq in node.alternatives), node.kind, node.number)
    if isinstance(node, Repeat):
        return Repeat(_folded(node.item), node.low, node.high, node.mode)
    return node


def _first(nodes: Sequence[Node]) -> tuple[int, bool]:
    """The bytes a match of ``nodes`` can begin with, and whether it can be empty. Assertions count as empty: the
    answer is a superset, which is what the caller's safety test needs."""
    bits = 0
    for node in nodes:
        node_bits, nullable = _first_of(node)
        bits |= node_bits
        if not nullable:
            return bits, False
    return bits, True


def _first_of(node: Node) -> tuple[int, bool]:
    if isinstance(node, Chars):
        return node.bits, False
    if isinstance(node, Assertion):
        return 0, True
    if isinstance(node, Group):
        if node.kind not in ("capture", "plain", "atomic"):
            return 0, True
        bits, nullable = 0, False
        for sequence in node.alternatives:
            sequence_bits, sequence_nullable = _first(sequence)
            bits |= sequence_bits
            nullable = nullable or sequence_nullable
        return bits, nullable
    if isinstance(node, Repeat):
        bits, nullable = _first_of(node.item)
        return bits, nullable or node.low == 0
    return ALL_BYTES, True


def _possessive_is_greedy(node: Repeat, rest: Sequence[Node]) -> bool:
    """Whether ``node`` (possessive) may be written greedy without changing any match: it repeats one byte class,
    and what follows it in its sequence must consume a byte outside that class. Giving back a repetition would
    leave a byte of the class next, where the rest cannot start, so backtracking into it can never succeed."""
    if not isinstance(node.item, Chars):
        return False
    bits, nullable = _first(rest)
    return not nullable and bits & node.item.bits == 0


def _restrict_first(nodes: tuple[Node, ...], forbidden: int) -> tuple[Node, ...] | None:
    """``nodes`` matching what they matched except texts that begin with a byte of ``forbidden``; ``None`` when that
    cannot be written without copying groups (the sequence can match empty, or begins with a repeated group)."""
    if not nodes:
        return None
    head, tail = nodes[0], nodes[1:]
    if isinstance(head, Assertion):
        restricted = _restrict_first(tail, forbidden)
        return None if restricted is None else (head, *restricted)
    if isinstance(head, Chars):
        return (Chars(head.bits & ~forbidden), *tail)
    if isinstance(head, Group) and head.kind in ("capture", "plain"):
        alternatives = []
        for sequence in head.alternatives:
            restricted = _restrict_first(sequence, forbidden)
            if restricted is None:
                return None
            alternatives.append(restricted)
        return (Group(tuple(alternatives), head.kind, head.number), *tail)
    if isinstance(head, Repeat) and isinstance(head.item, Chars) and head.low >= 1:
        first = Chars(head.item.bits & ~forbidden)
        high = None if head.high is None else head.high - 1
        if high == 0:
            return (first, *tail)
        return (first, Repeat(head.item, head.low - 1, high, head.mode), *tail)
    return None


@dataclass(frozen=True, slots=True)
class Translation:
    """A PCRE pattern written for RE2 and for Python's ``re``. ``exact``: the RE2 pattern matches exactly the texts
    the PCRE pattern matches, with the same groups; otherwise it matches a superset and ``python`` decides.
    ``re2_test`` is ``re2`` without capturing groups (RE2 answers yes or no fastest without them).
    ``approximations`` names what RE2 could not express. ``exact_unless_final_newline``: exact, except that on a text
    ending in a newline the RE2 form may match where PCRE does not (a multiline ``^`` followed by what can match
    empty, as in ``^$``: PCRE's ``^`` does not match after the final newline, RE2's does)."""

    re2: bytes
    re2_test: bytes
    python: bytes
    exact: bool
    exact_unless_final_newline: bool
    approximations: tuple[str, ...]
    groups: int


def translate(pattern: bytes) -> Translation:
    """``pattern`` as ModSecurity's PCRE reads it, written for RE2 and for Python. Raises ``OperatorArgumentError``
    when the pattern is not valid PCRE or uses what this translation does not support (``\\p``, ``\\R``, ``(?|``,
    callouts, recursion)."""
    parser = _Parser(pattern.decode("latin-1"))
    tree = parser.parse()
    re2_writer = _Writer("re2", parser.group_bodies)
    re2_text = re2_writer.alternatives(tree.alternatives, False)
    re2_test = _Writer("re2", parser.group_bodies, capturing=False).alternatives(tree.alternatives, False)
    python_text = _Writer("python", parser.group_bodies).alternatives(tree.alternatives, False)
    approximations = tuple(dict.fromkeys(re2_writer.inexact))
    return Translation(
        re2_text.encode("latin-1"),
        re2_test.encode("latin-1"),
        python_text.encode("latin-1"),
        not approximations and not re2_writer.line_start_at_end,
        not approximations and re2_writer.line_start_at_end,
        approximations,
        parser.groups,
    )
