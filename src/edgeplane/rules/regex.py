"""Regular expressions (``matches``) and wildcard patterns (``wildcard``, ``strict wildcard``) on RE2.

RE2 runs in time linear in the input whatever the pattern, which is what lets users write patterns at all. Values are
matched as their UTF-8 bytes (``surrogateescape`` gives back any byte a request carried), through the RE2 object
directly: the ``re2`` module's ``search`` would also map byte offsets back to characters, which a yes/no test
does not need.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import re2

from edgeplane.rules.errors import RulesError

_UNANCHORED = re2._Anchor.UNANCHORED
_ANCHOR_BOTH = re2._Anchor.ANCHOR_BOTH


def _options(case_sensitive: bool = True) -> re2.Options:
    options = re2.Options()
    options.log_errors = False  # the error is reported as a RulesError, not on stderr
    options.case_sensitive = case_sensitive
    return options


class Regex:
    """A compiled pattern: ``test(value)`` says whether it matches (a search, or the whole value for wildcards);
    ``groups_of(value)`` gives the match's character span and groups. Neither raises."""

    __slots__ = ("_anchor", "_match", "pattern", "test")

    def __init__(self, pattern: str, anchor: object, case_sensitive: bool = True) -> None:
        self.pattern = pattern
        options = _options(case_sensitive)
        try:
            compiled = re2.compile(pattern.encode("utf-8"), options)
        except UnicodeEncodeError:
            # The pattern holds bytes that are not UTF-8 (``\xff`` escapes): RE2 then matches bytes (Latin-1 mode),
            # the pattern's other characters as their UTF-8 byte sequences.
            options.encoding = re2.Options.Encoding.LATIN1
            compiled = re2.compile(pattern.encode("utf-8", "surrogateescape"), options)
        match: Callable[..., Sequence[tuple[int, int]]] = compiled._regexp.Match
        self._match, self._anchor = match, anchor

        def test(value: str) -> bool:
            data = value.encode("utf-8", "surrogateescape")
            return match(anchor, data, 0, len(data))[0][0] >= 0

        self.test: Callable[[str], bool] = test

    def groups_of(self, value: str) -> tuple[int, int, list[str | None]] | None:
        """The first match's start and end (characters) and its groups (0 = the whole match), or None."""
        data = value.encode("utf-8", "surrogateescape")
        spans = self._match(self._anchor, data, 0, len(data))
        if spans[0][0] < 0:
            return None
        groups = [None if start < 0 else data[start:end].decode("utf-8", "surrogateescape") for start, end in spans]
        start = len(data[: spans[0][0]].decode("utf-8", "surrogateescape"))
        end = len(data[: spans[0][1]].decode("utf-8", "surrogateescape"))
        return start, end, groups


def compile_regex(pattern: str, position: int) -> Regex:
    """``pattern`` as an unanchored RE2 search. Raises ``RulesError`` at ``position`` if RE2 rejects it."""
    try:
        return Regex(pattern, _UNANCHORED)
    except (re2.error, UnicodeEncodeError) as error:
        raise RulesError(f"invalid regular expression: {_reason(error)}", position) from None


def wildcard_to_regex(pattern: str, capture: bool = False, strict_escapes: bool = False) -> str:
    """The RE2 pattern matching what the wildcard ``pattern`` matches as a whole: ``*`` is any run of characters,
    ``\\*`` and ``\\\\`` are a literal star and backslash, everything else is literal. With ``capture``, each ``*``
    is a group (``wildcard_replace`` refers to them as ``${1}``...). With ``strict_escapes`` (the ``wildcard``
    operator, as in wirefilter) any other backslash raises ``ValueError``; otherwise it is literal."""
    star = "(.*)" if capture else ".*"
    parts: list[str] = []
    index = 0
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern) and pattern[index + 1] in "*\\":
            parts.append(_escape(pattern[index + 1]))
            index += 2
            continue
        if char == "\\" and strict_escapes:
            problem = "incomplete escape" if index + 1 == len(pattern) else "invalid escape"
            raise ValueError(f"{problem} at character {index}: only \\* and \\\\ are escapes")
        parts.append(star if char == "*" else _escape(char))
        index += 1
    return "(?s)" + "".join(parts)


def _escape(char: str) -> str:
    """``char`` as a literal in an RE2 pattern: ASCII punctuation and controls as ``\\x{HH}``, letters, digits and
    non-ASCII characters (including the lone surrogates that stand for non-UTF-8 bytes) as themselves."""
    if char.isascii() and not char.isalnum():
        return f"\\x{{{ord(char):02x}}}"
    return char


def compile_wildcard(pattern: str, strict: bool, position: int, capture: bool = False) -> Regex:
    """A wildcard pattern matched against whole values, case-insensitively unless ``strict``. Raises ``RulesError``
    at ``position`` if the pattern has a bad escape (unless ``capture``: ``wildcard_replace`` is lenient, as in
    wirefilter) or cannot be compiled (it holds bytes that are not UTF-8)."""
    try:
        regex = wildcard_to_regex(pattern, capture, strict_escapes=not capture)
        return Regex(regex, _ANCHOR_BOTH, case_sensitive=strict)
    except (re2.error, UnicodeEncodeError) as error:
        raise RulesError(f"invalid wildcard pattern: {_reason(error)}", position) from None
    except ValueError as error:
        raise RulesError(f"invalid wildcard: {error}", position) from None


def _reason(error: Exception) -> str:
    if isinstance(error, UnicodeEncodeError):
        return "the pattern is not valid UTF-8"
    detail = error.args[0] if error.args else str(error)
    return detail.decode("utf-8", "replace") if isinstance(detail, bytes) else str(detail)
