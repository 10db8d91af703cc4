"""The reference interpreter: a filter evaluated by walking its tree, one record at a time.

It is the definition the column filter (``edgeplane.logs.filter_columns``, which also falls back on it for a loose
column) and the compiled per-record predicate (``tests.support.filter_compiler``, a test oracle) are tested against,
and the baseline they are measured against; it is written to be obviously right, not fast.

Semantics (also in ``docs/logpush-filters.md``):

- A field is *missing* from a record when the record has no such key, its value is ``None``, or its value is not of
  the field's type (a schema violation by the producer is treated as if the field were absent).
- The positive operators (``eq``, ``lt``, ``leq``, ``gt``, ``geq``, ``startsWith``, ``endsWith``, ``contains``,
  ``in``) are false on a missing field. Each negated operator is the exact complement of its positive one, so
  ``!eq``, ``!startsWith``, ``!endsWith``, ``!contains`` and ``!in`` are true on a missing field.
- Strings compare exactly (case-sensitive, no normalisation); ``contains`` on a string is substring search.
- On an ``array_string`` field, ``contains`` is element membership (an element equal to the value), and ``in`` is
  true when any element is in the set (so an empty array is never ``in`` anything).
- Numbers compare numerically; timestamps as Unix nanoseconds.
- ``and`` is true when every member is, ``or`` when any member is.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from edgeplane.logs.datasets import Dataset, Field
from edgeplane.logs.filter_checker import checked_field, comparand
from edgeplane.logs.filter_tree import NEGATED, Condition, Filter, Node


def evaluate(tree: Filter, record: Mapping[str, Any], dataset: Dataset) -> bool:
    """Whether ``record`` passes ``tree``. ``tree`` must be valid for ``dataset`` (else ``FilterError``)."""
    return _evaluate(tree.where, record, dataset)


def _evaluate(node: Node, record: Mapping[str, Any], dataset: Dataset) -> bool:
    if isinstance(node, Condition):
        return _condition(node, record, dataset)
    if node.kind == "and":
        return all(_evaluate(member, record, dataset) for member in node.members)
    return any(_evaluate(member, record, dataset) for member in node.members)


def _condition(condition: Condition, record: Mapping[str, Any], dataset: Dataset) -> bool:
    field = checked_field(condition, dataset)
    operator = condition.operator
    positive = NEGATED.get(operator, operator)
    expected: Any = comparand(field, positive, condition.value)
    actual: Any = record.get(field.name)
    if not _conforms(field, actual):
        result = False
    elif positive == "eq":
        result = actual == expected
    elif positive == "lt":
        result = actual < expected
    elif positive == "leq":
        result = actual <= expected
    elif positive == "gt":
        result = actual > expected
    elif positive == "geq":
        result = actual >= expected
    elif positive == "startsWith":
        result = actual.startswith(expected)
    elif positive == "endsWith":
        result = actual.endswith(expected)
    elif positive == "contains":
        result = expected in actual  # substring of a string, element of an array
    elif field.type == "array_string":  # in
        result = any(element in expected for element in actual)
    else:
        result = actual in expected
    return not result if operator in NEGATED else result


def _conforms(field: Field, value: Any) -> bool:
    if value is None:
        return False
    kind = field.type
    if kind == "string":
        return isinstance(value, str)
    if kind in ("int", "timestamp"):
        return isinstance(value, int) and not isinstance(value, bool)
    if kind == "float":
        return isinstance(value, int | float) and not isinstance(value, bool)
    if kind == "bool":
        return isinstance(value, bool)
    if kind == "array_string":
        return isinstance(value, list | tuple) and all(isinstance(element, str) for element in value)
    return False
