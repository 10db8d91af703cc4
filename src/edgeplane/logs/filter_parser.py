"""The filter parser: the ``filter`` string of a Logpush job in, a ``Filter`` tree or a ``FilterError`` out.

Checks made here need no dataset: the text is at most ``MAX_FILTER_BYTES`` bytes of UTF-8 holding one JSON object
whose only member is ``where``; every node is a condition or a group of the right shape; every operator is one of the
14; ``in``/``!in`` take a non-empty array of strings and numbers, the other operators a single string, number or
boolean; there are at most ``MAX_OPERATORS`` operators (conditions and groups). Duplicate JSON members, ``NaN`` and
infinite numbers are refused. With a dataset, ``parse_filter`` also runs ``validate_filter`` (field names, field
types, values).
"""

from __future__ import annotations

import json
import math
from collections.abc import Sequence
from typing import Any, Final, cast

from edgeplane.logs.datasets import Dataset
from edgeplane.logs.errors import FilterError
from edgeplane.logs.filter_checker import validate_filter
from edgeplane.logs.filter_tree import OPERATORS, SET_OPERATORS, Condition, Filter, Group, Node, Operator, Scalar

MAX_FILTER_BYTES: Final = 1000
"""The seed's size limit, in bytes of UTF-8."""

MAX_OPERATORS: Final = 30
"""The seed's limit on operators ("approximately 30"). Counted are the operators the JSON writes: each condition's
``operator`` and each group's ``and``/``or``. (Counting conditions alone would make the limit unreachable: 31
conditions never fit in 1000 bytes.)"""

_CONDITION_MEMBERS: Final = ("key", "operator", "value")


class _JsonObject(dict[str, Any]):
    """A decoded JSON object that remembers which member names appeared more than once."""

    duplicates: list[str]


def _object_from_pairs(pairs: list[tuple[str, Any]]) -> _JsonObject:
    obj = _JsonObject()
    obj.duplicates = []
    for name, value in pairs:
        if name in obj and name not in obj.duplicates:
            obj.duplicates.append(name)
        obj[name] = value
    return obj


def _refuse_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _finite_float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"the number {text} is out of range")
    return number


_DECODER: Final = json.JSONDecoder(
    object_pairs_hook=_object_from_pairs, parse_constant=_refuse_constant, parse_float=_finite_float
)


def parse_filter(text: str | bytes, dataset: Dataset | None = None, *, max_bytes: int = MAX_FILTER_BYTES) -> Filter:
    """The tree of the filter ``text``; with ``dataset``, also checked against the dataset's fields.

    ``max_bytes`` exists for benchmarks and tests of larger filters; the API always uses the default.

    Raises ``FilterError`` (and nothing else) for any text that is not a valid filter; its ``path`` names the
    offending part (``where.and[2].operator``), or is ``""`` for the size, the JSON syntax and the operator count.
    """
    if isinstance(text, str):
        try:
            data = text.encode("utf-8")
        except UnicodeEncodeError:
            raise FilterError("", "the filter is not valid Unicode (it holds a lone surrogate)") from None
    else:
        data = bytes(text)
    if len(data) > max_bytes:
        raise FilterError("", f"the filter is {len(data)} bytes long; at most {max_bytes} bytes are allowed")
    if not data.strip():
        raise FilterError("", 'the filter is empty; it must be a JSON object with the member "where"')
    try:
        document = _DECODER.decode(data.decode("utf-8"))
    except UnicodeDecodeError:
        raise FilterError("", "the filter is not valid UTF-8") from None
    except RecursionError:
        raise FilterError("", "the filter nests too deeply") from None
    except ValueError as error:
        raise FilterError("", f"the filter is not valid JSON: {error}") from None
    tree = _parse_document(document)
    count = count_operators(tree)
    if count > MAX_OPERATORS:
        raise FilterError("", f"the filter has {count} operators; at most {MAX_OPERATORS} are allowed")
    if dataset is not None:
        validate_filter(tree, dataset)
    return tree


def count_operators(tree: Filter) -> int:
    """The operators ``tree`` writes, as ``MAX_OPERATORS`` counts them: conditions plus groups."""
    count = 0
    stack: list[Node] = [tree.where]
    while stack:
        node = stack.pop()
        count += 1
        if isinstance(node, Group):
            stack.extend(node.members)
    return count


def _parse_document(document: Any) -> Filter:
    if not isinstance(document, dict):
        raise FilterError("", f'the filter must be a JSON object with the member "where", not {_kind(document)}')
    obj = cast(_JsonObject, document)
    _refuse_duplicates(obj, "")
    for name in obj:
        if name != "where":
            raise FilterError(_member_path("", name), 'unknown member; a filter has the single member "where"')
    if "where" not in obj:
        raise FilterError("where", "missing; a filter must have the member where")
    return Filter(_parse_node(obj["where"], "where"))


def _parse_node(node: Any, path: str) -> Node:
    if not isinstance(node, dict):
        raise FilterError(path, f"must be a condition (key, operator, value) or a group (and, or), not {_kind(node)}")
    obj = cast(_JsonObject, node)
    if not obj:
        raise FilterError(path, "is empty; expected a condition (key, operator, value) or a group (and, or)")
    _refuse_duplicates(obj, path)
    if "and" in obj or "or" in obj:
        return _parse_group(obj, path)
    return _parse_condition(obj, path)


def _parse_group(obj: _JsonObject, path: str) -> Group:
    if "and" in obj and "or" in obj:
        raise FilterError(path, "a group has exactly one member, and or or, not both")
    kind = "and" if "and" in obj else "or"
    for name in obj:
        if name != kind:
            raise FilterError(_member_path(path, name), f"unknown member; a group has the single member {kind}")
    members = obj[kind]
    member_path = f"{path}.{kind}"
    if not isinstance(members, list):
        raise FilterError(member_path, f"must be an array of conditions or groups, not {_kind(members)}")
    if not members:
        raise FilterError(member_path, "must not be empty")
    parsed = tuple(_parse_node(member, f"{member_path}[{index}]") for index, member in enumerate(members))
    return Group("and" if kind == "and" else "or", parsed)


def _parse_condition(obj: _JsonObject, path: str) -> Condition:
    for name in obj:
        if name not in _CONDITION_MEMBERS:
            raise FilterError(
                _member_path(path, name), "unknown member; a condition has key, operator and value (a group: and, or)"
            )
    for name in _CONDITION_MEMBERS:
        if name not in obj:
            raise FilterError(f"{path}.{name}", "missing; a condition has key, operator and value")
    key, operator, value = obj["key"], obj["operator"], obj["value"]
    if not isinstance(key, str):
        raise FilterError(f"{path}.key", f"must be a string naming a field, not {_kind(key)}")
    if not key:
        raise FilterError(f"{path}.key", "must not be empty")
    if not isinstance(operator, str):
        raise FilterError(f"{path}.operator", f"must be a string, not {_kind(operator)}")
    if operator not in OPERATORS:
        raise FilterError(f"{path}.operator", f"unknown operator {operator!r}; one of {', '.join(OPERATORS)}")
    return Condition(key, operator, _parse_value(value, operator, f"{path}.value"))


def _parse_value(value: Any, operator: Operator, path: str) -> Scalar | tuple[Scalar, ...]:
    if operator in SET_OPERATORS:
        if not isinstance(value, list):
            raise FilterError(path, f"{operator} takes an array of values, not {_kind(value)}")
        if not value:
            raise FilterError(path, f"{operator} takes a non-empty array")
        return tuple(_parse_scalar(item, f"{path}[{index}]", in_array=True) for index, item in enumerate(value))
    return _parse_scalar(value, path, in_array=False)


def _parse_scalar(value: Any, path: str, *, in_array: bool) -> Scalar:
    if isinstance(value, bool):
        if in_array:
            raise FilterError(path, "must be a string or a number, not a boolean")
        return value
    if isinstance(value, str | int | float):
        if isinstance(value, str) and _has_lone_surrogate(value):
            raise FilterError(path, "is not valid Unicode (it holds a lone surrogate)")
        return value
    expected = "a string or a number" if in_array else "a string (numbers and booleans are also accepted)"
    raise FilterError(path, f"must be {expected}, not {_kind(value)}")


def _has_lone_surrogate(text: str) -> bool:
    try:
        text.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def _refuse_duplicates(obj: _JsonObject, path: str) -> None:
    if obj.duplicates:
        raise FilterError(_member_path(path, obj.duplicates[0]), "appears more than once")


def _member_path(path: str, name: str) -> str:
    readable = name if name.isidentifier() else json.dumps(name, ensure_ascii=False)
    return f"{path}.{readable}" if path else readable


def _kind(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int | float):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Sequence):
        return "an array"
    return "an object"
