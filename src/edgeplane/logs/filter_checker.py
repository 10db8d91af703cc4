"""The filter checker: a parsed filter against a dataset's fields, their types and the seed's operator table.

Which operators apply to which field type (the seed's table for string, int, bool and array; floats and timestamps
are edgeplane's decision and take the int operators):

=============  =====================================================================================
field type     operators
=============  =====================================================================================
string         eq !eq startsWith endsWith !startsWith !endsWith contains !contains in !in
int            eq !eq lt leq gt geq in !in
float          eq !eq lt leq gt geq in !in
timestamp      eq !eq lt leq gt geq in !in
bool           eq !eq
array_string   contains !contains in !in
object         none: object-typed fields are not filterable
=============  =====================================================================================

What a value may be (single values are written as strings, as the seed says; edgeplane also accepts the JSON
number or boolean a reader would expect, and echoes the filter back exactly as written):

- string and array_string fields: a string; in an ``in``/``!in`` array, strings.
- int fields: a decimal integer as a string (``"30"``, ``"-1"``) or a JSON integer; in an array, JSON integers
  only (a string such as ``"30"`` is refused there, as Logpush refuses it).
- float fields: a decimal number as a string (``"1.5"``) or a JSON number; in an array, JSON numbers.
- timestamp fields: Unix nanoseconds written like an int, or an RFC 3339 date-time with a time zone
  (``"2026-11-21T10:00:00Z"``, up to nine fraction digits), anywhere a value goes.
- bool fields: ``"true"``/``"false"`` or JSON ``true``/``false``.
"""

from __future__ import annotations

import calendar
import math
import re
from collections.abc import Mapping
from typing import Final

from edgeplane.logs.datasets import Dataset, Field, FieldType
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_tree import OPERATORS, SET_OPERATORS, Condition, Filter, Node, Operator, Scalar, Value

_NUMERIC: Final[tuple[Operator, ...]] = ("eq", "!eq", "lt", "leq", "gt", "geq", "in", "!in")

OPERATORS_BY_TYPE: Final[Mapping[FieldType, frozenset[Operator]]] = {
    "string": frozenset(
        ("eq", "!eq", "startsWith", "endsWith", "!startsWith", "!endsWith", "contains", "!contains", "in", "!in")
    ),
    "int": frozenset(_NUMERIC),
    "float": frozenset(_NUMERIC),
    "timestamp": frozenset(_NUMERIC),
    "bool": frozenset(("eq", "!eq")),
    "array_string": frozenset(("contains", "!contains", "in", "!in")),
    "object": frozenset(),
}
"""The operators each field type takes."""

_INTEGER: Final = re.compile(r"-?[0-9]+")
_DECIMAL: Final = re.compile(r"-?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]+)?")
_RFC3339: Final = re.compile(
    r"([0-9]{4})-([0-9]{2})-([0-9]{2})[Tt ]([0-9]{2}):([0-9]{2}):([0-9]{2})(?:\.([0-9]{1,9}))?"
    r"(?:([Zz])|([+-])([0-9]{2}):([0-9]{2}))"
)

Comparand = str | int | float | bool | frozenset[str | int | float]
"""A condition's value as it is compared: converted to the field's type; a frozenset for ``in``/``!in``."""


def validate_filter(tree: Filter, dataset: Dataset) -> None:
    """Check every condition of ``tree`` against ``dataset``; raises ``FilterError`` naming the first offence.

    Offences, in the order they are looked for in each condition: the key is not a field of the dataset; the field
    is not filterable; the operator does not apply to the field's type; the value is not of the field's type.
    """
    _check_node(tree.where, "where", dataset)


def checked_field(condition: Condition, dataset: Dataset, path: str = "") -> Field:
    """The field ``condition`` names, if the condition may name it with its operator; else ``FilterError``."""
    field = dataset.field(condition.key)
    if field is None:
        raise FilterError(
            _at(path, "key"), f"unknown field {condition.key!r}; dataset {dataset.name} has no such field"
        )
    if not field.filterable:
        raise FilterError(_at(path, "key"), f"field {field.name} of dataset {dataset.name} cannot be used in a filter")
    allowed = OPERATORS_BY_TYPE[field.type]
    if condition.operator not in allowed:
        takes = ", ".join(op for op in OPERATORS if op in allowed)
        raise FilterError(
            _at(path, "operator"),
            f"operator {condition.operator} does not apply to {field.name}, a field of type {field.type}; "
            f"it takes {takes}",
        )
    return field


def comparand(field: Field, operator: Operator, value: Value, path: str = "") -> Comparand:
    """``value`` converted for comparison with ``field``'s values; ``FilterError`` at ``path.value`` when it cannot be.

    ``in``/``!in`` give a frozenset; timestamps give Unix nanoseconds.
    """
    value_path = _at(path, "value")
    if operator in SET_OPERATORS:
        assert isinstance(value, tuple)
        items = [_convert(field, item, f"{value_path}[{index}]", True) for index, item in enumerate(value)]
        return frozenset(items)
    assert not isinstance(value, tuple)
    return _convert(field, value, value_path, False)


def _check_node(node: Node, path: str, dataset: Dataset) -> None:
    if isinstance(node, Condition):
        field = checked_field(node, dataset, path)
        comparand(field, node.operator, node.value, path)
        return
    for index, member in enumerate(node.members):
        _check_node(member, f"{path}.{node.kind}[{index}]", dataset)


def _convert(field: Field, value: Scalar, path: str, in_array: bool) -> str | int | float | bool:
    kind = field.type
    if kind in ("string", "array_string"):
        if isinstance(value, str):
            return value
        raise FilterError(path, f"must be a string for field {field.name}, not {_kind(value)}")
    if kind == "bool":
        if isinstance(value, bool):
            return value
        if value in ("true", "false"):
            return value == "true"
        raise FilterError(path, f'must be "true" or "false" for field {field.name}')
    if isinstance(value, bool):
        raise FilterError(path, f"must be a number for field {field.name}, not a boolean")
    if kind == "timestamp" and isinstance(value, str) and (nanoseconds := _rfc3339_nanoseconds(value)) is not None:
        return nanoseconds
    if kind in ("int", "timestamp"):
        if isinstance(value, int):
            return value
        if isinstance(value, str) and not in_array and _INTEGER.fullmatch(value):
            return int(value)
        return _refuse_number(field, value, path, in_array, "an integer")
    # float
    if isinstance(value, int | float):
        try:
            number = float(value)
        except OverflowError:  # an integer too large for a float
            raise FilterError(path, f"a number out of range for field {field.name}") from None
        if math.isfinite(number):
            return number
        raise FilterError(path, f"a number out of range for field {field.name}")
    if not in_array and _DECIMAL.fullmatch(value):
        number = float(value)
        if math.isfinite(number):
            return number
    return _refuse_number(field, value, path, in_array, "a number")


def _refuse_number(field: Field, value: Scalar, path: str, in_array: bool, expected: str) -> int:
    where = f"field {field.name}"
    if field.type == "timestamp":
        expected = "Unix nanoseconds or an RFC 3339 date-time"
    if in_array and isinstance(value, str) and field.type != "timestamp":
        raise FilterError(path, f"must be {expected} for {where}; in an in/!in array numbers are written as numbers")
    written = f"written as a string such as {'30' if expected == 'an integer' else '1.5'!r}"
    if field.type == "timestamp":
        written = "such as '2026-11-21T10:00:00Z'"
    raise FilterError(path, f"must be {expected} for {where}, {written}; got {value!r}")


def _rfc3339_nanoseconds(text: str) -> int | None:
    match = _RFC3339.fullmatch(text)
    if match is None:
        return None
    year, month, day, hour, minute, second = (int(match.group(i)) for i in range(1, 7))
    fraction, zulu, sign, offset_hours, offset_minutes = match.group(7, 8, 9, 10, 11)
    if year == 0 or not 1 <= month <= 12 or not 1 <= day <= calendar.monthrange(year, month)[1]:
        return None
    if hour > 23 or minute > 59 or second > 60:
        return None
    if zulu is None and (int(offset_hours) > 23 or int(offset_minutes) > 59):
        return None
    seconds = calendar.timegm((year, month, day, hour, minute, second, 0, 0, 0))
    if zulu is None:
        offset = int(offset_hours) * 3600 + int(offset_minutes) * 60
        seconds -= offset if sign == "+" else -offset
    return seconds * 1_000_000_000 + int((fraction or "").ljust(9, "0"))


def _at(path: str, member: str) -> str:
    return f"{path}.{member}" if path else member


def _kind(value: Scalar) -> str:
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, str):
        return "a string"
    return "a number"
