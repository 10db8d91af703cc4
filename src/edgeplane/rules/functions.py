"""The functions of the Rules language: their signatures (checked when an expression is compiled) and their run-time
implementations (called by compiled expressions).

Every implementation takes ``None`` ("no value": a missing header, a JSON key not found) in place of a ``Bytes``
argument and then returns ``None``, so a comparison on the result is false, as in wirefilter. Implementations never
raise on any request: bad input (invalid JSON, undecodable escapes) gives ``None`` or the input unchanged.
Parameters marked literal-only take a literal written in the expression; the implementation is built once from those
literals (``bind``), and only the other arguments are passed per request.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import unquote_to_bytes

from edgeplane.rules.errors import RulesError
from edgeplane.rules.regex import Regex, compile_regex, compile_wildcard
from edgeplane.rules.value_types import BOOL, BYTES, INT, ValueType, array_of


@dataclass(frozen=True, slots=True)
class Argument:
    """An argument as the checker sees it: its type, whether it is a literal (and its value), its position."""

    type: ValueType
    literal: str | int | None
    position: int


@dataclass(frozen=True, slots=True)
class Function:
    """A function: ``check`` validates the arguments and gives the result type (raising ``RulesError``);
    ``bind`` builds the per-request callable from the literal-only arguments' values."""

    name: str
    check: Callable[[Sequence[Argument], int], ValueType]
    literal_params: Callable[[int], frozenset[int]]
    bind: Callable[[dict[int, str | int]], Callable[..., Any]]
    maps_first_argument: bool = True  # ``f(x[*])`` applies ``f`` to each element


def _expect(argument: Argument, expected: ValueType, index: int) -> None:
    if argument.type != expected:
        raise RulesError(
            f"invalid type of argument #{index}: expected value of type {expected}, but got {argument.type}",
            argument.position,
        )


def _arity(arguments: Sequence[Argument], low: int, high: int, position: int) -> None:
    if not low <= len(arguments) <= high:
        expected = str(low) if low == high else f"{low} to {high}" if high < 1000 else f"at least {low}"
        raise RulesError(f"invalid number of arguments: expected {expected}, got {len(arguments)}", position)


def _literal_string(argument: Argument, index: int) -> str:
    if not isinstance(argument.literal, str):
        raise RulesError(f"argument #{index} must be a string literal", argument.position)
    return argument.literal


def _signature(params: Sequence[ValueType], result: ValueType) -> Callable[[Sequence[Argument], int], ValueType]:
    def check(arguments: Sequence[Argument], position: int) -> ValueType:
        _arity(arguments, len(params), len(params), position)
        for index, (argument, expected) in enumerate(zip(arguments, params, strict=True)):
            _expect(argument, expected, index)
        return result

    return check


def _none(_: int) -> frozenset[int]:
    return frozenset()


def _plain(implementation: Callable[..., Any]) -> Callable[[dict[int, str | int]], Callable[..., Any]]:
    return lambda _literals: implementation


_ASCII_LOWER = {code: code + 32 for code in range(ord("A"), ord("Z") + 1)}
_ASCII_UPPER = {code + 32: code for code in range(ord("A"), ord("Z") + 1)}


def lower(value: str | None) -> str | None:
    """ASCII letters to lower case (other bytes unchanged, as wirefilter does)."""
    if value is None:
        return None
    return value.lower() if value.isascii() else value.translate(_ASCII_LOWER)


def upper(value: str | None) -> str | None:
    """ASCII letters to upper case."""
    if value is None:
        return None
    return value.upper() if value.isascii() else value.translate(_ASCII_UPPER)


def url_decode(value: str | None) -> str | None:
    """``%HH`` escapes to their bytes and ``+`` to a space; malformed escapes stay as written."""
    if value is None:
        return None
    if "%" not in value and "+" not in value:
        return value
    raw = unquote_to_bytes(value.replace("+", " ").encode("utf-8", "surrogateescape"))
    return raw.decode("utf-8", "surrogateescape")


def byte_length(value: str | None) -> int | None:
    """The length in bytes."""
    if value is None:
        return None
    return len(value) if value.isascii() else len(value.encode("utf-8", "surrogateescape"))


def starts_with(value: str | None, prefix: str | None) -> bool | None:
    """Whether ``value`` starts with ``prefix``."""
    if value is None or prefix is None:
        return None
    return value.startswith(prefix)


def ends_with(value: str | None, suffix: str | None) -> bool | None:
    """Whether ``value`` ends with ``suffix``."""
    if value is None or suffix is None:
        return None
    return value.endswith(suffix)


def to_string(value: int | None) -> str | None:
    """The decimal text of an integer."""
    return None if value is None else str(value)


def concat(*values: Any) -> Any:
    """Bytes joined, or arrays concatenated."""
    if any(value is None for value in values):
        return None
    if isinstance(values[0], list):
        return [item for value in values for item in value]
    return "".join(values)


def any_true(values: Sequence[bool | None] | None) -> bool:
    """True if an element is true."""
    return values is not None and any(values)


def all_true(values: Sequence[bool | None] | None) -> bool:
    """True if every element is true (and for an empty array, as in wirefilter)."""
    return values is not None and all(values)


def _check_any_all(arguments: Sequence[Argument], position: int) -> ValueType:
    _arity(arguments, 1, 1, position)
    _expect(arguments[0], array_of(BOOL), 0)
    return BOOL


def _check_concat(arguments: Sequence[Argument], position: int) -> ValueType:
    _arity(arguments, 1, 1 << 20, position)
    first = arguments[0].type
    if first != BYTES and first.kind != "Array":
        raise RulesError(f"invalid type of argument #0: expected Bytes or an Array, but got {first}", position)
    for index, argument in enumerate(arguments[1:], start=1):
        _expect(argument, first, index)
    return first


def _check_remove_bytes(arguments: Sequence[Argument], position: int) -> ValueType:
    _arity(arguments, 2, 2, position)
    _expect(arguments[0], BYTES, 0)
    _literal_string(arguments[1], 1)
    return BYTES


def _bind_remove_bytes(literals: dict[int, str | int]) -> Callable[..., Any]:
    table = dict.fromkeys(map(ord, str(literals[1])))

    def remove_bytes(value: str | None) -> str | None:
        return None if value is None else value.translate(table)

    return remove_bytes


def _check_regex_replace(arguments: Sequence[Argument], position: int) -> ValueType:
    _arity(arguments, 3, 3, position)
    _expect(arguments[0], BYTES, 0)
    compile_regex(_literal_string(arguments[1], 1), arguments[1].position)
    _literal_string(arguments[2], 2)
    return BYTES


_GROUP_REFERENCE = re.compile(r"\$\{([0-9]+)\}")


def _expand(template: str, groups: Sequence[str | None]) -> str:
    def group(match: re.Match[str]) -> str:
        index = int(match.group(1))
        return (groups[index] or "") if index < len(groups) else ""

    return _GROUP_REFERENCE.sub(group, template)


def _bind_regex_replace(literals: dict[int, str | int]) -> Callable[..., Any]:
    regex, template = compile_regex(str(literals[1]), 0), str(literals[2])

    def regex_replace(value: str | None) -> str | None:
        if value is None:
            return None
        found = regex.groups_of(value)
        if found is None:
            return value
        start, end, groups = found
        return value[:start] + _expand(template, groups) + value[end:]

    return regex_replace


def _check_wildcard_replace(arguments: Sequence[Argument], position: int) -> ValueType:
    _arity(arguments, 3, 4, position)
    _expect(arguments[0], BYTES, 0)
    pattern = _literal_string(arguments[1], 1)
    _literal_string(arguments[2], 2)
    if len(arguments) == 4 and _literal_string(arguments[3], 3) not in ("", "s"):
        raise RulesError('invalid flags: expected "s"', arguments[3].position)
    compile_wildcard(pattern, strict=False, position=arguments[1].position, capture=True)
    return BYTES


def _bind_wildcard_replace(literals: dict[int, str | int]) -> Callable[..., Any]:
    strict = literals.get(3) == "s"
    regex: Regex = compile_wildcard(str(literals[1]), strict=strict, position=0, capture=True)
    template = str(literals[2])

    def wildcard_replace(value: str | None) -> str | None:
        if value is None:
            return None
        found = regex.groups_of(value)
        if found is None:
            return value
        return _expand(template, found[2])

    return wildcard_replace


def _check_lookup(result: ValueType) -> Callable[[Sequence[Argument], int], ValueType]:
    def check(arguments: Sequence[Argument], position: int) -> ValueType:
        # wirefilter takes exactly one key, a string (Cloudflare's documentation shows a path of keys).
        _arity(arguments, 2, 2, position)
        _expect(arguments[0], BYTES, 0)
        _literal_string(arguments[1], 1)
        return result

    return check


def _bind_lookup(want: type) -> Callable[[dict[int, str | int]], Callable[..., Any]]:
    def bind(literals: dict[int, str | int]) -> Callable[..., Any]:
        keys = [literals[index] for index in sorted(literals)]

        def lookup(document: str | None) -> Any:
            if document is None:
                return None
            try:
                value: Any = json.loads(document)
            except (ValueError, RecursionError):
                return None
            for key in keys:
                if isinstance(key, str) and isinstance(value, dict):
                    value = value.get(key)
                elif isinstance(key, int) and isinstance(value, list) and 0 <= key < len(value):
                    value = value[key]
                else:
                    return None
            if want is int:
                return value if isinstance(value, int) and not isinstance(value, bool) else None
            return value if isinstance(value, str) else None

        return lookup

    return bind


def _second(count: int) -> frozenset[int]:
    return frozenset({1})


def _after_first(count: int) -> frozenset[int]:
    return frozenset(range(1, count))


FUNCTIONS: dict[str, Function] = {
    function.name: function
    for function in (
        Function("any", _check_any_all, _none, _plain(any_true), maps_first_argument=False),
        Function("all", _check_any_all, _none, _plain(all_true), maps_first_argument=False),
        Function("concat", _check_concat, _none, _plain(concat), maps_first_argument=False),
        Function("lower", _signature([BYTES], BYTES), _none, _plain(lower)),
        Function("upper", _signature([BYTES], BYTES), _none, _plain(upper)),
        Function("url_decode", _signature([BYTES], BYTES), _none, _plain(url_decode)),
        Function("len", _signature([BYTES], INT), _none, _plain(byte_length)),
        Function("starts_with", _signature([BYTES, BYTES], BOOL), _none, _plain(starts_with)),
        Function("ends_with", _signature([BYTES, BYTES], BOOL), _none, _plain(ends_with)),
        Function("to_string", _signature([INT], BYTES), _none, _plain(to_string)),
        Function("remove_bytes", _check_remove_bytes, _second, _bind_remove_bytes),
        Function("regex_replace", _check_regex_replace, _after_first, _bind_regex_replace),
        Function("wildcard_replace", _check_wildcard_replace, _after_first, _bind_wildcard_replace),
        Function("lookup_json_string", _check_lookup(BYTES), _after_first, _bind_lookup(str)),
        Function("lookup_json_integer", _check_lookup(INT), _after_first, _bind_lookup(int)),
    )
}
